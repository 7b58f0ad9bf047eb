//! Fuzz target `ietf_control`: see `starling_fuzzing::ietf_control`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::ietf_control(data);
});
