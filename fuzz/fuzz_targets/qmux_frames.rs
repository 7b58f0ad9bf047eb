//! Fuzz target `qmux_frames`: see `starling_fuzzing::qmux_frames`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::qmux_frames(data);
});
