//! What each fuzz target checks, as plain functions over bytes: the cargo-fuzz targets in
//! `fuzz/` call them, and the stable test suite replays every committed corpus through them
//! (`tests/corpus.rs`), so a crash found once stays a regression test.
//!
//! Every decoder is held to the same rule: on any input it returns a value or a typed error,
//! never panics; and what it decodes, encoded again, decodes to the same value.

mod checks;
mod harness;
mod http;
mod ietf;
mod seeds;
mod session;

pub use checks::{
    announce_stream, auth, datagram, frame_header, legacy_setup, lite_message, paths, qmux_frames,
    qmux_params,
};
pub use http::http_request;
pub use ietf::{ietf_control, ietf_data};
pub use seeds::seeds;
pub use session::{ietf_session, session};

/// A target's check: true when the input decoded (and round-tripped).
pub type Check = fn(&[u8]) -> bool;

/// Every target: its name (the `fuzz/fuzz_targets/<name>.rs` file and the
/// `fuzz/corpus/<name>/` directory) and its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("lite_message", lite_message),
    ("frame_header", frame_header),
    ("datagram", datagram),
    ("qmux_frames", qmux_frames),
    ("qmux_params", qmux_params),
    ("auth", auth),
    ("paths", paths),
    ("announce_stream", announce_stream),
    ("legacy_setup", legacy_setup),
    ("ietf_control", ietf_control),
    ("ietf_data", ietf_data),
    ("session", session),
    ("ietf_session", ietf_session),
    ("http_request", http_request),
];
