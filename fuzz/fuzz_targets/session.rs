//! Fuzz target `session`: see `starling_fuzzing::session`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::session(data);
});
