//! Fuzz target `datagram`: see `starling_fuzzing::datagram`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    starling_fuzzing::datagram(data);
});
