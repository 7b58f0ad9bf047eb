//! Fuzz target `paths`: see `starling_fuzzing::paths`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::paths(data);
});
