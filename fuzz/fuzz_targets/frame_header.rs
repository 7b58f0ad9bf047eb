//! Fuzz target `frame_header`: see `starling_fuzzing::frame_header`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::frame_header(data);
});
