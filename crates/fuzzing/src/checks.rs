//! The checks: decode, and for whatever decodes, encode and decode again to the same value.
//! Each returns whether the input decoded (the seed test uses it; fuzz targets ignore it).

use bytes::{Bytes, BytesMut};
use starling_proto::{
    decode_frame_header, decode_message_from, decode_typed, decode_typed_from, encode_frame_header,
    encode_message, encode_typed, Announce, AnnounceDecoder, AnnounceEncoder, AnnounceInit,
    AnnounceOk, AnnounceRequest, Announcement, CompressedAnnouncement, Datagram, Fetch, Goaway,
    GroupHeader, LegacySubscribeOk, Message, Path, Probe, Setup, Subscribe, SubscribeResponse,
    SubscribeUpdate, Track, TrackInfo, TypedMessage, Version,
};

/// The versions fuzzed, picked by a selector byte (the seeds use the same order).
pub const VERSIONS: &[Version] = &[
    Version::Lite06,
    Version::Lite05,
    Version::Lite07Wip,
    Version::Lite04,
    Version::Lite03,
    Version::Lite02,
    Version::Lite01,
];

fn version(selector: u8) -> Version {
    VERSIONS[selector as usize % VERSIONS.len()]
}

/// How one kind of message is read and written.
type Decode<M> = fn(&mut &[u8], Version) -> Result<M, starling_proto::DecodeError>;
type Encode<M> = fn(&M, Version, &mut BytesMut) -> Result<(), starling_proto::EncodeError>;

/// Decode `body`; if it decodes and encodes, the encoding decodes to the same value with
/// nothing left over.
fn round_trip_with<M: PartialEq + std::fmt::Debug>(
    body: &[u8],
    version: Version,
    decode: Decode<M>,
    encode: Encode<M>,
) -> bool {
    let mut input = body;
    let Ok(message) = decode(&mut input, version) else {
        return false;
    };
    let mut encoded = BytesMut::new();
    // A value the decoder accepted may still be one the encoder refuses (the encoder checks
    // bounds the decoder leaves to the session); what it does encode must come back intact.
    if encode(&message, version, &mut encoded).is_err() {
        return true;
    }
    let mut again = &encoded[..];
    let decoded = decode(&mut again, version)
        .unwrap_or_else(|err| panic!("{message:?} encoded to {encoded:?}, which fails: {err}"));
    assert_eq!(decoded, message);
    assert!(
        again.is_empty(),
        "encoding of {message:?} has trailing bytes"
    );
    true
}

fn round_trip<M: Message + PartialEq + std::fmt::Debug>(body: &[u8], version: Version) -> bool {
    round_trip_with(body, version, decode_message_from::<M>, encode_message::<M>)
}

fn round_trip_typed<M: TypedMessage + PartialEq + std::fmt::Debug>(
    body: &[u8],
    version: Version,
) -> bool {
    round_trip_with(body, version, decode_typed_from::<M>, encode_typed::<M>)
}

/// Every moq-lite message: the first byte picks the version and the message, the rest is
/// the `Len + body` (or `Type + Len + body`) the peer sent.
pub fn lite_message(data: &[u8]) -> bool {
    let Some((&selector, body)) = data.split_first() else {
        return false;
    };
    let version = version(selector >> 4);
    match selector & 0x0f {
        0 => round_trip::<Setup>(body, version),
        1 => round_trip::<AnnounceRequest>(body, version),
        2 => round_trip::<AnnounceOk>(body, version),
        3 => round_trip::<Announce>(body, version),
        4 => round_trip_typed::<Announcement>(body, version),
        5 => round_trip::<Subscribe>(body, version),
        6 => round_trip::<SubscribeUpdate>(body, version),
        7 => round_trip_typed::<SubscribeResponse>(body, version),
        8 => round_trip::<Track>(body, version),
        9 => round_trip::<TrackInfo>(body, version),
        10 => round_trip::<GroupHeader>(body, version),
        11 => round_trip::<Fetch>(body, version),
        12 => round_trip::<Probe>(body, version),
        13 => round_trip::<AnnounceInit>(body, version),
        14 => round_trip::<LegacySubscribeOk>(body, version),
        _ => round_trip::<Goaway>(body, version),
    }
}

/// A lite-07 announce stream: compressed announcements resolved one after another against the
/// stream's live set. What resolves, written again by our encoder (which picks its own
/// references) and read back, resolves to the same announcements.
pub fn announce_stream(data: &[u8]) -> bool {
    let version = Version::Lite07Wip;
    let mut buf = BytesMut::from(data);
    let mut decoder = AnnounceDecoder::new();
    let mut resolved = Vec::new();
    while let Ok(Some(wire)) = decode_typed::<CompressedAnnouncement>(&mut buf, version) {
        match decoder.resolve(wire) {
            Ok(announcement) => resolved.push(announcement),
            Err(_) => break,
        }
    }
    let mut encoder = AnnounceEncoder::new(version);
    let mut encoded = BytesMut::new();
    for announcement in &resolved {
        let wire = encoder
            .compress(announcement)
            .unwrap_or_else(|err| panic!("{announcement:?} resolved but does not compress: {err}"));
        if encode_typed(&wire, version, &mut encoded).is_err() {
            // Resolved yet over the encoder's bounds (a resolved path past the byte limit).
            return true;
        }
    }
    let mut decoder = AnnounceDecoder::new();
    for announcement in &resolved {
        let wire = decode_typed::<CompressedAnnouncement>(&mut encoded, version)
            .unwrap_or_else(|err| panic!("our encoding of {announcement:?} fails: {err}"))
            .expect("a whole message");
        let again = decoder
            .resolve(wire)
            .unwrap_or_else(|err| panic!("our references for {announcement:?} fail: {err}"));
        assert_eq!(&again, announcement);
    }
    assert!(encoded.is_empty());
    !resolved.is_empty()
}

/// The legacy in-band SETUP of lite-01/02 (draft-14 framing) and SESSION_INFO: the first
/// byte picks CLIENT_SETUP, SERVER_SETUP or SESSION_INFO (on 01 or 02).
pub fn legacy_setup(data: &[u8]) -> bool {
    use starling_proto::legacy;
    let Some((&selector, body)) = data.split_first() else {
        return false;
    };
    match selector % 3 {
        0 => {
            let mut buf = BytesMut::from(body);
            let Ok(Some(setup)) = legacy::decode_client_setup(&mut buf) else {
                return false;
            };
            let mut encoded = BytesMut::new();
            if legacy::encode_client_setup(&setup, &mut encoded).is_err() {
                return true;
            }
            let again = legacy::decode_client_setup(&mut encoded)
                .unwrap_or_else(|err| panic!("{setup:?} re-encoded fails: {err}"));
            assert_eq!(again, Some(setup));
            true
        }
        1 => {
            let mut buf = BytesMut::from(body);
            let Ok(Some(setup)) = legacy::decode_server_setup(&mut buf) else {
                return false;
            };
            let mut encoded = BytesMut::new();
            if legacy::encode_server_setup(&setup, &mut encoded).is_err() {
                return true;
            }
            let again = legacy::decode_server_setup(&mut encoded)
                .unwrap_or_else(|err| panic!("{setup:?} re-encoded fails: {err}"));
            assert_eq!(again, Some(setup));
            true
        }
        _ => {
            let version = if selector & 0x80 == 0 {
                Version::Lite01
            } else {
                Version::Lite02
            };
            round_trip::<legacy::SessionInfo>(body, version)
        }
    }
}

/// A frame header (`delta + size`).
pub fn frame_header(data: &[u8]) -> bool {
    let Some((&selector, body)) = data.split_first() else {
        return false;
    };
    let version = version(selector);
    let mut buf = BytesMut::from(body);
    let Ok(Some(header)) = decode_frame_header(&mut buf, version) else {
        return false;
    };
    let mut encoded = BytesMut::new();
    if encode_frame_header(&header, version, &mut encoded).is_err() {
        return true;
    }
    let again = decode_frame_header(&mut encoded, version)
        .unwrap_or_else(|err| panic!("{header:?} re-encoded fails: {err}"));
    assert_eq!(again, Some(header));
    assert!(encoded.is_empty());
    true
}

/// An object datagram.
pub fn datagram(data: &[u8]) -> bool {
    let Some((&selector, body)) = data.split_first() else {
        return false;
    };
    let version = version(selector);
    let Ok(datagram) = Datagram::decode(&Bytes::copy_from_slice(body), version) else {
        return false;
    };
    let mut encoded = BytesMut::new();
    if datagram.encode(version, &mut encoded).is_err() {
        return true;
    }
    assert_eq!(datagram.encoded_len(version).ok(), Some(encoded.len()));
    let again = Datagram::decode(&encoded.freeze(), version)
        .unwrap_or_else(|err| panic!("{datagram:?} re-encoded fails: {err}"));
    assert_eq!(again, datagram);
    true
}

/// A QMux record's frames, one after another.
pub fn qmux_frames(data: &[u8]) -> bool {
    let mut input = Bytes::copy_from_slice(data);
    let mut decoded = false;
    while !input.is_empty() {
        let Ok(frame) = starling_qmux::Frame::decode(&mut input) else {
            return decoded;
        };
        decoded = true;
        let mut encoded = BytesMut::new();
        frame.encode(&mut encoded);
        let mut encoded = encoded.freeze();
        let again = starling_qmux::Frame::decode(&mut encoded)
            .unwrap_or_else(|err| panic!("{frame:?} re-encoded fails: {err}"));
        assert_eq!(again, frame);
        assert!(encoded.is_empty());
    }
    decoded
}

/// QMux transport parameters.
pub fn qmux_params(data: &[u8]) -> bool {
    let Ok(params) = starling_qmux::TransportParams::decode(Bytes::copy_from_slice(data)) else {
        return false;
    };
    let again = starling_qmux::TransportParams::decode(params.encode())
        .unwrap_or_else(|err| panic!("{params:?} re-encoded fails: {err:?}"));
    assert_eq!(again, params);
    true
}

/// Keys (JWK, JWKS, base64url), token headers and path patterns, from text.
pub fn auth(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let mut decoded = false;
    if let Ok(key) = starling_auth::Key::parse(text) {
        decoded = true;
        let again = starling_auth::Key::parse(&key.to_json())
            .unwrap_or_else(|err| panic!("{text:?} re-serialized fails: {err}"));
        assert_eq!(again.to_json(), key.to_json());
        let _ = key.verify(text, std::time::SystemTime::UNIX_EPOCH);
    }
    decoded |= starling_auth::token::header(text).is_ok();
    if let Ok(pattern) = text.parse::<starling_auth::Pattern>() {
        decoded = true;
        let again: starling_auth::Pattern = pattern
            .as_str()
            .parse()
            .unwrap_or_else(|err| panic!("{pattern:?} re-parsed fails: {err}"));
        assert_eq!(again.as_str(), pattern.as_str());
        let _ = pattern.matches(text);
    }
    decoded
}

/// Broadcast paths, as HTTP requests and SETUP carry them.
pub fn paths(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(path) = Path::new(text) else {
        return false;
    };
    let again =
        Path::new(path.as_str()).unwrap_or_else(|err| panic!("{path:?} re-parsed fails: {err}"));
    assert_eq!(again, path);
    true
}
