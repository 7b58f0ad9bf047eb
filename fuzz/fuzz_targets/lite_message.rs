//! Fuzz target `lite_message`: see `starling_fuzzing::lite_message`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::lite_message(data);
});
