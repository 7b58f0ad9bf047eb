//! The load frame header: what every generated frame carries in its first bytes.
//!
//! ```text
//! 0      2   3     4                12                20
//! +------+---+-----+----------------+-----------------+---- padding to the frame size
//! | "SL" | 1 |flags| sequence (BE)  | scheduled ns BE |
//! +------+---+-----+----------------+-----------------+----
//! ```
//!
//! The sequence numbers frames per track from 0; the scheduled time is when the schedule
//! said the frame was due (nanoseconds since the Unix epoch), not when it was written, so a
//! stalled sender shows up as latency instead of hiding it. The `prime` flag marks the
//! one-frame group published before a run starts: readers use it to know their subscription
//! is live, and it counts towards neither latency nor loss.

use bytes::{BufMut, Bytes, BytesMut};

/// The first bytes of every header.
pub const MAGIC: [u8; 2] = *b"SL";
/// The header layout version.
pub const VERSION: u8 = 1;
/// Bytes in a header; frames are at least this long.
pub const HEADER_LEN: usize = 20;

const FLAG_PRIME: u8 = 0x01;
const KNOWN_FLAGS: u8 = FLAG_PRIME;

/// What a load frame says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Position of the frame in its track, from 0.
    pub sequence: u64,
    /// When the schedule said the frame was due, in nanoseconds since the Unix epoch.
    pub scheduled_ns: u64,
    /// The priming frame published before the run (not part of the measured stream).
    pub prime: bool,
}

/// Why a payload is not a load frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    Short(usize),
    #[error("bad magic {0:02x?}")]
    BadMagic([u8; 2]),
    #[error("unknown header version {0}")]
    Version(u8),
    #[error("unknown flags {0:#04x}")]
    Flags(u8),
}

impl FrameError {
    /// A stable name for counting errors by kind.
    pub fn kind(&self) -> &'static str {
        match self {
            FrameError::Short(_) => "decode_short",
            FrameError::BadMagic(_) => "decode_magic",
            FrameError::Version(_) => "decode_version",
            FrameError::Flags(_) => "decode_flags",
        }
    }
}

impl FrameHeader {
    /// A measured frame.
    pub fn new(sequence: u64, scheduled_ns: u64) -> Self {
        FrameHeader {
            sequence,
            scheduled_ns,
            prime: false,
        }
    }

    /// The priming frame.
    pub fn prime(scheduled_ns: u64) -> Self {
        FrameHeader {
            sequence: 0,
            scheduled_ns,
            prime: true,
        }
    }

    /// A whole frame of `size` bytes: this header, then zeros. Refused below [`HEADER_LEN`].
    pub fn frame(&self, size: usize) -> Result<Bytes, FrameError> {
        if size < HEADER_LEN {
            return Err(FrameError::Short(size));
        }
        let mut out = BytesMut::with_capacity(size);
        out.put_slice(&MAGIC);
        out.put_u8(VERSION);
        out.put_u8(if self.prime { FLAG_PRIME } else { 0 });
        out.put_u64(self.sequence);
        out.put_u64(self.scheduled_ns);
        out.resize(size, 0);
        Ok(out.freeze())
    }

    /// Read the header at the start of `payload`.
    pub fn decode(payload: &[u8]) -> Result<Self, FrameError> {
        let Some(header) = payload.get(..HEADER_LEN) else {
            return Err(FrameError::Short(payload.len()));
        };
        let magic = [header[0], header[1]];
        if magic != MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        if header[2] != VERSION {
            return Err(FrameError::Version(header[2]));
        }
        let flags = header[3];
        if flags & !KNOWN_FLAGS != 0 {
            return Err(FrameError::Flags(flags));
        }
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&header[at..at + 8]);
            u64::from_be_bytes(bytes)
        };
        Ok(FrameHeader {
            sequence: word(4),
            scheduled_ns: word(12),
            prime: flags & FLAG_PRIME != 0,
        })
    }
}
