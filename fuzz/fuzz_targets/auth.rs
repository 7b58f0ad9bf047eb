//! Fuzz target `auth`: see `starling_fuzzing::auth`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::auth(data);
});
