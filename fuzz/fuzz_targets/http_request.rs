//! Fuzz target `http_request`: see `starling_fuzzing::http_request`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::http_request(data);
});
