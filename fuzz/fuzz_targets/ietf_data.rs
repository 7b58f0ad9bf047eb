//! Fuzz target `ietf_data`: see `starling_fuzzing::ietf_data`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::ietf_data(data);
});
