//! Fuzz target `legacy_setup`: see `starling_fuzzing::legacy_setup`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::legacy_setup(data);
});
