//! Fuzz target `announce_stream`: see `starling_fuzzing::announce_stream`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::announce_stream(data);
});
