//! Fuzz target: every decoder of lite-05 and lite-06 over arbitrary bytes; anything that
//! decodes must re-encode, and the re-encoding must decode to the same value
//! (decode → encode → decode stability). Run: `cargo +nightly fuzz run decode`.
#![no_main]

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use starling_proto::*;

fn stable<M: Message + PartialEq + Debug>(data: &[u8], v: Version) {
    let mut buf = BytesMut::from(data);
    if let Ok(Some(m)) = decode_message::<M>(&mut buf, v) {
        let mut out = BytesMut::new();
        encode_message(&m, v, &mut out).expect("decoded message must re-encode");
        let again = decode_message::<M>(&mut out, v)
            .expect("re-encoding decodes")
            .expect("whole");
        assert_eq!(m, again);
        assert!(out.is_empty());
    }
}

fn stable_typed<M: TypedMessage + PartialEq + Debug>(data: &[u8], v: Version) {
    let mut buf = BytesMut::from(data);
    if let Ok(Some(m)) = decode_typed::<M>(&mut buf, v) {
        let mut out = BytesMut::new();
        encode_typed(&m, v, &mut out).expect("decoded message must re-encode");
        let again = decode_typed::<M>(&mut out, v)
            .expect("re-encoding decodes")
            .expect("whole");
        assert_eq!(m, again);
        assert!(out.is_empty());
    }
}

fuzz_target!(|data: &[u8]| {
    for v in [Version::Lite05, Version::Lite06] {
        stable::<Setup>(data, v);
        stable::<AnnounceRequest>(data, v);
        stable::<AnnounceOk>(data, v);
        stable::<Announce>(data, v);
        stable_typed::<Announcement>(data, v);
        stable::<Track>(data, v);
        stable::<TrackInfo>(data, v);
        stable::<Subscribe>(data, v);
        stable::<SubscribeUpdate>(data, v);
        stable_typed::<SubscribeResponse>(data, v);
        stable::<GroupHeader>(data, v);
        stable::<Fetch>(data, v);
        stable::<Probe>(data, v);
        stable::<Goaway>(data, v);

        let mut buf = BytesMut::from(data);
        if let Ok(Some(f)) = decode_frame_header(&mut buf, v) {
            let mut out = BytesMut::new();
            encode_frame_header(&f, v, &mut out).expect("frame header re-encodes");
            assert_eq!(decode_frame_header(&mut out, v), Ok(Some(f)));
        }

        let bytes = Bytes::copy_from_slice(data);
        if let Ok(d) = Datagram::decode(&bytes, v) {
            let mut out = Vec::new();
            d.encode(v, &mut out).expect("datagram re-encodes");
            assert_eq!(Datagram::decode(&Bytes::from(out), v), Ok(d));
        }
    }
    let _ = BidiType::decode(&mut BytesMut::from(data));
    let _ = UniType::decode(&mut BytesMut::from(data));
});
