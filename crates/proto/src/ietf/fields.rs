//! Fields the control messages share: namespace tuples, track names and group order
//! (docs/wire-ietf.md §2.3, §4.16).
//!
//! A namespace travels as a tuple, `count(i)` then each part `(s)`, at most 32 parts, UTF-8
//! (moq-net refuses binary parts). It maps onto a [`Path`] by joining the parts with `/`,
//! a `/` or `\` inside a part escaped with `\`. Path normalization drops empty parts, so
//! `["a", "", "b"]` arrives as `a/b`.

use crate::coding::{
    read_str, read_u8, read_varint, write_str, write_u8, write_varint, DecodeError, EncodeError,
};
use crate::limits::MAX_PATH_SEGMENTS;
use crate::path::Path;

use super::Draft;

/// Read a namespace tuple as a path.
pub fn read_namespace(r: &mut &[u8], draft: Draft) -> Result<Path, DecodeError> {
    let count = read_varint(r, draft)?;
    if count > MAX_PATH_SEGMENTS as u64 {
        return Err(DecodeError::BoundsExceeded("namespace parts"));
    }
    let mut joined = String::new();
    for i in 0..count {
        if i > 0 {
            joined.push('/');
        }
        for ch in read_str(r, draft)?.chars() {
            if matches!(ch, '/' | '\\') {
                joined.push('\\');
            }
            joined.push(ch);
        }
    }
    Ok(Path::new(&joined)?)
}

/// Write a path as a namespace tuple.
pub fn write_namespace(w: &mut Vec<u8>, path: &Path, draft: Draft) -> Result<(), EncodeError> {
    let parts = split(path.as_str());
    if parts.len() > MAX_PATH_SEGMENTS {
        return Err(EncodeError::BoundsExceeded("namespace parts"));
    }
    write_varint(w, parts.len() as u64, draft)?;
    for part in &parts {
        write_str(w, part, draft)?;
    }
    Ok(())
}

/// A path's tuple parts, undoing the escapes.
fn split(path: &str) -> Vec<String> {
    if path.is_empty() {
        return Vec::new();
    }
    let mut parts = Vec::new();
    let mut part = String::new();
    let mut chars = path.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '/' => parts.push(std::mem::take(&mut part)),
            '\\' => match chars.next() {
                Some(next @ ('/' | '\\')) => part.push(next),
                Some(next) => {
                    part.push('\\');
                    part.push(next);
                }
                None => part.push('\\'),
            },
            _ => part.push(ch),
        }
    }
    parts.push(part);
    parts
}

/// A request's opening Request ID; draft 17 follows it with a Required Request ID Delta,
/// read and dropped (moq-net writes 0 and ignores it).
pub fn read_request_id(r: &mut &[u8], draft: Draft) -> Result<u64, DecodeError> {
    let id = read_varint(r, draft)?;
    if draft.has_request_id_delta() {
        read_varint(r, draft)?;
    }
    Ok(id)
}

pub fn write_request_id(w: &mut Vec<u8>, id: u64, draft: Draft) -> Result<(), EncodeError> {
    write_varint(w, id, draft)?;
    if draft.has_request_id_delta() {
        write_varint(w, 0, draft)?;
    }
    Ok(())
}

/// A reply's Request ID: on the wire on 14-16 only (from 17 the stream names the request;
/// it reads as 0).
pub fn read_reply_id(r: &mut &[u8], draft: Draft) -> Result<u64, DecodeError> {
    if draft.has_control_stream() {
        read_varint(r, draft)
    } else {
        Ok(0)
    }
}

pub fn write_reply_id(w: &mut Vec<u8>, id: u64, draft: Draft) -> Result<(), EncodeError> {
    if draft.has_control_stream() {
        write_varint(w, id, draft)?;
    }
    Ok(())
}

/// A track name, `(s)`.
pub fn read_name(r: &mut &[u8], draft: Draft) -> Result<String, DecodeError> {
    Ok(read_str(r, draft)?.to_owned())
}

pub fn write_name(w: &mut Vec<u8>, name: &str, draft: Draft) -> Result<(), EncodeError> {
    write_str(w, name, draft)
}

/// The order groups are delivered in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GroupOrder {
    /// The publisher's choice (0); read as `Descending` wherever moq-net reads it so.
    Any,
    Ascending,
    /// Newest first (2), what moq-net asks for and declares.
    #[default]
    Descending,
}

impl GroupOrder {
    pub const fn code(self) -> u8 {
        match self {
            GroupOrder::Any => 0,
            GroupOrder::Ascending => 1,
            GroupOrder::Descending => 2,
        }
    }

    /// An exact code; anything above 2 is refused.
    pub fn from_code(code: u64) -> Result<Self, DecodeError> {
        match code {
            0 => Ok(GroupOrder::Any),
            1 => Ok(GroupOrder::Ascending),
            2 => Ok(GroupOrder::Descending),
            _ => Err(DecodeError::InvalidValue("group order")),
        }
    }

    /// A parameter's code, read leniently: 0 and anything unknown are `Descending`.
    pub fn from_param(code: u8) -> Self {
        match code {
            1 => GroupOrder::Ascending,
            _ => GroupOrder::Descending,
        }
    }

    /// Draft 14's inline `(8)` field, exact.
    pub fn read(r: &mut &[u8]) -> Result<Self, DecodeError> {
        Self::from_code(u64::from(read_u8(r)?))
    }

    pub fn write(self, w: &mut Vec<u8>) {
        write_u8(w, self.code());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(parts: &[&str]) -> (Path, Vec<u8>) {
        let mut tuple = Vec::new();
        write_varint(&mut tuple, parts.len() as u64, Draft::D22).unwrap();
        for part in parts {
            write_str(&mut tuple, part, Draft::D22).unwrap();
        }
        let path = read_namespace(&mut &tuple[..], Draft::D22).unwrap();
        let mut again = Vec::new();
        write_namespace(&mut again, &path, Draft::D22).unwrap();
        (path, again)
    }

    #[test]
    fn tuples_and_paths() {
        let (path, again) = round_trip(&["room", "alice"]);
        assert_eq!(path.as_str(), "room/alice");
        assert_eq!(
            again,
            [2, 4, b'r', b'o', b'o', b'm', 5, b'a', b'l', b'i', b'c', b'e']
        );
        // Escapes survive the trip.
        let (path, again) = round_trip(&["a/b", "c\\d"]);
        assert_eq!(path.as_str(), "a\\/b/c\\\\d");
        assert_eq!(read_namespace(&mut &again[..], Draft::D22).unwrap(), path);
        assert_eq!(again, [2, 3, b'a', b'/', b'b', 3, b'c', b'\\', b'd']);
        // The empty tuple is the empty path.
        let (path, again) = round_trip(&[]);
        assert!(path.is_empty());
        assert_eq!(again, [0]);
        // Over 32 parts, and binary parts, are refused.
        let many: Vec<&str> = vec!["x"; 33];
        let mut tuple = vec![33];
        for part in &many {
            write_str(&mut tuple, part, Draft::D22).unwrap();
        }
        assert!(read_namespace(&mut &tuple[..], Draft::D22).is_err());
        assert_eq!(
            read_namespace(&mut &[1, 1, 0xff][..], Draft::D22),
            Err(DecodeError::InvalidUtf8)
        );
    }

    #[test]
    fn group_order() {
        assert_eq!(GroupOrder::read(&mut &[2][..]), Ok(GroupOrder::Descending));
        assert!(GroupOrder::read(&mut &[3][..]).is_err());
        assert_eq!(GroupOrder::from_param(0), GroupOrder::Descending);
        assert_eq!(GroupOrder::from_param(9), GroupOrder::Descending);
        assert_eq!(GroupOrder::from_param(1), GroupOrder::Ascending);
    }
}
