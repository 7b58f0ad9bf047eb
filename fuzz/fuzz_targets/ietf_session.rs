//! Fuzz target `ietf_session`: see `starling_fuzzing::ietf_session`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::ietf_session(data);
});
