//! Fuzz target `qmux_params`: see `starling_fuzzing::qmux_params`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::qmux_params(data);
});
