//! Sans-IO codec for moq-lite, byte-compatible with moq-dev's moq-net 0.3.18.
//!
//! Everything here is plain data and pure functions: no sockets, no async, no tokio. The
//! wire (lite-06, primary, and lite-05) is described in `docs/wire.md`. Both versions are
//! fully implemented; the other rows of the version table return `Unsupported` wherever
//! their layout differs.
//!
//! Typical streaming use: keep a [`bytes::BytesMut`] per stream, append what the transport
//! delivers, and call [`decode_message`] / [`decode_typed`] / [`decode_frame_header`] until
//! they return `Ok(None)` (not enough bytes yet; nothing consumed).
//!
//! ```
//! use bytes::BytesMut;
//! use starling_proto::{decode_message, encode_message, Path, Track, Version};
//!
//! let track = Track { broadcast: Path::new("demo/clock").unwrap(), track: "seconds".into() };
//! let mut buf = BytesMut::new();
//! encode_message(&track, Version::Lite06, &mut buf).unwrap();
//! assert_eq!(buf[0], 0x13);
//! let mut partial = BytesMut::from(&buf[..5]);
//! assert_eq!(decode_message::<Track>(&mut partial, Version::Lite06).unwrap(), None);
//! assert_eq!(decode_message::<Track>(&mut buf, Version::Lite06).unwrap(), Some(track));
//! ```

pub mod announce;
pub mod coding;
pub mod compression;
pub mod cost;
pub mod datagram;
pub mod error;
pub mod fetch;
pub mod framing;
pub mod goaway;
pub mod group;
pub mod hops;
pub mod ietf;
pub mod legacy;
pub mod limits;
pub mod path;
pub mod probe;
pub mod protocol;
pub mod setup;
pub mod stream;
pub mod subscribe;
pub mod track;
pub mod varint;
pub mod version;

pub use announce::{
    Announce, AnnounceField, AnnounceInit, AnnounceOk, AnnounceRequest, AnnounceStatus,
    Announcement, TypedAnnouncement,
};
pub use coding::{DecodeError, EncodeError};
pub use compression::{AnnounceDecoder, AnnounceEncoder, CompressedAnnouncement, HopsRef, PathRef};
pub use cost::RouteCost;
pub use datagram::Datagram;
pub use error::{wt_decode, wt_encode, SessionCode, StreamCode};
pub use fetch::Fetch;
pub use framing::{
    decode_message, decode_message_from, decode_message_with_limit, decode_typed,
    decode_typed_from, decode_typed_with_limit, encode_message, encode_typed, peek_message,
    peek_typed, Message, TypedMessage,
};
pub use goaway::Goaway;
pub use group::{
    decode_frame_header, decode_frame_header_with_limit, encode_frame_header, peek_frame_header,
    FrameHeader, GroupHeader,
};
pub use hops::{Hops, HopsError};
pub use path::{Path, PathError};
pub use probe::Probe;
pub use protocol::Protocol;
pub use setup::{Parameters, ProbeLevel, Role, Setup};
pub use stream::{BidiType, UniType};
pub use subscribe::{LegacySubscribeOk, Subscribe, SubscribeResponse, SubscribeUpdate};
pub use track::{Track, TrackInfo};
pub use version::{UnknownVersion, Version, LEGACY_ALPN};
