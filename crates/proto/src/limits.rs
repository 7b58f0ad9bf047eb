//! Decoder limits (docs/wire.md §9): every bound a peer's bytes are checked against.
//!
//! The values match moq-net 0.3.18. The encoder checks the same bounds, so it never emits
//! anything its own decoder would refuse.

/// Largest value a QUIC varint can carry: 2^62 - 1 (RFC 9000 §16).
pub const MAX_VARINT: u64 = (1 << 62) - 1;

/// Largest body of a lite control message, checked as soon as the length prefix is read.
pub const MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

/// Largest SETUP body.
pub const MAX_SETUP_SIZE: usize = 64 * 1024;

/// Most parameters in one SETUP.
pub const MAX_PARAMETERS: usize = 64;

/// Most `/`-separated segments in a [`Path`](crate::Path) (moq-net's `Path::MAX_PARTS`).
pub const MAX_PATH_SEGMENTS: usize = 32;

/// Most bytes in a normalized [`Path`](crate::Path).
///
/// Not a moq-net limit: moq-net bounds a path only by its segment count and the message
/// size. Starling adds this cap so a peer cannot make one path (and every key derived from
/// it) grow up to the 64 MiB message limit. 4096 bytes is far beyond any real broadcast
/// name (32 segments of 128 bytes each).
pub const MAX_PATH_BYTES: usize = 4096;

/// Most entries in a hop chain.
pub const MAX_HOPS: usize = 32;

/// Most bytes in a GOAWAY's New Session URI.
pub const MAX_GOAWAY_URI: usize = 8192;

/// Largest single frame payload (stream code FRAME_TOO_LARGE 0x38 beyond it).
pub const MAX_FRAME_SIZE: u64 = 32 * 1024 * 1024;

/// Largest group, summed over its frame payloads (stream code GROUP_TOO_LARGE 0x32 beyond it).
pub const MAX_GROUP_SIZE: u64 = 32 * 1024 * 1024;

/// Most frames in one group (stream code GROUP_TOO_LARGE 0x32 beyond it).
pub const MAX_GROUP_FRAMES: u64 = 8192;

/// Smallest accepted ZigZag-decoded value: -2^61.
pub const MIN_ZIGZAG: i64 = -(1 << 61);

/// Largest accepted ZigZag-decoded value: 2^61 - 1.
pub const MAX_ZIGZAG: i64 = (1 << 61) - 1;
