//! QX_TRANSPORT_PARAMETERS contents: the `id(i) len(i) value` list and its rules (docs/wire.md §8.4).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::ParamsError;
use crate::varint;

/// Default and minimum `max_record_size` (draft-01).
pub const DEFAULT_MAX_RECORD_SIZE: u64 = 16382;

/// Parameter ids.
pub mod id {
    pub const MAX_IDLE_TIMEOUT: u64 = 0x01;
    pub const INITIAL_MAX_DATA: u64 = 0x04;
    pub const INITIAL_MAX_STREAM_DATA_BIDI_LOCAL: u64 = 0x05;
    pub const INITIAL_MAX_STREAM_DATA_BIDI_REMOTE: u64 = 0x06;
    pub const INITIAL_MAX_STREAM_DATA_UNI: u64 = 0x07;
    pub const INITIAL_MAX_STREAMS_BIDI: u64 = 0x08;
    pub const INITIAL_MAX_STREAMS_UNI: u64 = 0x09;
    pub const RESET_STREAM_AT: u64 = 0x1d;
    pub const MAX_DATAGRAM_FRAME_SIZE: u64 = 0x20;
    pub const MAX_RECORD_SIZE: u64 = 0x0571_c594_29cd_0845;
    pub const APPLICATION_PROTOCOLS: u64 = 0x3d4f_9c2a_8b1e_6075;
}

/// Most application protocols we accept in one list (the list is bounded by the record anyway).
const MAX_PROTOCOLS: usize = 64;

/// One side's transport parameters. Zero means "absent" for every numeric field (QUIC
/// defaults), except `max_record_size`, which defaults to 16382.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportParams {
    /// Milliseconds; 0 disables (01+).
    pub max_idle_timeout: u64,
    pub initial_max_data: u64,
    pub initial_max_stream_data_bidi_local: u64,
    pub initial_max_stream_data_bidi_remote: u64,
    pub initial_max_stream_data_uni: u64,
    pub initial_max_streams_bidi: u64,
    pub initial_max_streams_uni: u64,
    /// Largest DATAGRAM frame accepted; 0 = no datagrams (01+).
    pub max_datagram_frame_size: u64,
    pub max_record_size: u64,
    /// We accept RESET_STREAM_AT (02 only; empty value).
    pub reset_stream_at: bool,
    /// In-band ALPN (TCP/unix only), preference order.
    pub application_protocols: Vec<String>,
}

impl Default for TransportParams {
    fn default() -> Self {
        Self {
            max_idle_timeout: 0,
            initial_max_data: 0,
            initial_max_stream_data_bidi_local: 0,
            initial_max_stream_data_bidi_remote: 0,
            initial_max_stream_data_uni: 0,
            initial_max_streams_bidi: 0,
            initial_max_streams_uni: 0,
            max_datagram_frame_size: 0,
            max_record_size: DEFAULT_MAX_RECORD_SIZE,
            reset_stream_at: false,
            application_protocols: Vec::new(),
        }
    }
}

/// QUIC v1 ids that QMux forbids.
fn forbidden(id: u64) -> bool {
    matches!(id, 0x00 | 0x02 | 0x03 | 0x0a..=0x10)
}

impl TransportParams {
    /// The TLV list, in the order qmux 0.5.3 writes it (so the relay's frame is byte-exact).
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        let numeric = [
            (id::MAX_IDLE_TIMEOUT, self.max_idle_timeout),
            (id::INITIAL_MAX_DATA, self.initial_max_data),
            (
                id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL,
                self.initial_max_stream_data_bidi_local,
            ),
            (
                id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE,
                self.initial_max_stream_data_bidi_remote,
            ),
            (
                id::INITIAL_MAX_STREAM_DATA_UNI,
                self.initial_max_stream_data_uni,
            ),
            (id::INITIAL_MAX_STREAMS_BIDI, self.initial_max_streams_bidi),
            (id::INITIAL_MAX_STREAMS_UNI, self.initial_max_streams_uni),
            (id::MAX_DATAGRAM_FRAME_SIZE, self.max_datagram_frame_size),
            (id::MAX_RECORD_SIZE, self.max_record_size),
        ];
        for (id, value) in numeric {
            if value != 0 {
                varint::put(&mut buf, id);
                varint::put(&mut buf, varint::size(value) as u64);
                varint::put(&mut buf, value);
            }
        }
        if self.reset_stream_at {
            varint::put(&mut buf, id::RESET_STREAM_AT);
            varint::put(&mut buf, 0);
        }
        if !self.application_protocols.is_empty() {
            let mut value = BytesMut::new();
            for p in &self.application_protocols {
                varint::put(&mut value, p.len() as u64);
                value.put_slice(p.as_bytes());
            }
            varint::put(&mut buf, id::APPLICATION_PROTOCOLS);
            varint::put(&mut buf, value.len() as u64);
            buf.put_slice(&value);
        }
        buf.freeze()
    }

    /// Parse a TLV list. Unknown ids are skipped; duplicates and forbidden ids are errors.
    /// Version-dependent checks live in [`TransportParams::validate`].
    pub fn decode(mut data: Bytes) -> Result<Self, ParamsError> {
        let mut params = TransportParams::default();
        let mut seen: Vec<u64> = Vec::new();
        while data.has_remaining() {
            let id = varint::get(&mut data).map_err(|_| ParamsError::Truncated)?;
            let len = varint::get(&mut data).map_err(|_| ParamsError::Truncated)?;
            if (data.remaining() as u64) < len {
                return Err(ParamsError::Truncated);
            }
            let mut value = data.split_to(len as usize);
            if forbidden(id) {
                return Err(ParamsError::Forbidden(id));
            }
            let known = matches!(
                id,
                id::MAX_IDLE_TIMEOUT | id::INITIAL_MAX_DATA
                    ..=id::INITIAL_MAX_STREAMS_UNI
                        | id::RESET_STREAM_AT
                        | id::MAX_DATAGRAM_FRAME_SIZE
                        | id::MAX_RECORD_SIZE
                        | id::APPLICATION_PROTOCOLS
            );
            if !known {
                continue;
            }
            if seen.contains(&id) {
                return Err(ParamsError::Duplicate(id));
            }
            seen.push(id);
            match id {
                id::RESET_STREAM_AT => {
                    if value.has_remaining() {
                        return Err(ParamsError::Malformed(id));
                    }
                    params.reset_stream_at = true;
                }
                id::APPLICATION_PROTOCOLS => {
                    params.application_protocols = decode_protocols(&mut value)?;
                }
                _ => {
                    let v = varint::get(&mut value).map_err(|_| ParamsError::Malformed(id))?;
                    if value.has_remaining() {
                        return Err(ParamsError::Malformed(id));
                    }
                    match id {
                        id::MAX_IDLE_TIMEOUT => params.max_idle_timeout = v,
                        id::INITIAL_MAX_DATA => params.initial_max_data = v,
                        id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL => {
                            params.initial_max_stream_data_bidi_local = v
                        }
                        id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE => {
                            params.initial_max_stream_data_bidi_remote = v
                        }
                        id::INITIAL_MAX_STREAM_DATA_UNI => params.initial_max_stream_data_uni = v,
                        id::INITIAL_MAX_STREAMS_BIDI => params.initial_max_streams_bidi = v,
                        id::INITIAL_MAX_STREAMS_UNI => params.initial_max_streams_uni = v,
                        id::MAX_DATAGRAM_FRAME_SIZE => params.max_datagram_frame_size = v,
                        _ => params.max_record_size = v,
                    }
                }
            }
        }
        Ok(params)
    }

    /// The checks that depend on the wire version and on how the ALPN was negotiated:
    /// `max_record_size` below 16382 is an error on record versions, stream counts above
    /// 2^60 are invalid, and `application_protocols` is only allowed for in-band negotiation.
    pub fn validate(&self, uses_records: bool, in_band_alpn: bool) -> Result<(), ParamsError> {
        if uses_records && self.max_record_size < DEFAULT_MAX_RECORD_SIZE {
            return Err(ParamsError::RecordSizeTooSmall(self.max_record_size));
        }
        if self.initial_max_streams_bidi > 1 << 60 {
            return Err(ParamsError::Malformed(id::INITIAL_MAX_STREAMS_BIDI));
        }
        if self.initial_max_streams_uni > 1 << 60 {
            return Err(ParamsError::Malformed(id::INITIAL_MAX_STREAMS_UNI));
        }
        if !in_band_alpn && !self.application_protocols.is_empty() {
            return Err(ParamsError::UnexpectedProtocols);
        }
        Ok(())
    }
}

fn decode_protocols(value: &mut Bytes) -> Result<Vec<String>, ParamsError> {
    let bad = ParamsError::Malformed(id::APPLICATION_PROTOCOLS);
    let mut out = Vec::new();
    while value.has_remaining() {
        let len = varint::get(value).map_err(|_| bad.clone())?;
        if len == 0 || (value.remaining() as u64) < len || out.len() >= MAX_PROTOCOLS {
            return Err(bad);
        }
        let name = value.split_to(len as usize);
        let name = std::str::from_utf8(&name).map_err(|_| bad.clone())?;
        out.push(name.to_owned());
    }
    Ok(out)
}

/// In-band ALPN: the first entry of the server's list that the client also offered.
pub fn negotiate_protocol(server: &[String], client: &[String]) -> Option<String> {
    server.iter().find(|p| client.contains(p)).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv(bytes: &[u8]) -> Result<TransportParams, ParamsError> {
        TransportParams::decode(Bytes::copy_from_slice(bytes))
    }

    #[test]
    fn zero_is_omitted_and_defaults_apply() {
        let params = TransportParams {
            max_record_size: 0,
            ..Default::default()
        };
        assert!(params.encode().is_empty());
        let decoded = tlv(&[]).unwrap();
        assert_eq!(decoded.max_record_size, DEFAULT_MAX_RECORD_SIZE);
        assert_eq!(decoded.initial_max_data, 0);
    }

    #[test]
    fn rules() {
        assert_eq!(
            tlv(&[0x04, 0x01, 0x05, 0x04, 0x01, 0x06]),
            Err(ParamsError::Duplicate(4))
        );
        for forbidden in [0x00u8, 0x02, 0x03, 0x0a, 0x0f, 0x10] {
            assert_eq!(
                tlv(&[forbidden, 0x00]),
                Err(ParamsError::Forbidden(u64::from(forbidden)))
            );
        }
        // An unknown id is skipped, its value untouched.
        assert_eq!(
            tlv(&[0x21, 0x02, 0xff, 0xff]).unwrap(),
            TransportParams::default()
        );
        // A value that does not exactly fill its length.
        assert_eq!(
            tlv(&[0x04, 0x02, 0x05, 0x00]),
            Err(ParamsError::Malformed(4))
        );
        assert_eq!(tlv(&[0x04, 0x03, 0x05]), Err(ParamsError::Truncated));
        assert_eq!(tlv(&[0x1d, 0x01, 0x00]), Err(ParamsError::Malformed(0x1d)));
        // max_record_size below the minimum, only on record versions.
        let small = tlv(&[
            0xc5, 0x71, 0xc5, 0x94, 0x29, 0xcd, 0x08, 0x45, 0x02, 0x7f, 0xfd,
        ])
        .unwrap();
        assert_eq!(
            small.validate(true, false),
            Err(ParamsError::RecordSizeTooSmall(16381))
        );
        assert_eq!(small.validate(false, false), Ok(()));
    }

    #[test]
    fn application_protocols_only_in_band() {
        let params = TransportParams {
            application_protocols: vec!["moq-lite-06".into(), "moq-lite-05".into()],
            ..Default::default()
        };
        let decoded = TransportParams::decode(params.encode()).unwrap();
        assert_eq!(decoded, params);
        assert_eq!(decoded.validate(true, true), Ok(()));
        assert_eq!(
            decoded.validate(true, false),
            Err(ParamsError::UnexpectedProtocols)
        );
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            negotiate_protocol(
                &a(&["moq-lite-06", "moq-lite-05"]),
                &a(&["moq-lite-05", "moq-lite-06"])
            ),
            Some("moq-lite-06".into())
        );
        assert_eq!(negotiate_protocol(&a(&["x"]), &a(&["y"])), None);
        // Empty names and bad UTF-8 are malformed.
        let bad = [0xfd, 0x4f, 0x9c, 0x2a, 0x8b, 0x1e, 0x60, 0x75, 0x01, 0x00];
        assert_eq!(
            tlv(&bad),
            Err(ParamsError::Malformed(id::APPLICATION_PROTOCOLS))
        );
    }
}
