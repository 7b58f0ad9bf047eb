//! Test-only package: the interoperability suite lives in `tests/`; this library is empty.
