//! What the golden-bytes tests share: the versions, the names of the worked example, and
//! splitting a stream's type off its bytes.

use bytes::BytesMut;
use starling_proto::*;

use super::hex;

pub const V5: Version = Version::Lite05;
pub const V6: Version = Version::Lite06;

pub const DEMO_CLOCK: &str = "0a 64656d6f2f636c6f636b";
pub const SECONDS: &str = "07 7365636f6e6473";
pub const VIDEO: &str = "05 766964656f";

pub fn cat(parts: &[&str]) -> String {
    parts.join(" ")
}

pub fn uni(bytes: &str) -> (UniType, BytesMut) {
    let mut buf = BytesMut::from(&hex(bytes)[..]);
    let t = UniType::decode(&mut buf, Version::Lite06).unwrap().unwrap();
    (t, buf)
}

pub fn bidi(bytes: &str) -> (BidiType, BytesMut) {
    let mut buf = BytesMut::from(&hex(bytes)[..]);
    let t = BidiType::decode(&mut buf, Version::Lite06)
        .unwrap()
        .unwrap();
    (t, buf)
}
