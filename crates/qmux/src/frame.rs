//! QMux frames (docs/wire.md §8.3): the QUIC v1 subset plus QX_TRANSPORT_PARAMETERS, QX_PING and DATAGRAM.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::params::TransportParams;
use crate::varint;
use crate::version::{Dir, StreamId};

/// Frame type values.
pub mod ty {
    pub const PADDING: u64 = 0x00;
    pub const RESET_STREAM: u64 = 0x04;
    pub const STOP_SENDING: u64 = 0x05;
    pub const STREAM: u64 = 0x08;
    pub const STREAM_MAX: u64 = 0x0f;
    pub const MAX_DATA: u64 = 0x10;
    pub const MAX_STREAM_DATA: u64 = 0x11;
    pub const MAX_STREAMS_BIDI: u64 = 0x12;
    pub const MAX_STREAMS_UNI: u64 = 0x13;
    pub const DATA_BLOCKED: u64 = 0x14;
    pub const STREAM_DATA_BLOCKED: u64 = 0x15;
    pub const STREAMS_BLOCKED_BIDI: u64 = 0x16;
    pub const STREAMS_BLOCKED_UNI: u64 = 0x17;
    pub const CONNECTION_CLOSE: u64 = 0x1c;
    pub const APPLICATION_CLOSE: u64 = 0x1d;
    pub const RESET_STREAM_AT: u64 = 0x24;
    pub const DATAGRAM: u64 = 0x30;
    pub const DATAGRAM_LEN: u64 = 0x31;
    pub const QX_TRANSPORT_PARAMETERS: u64 = 0x3f51_5330_0d0a_0d0a;
    pub const QX_PING_REQUEST: u64 = 0x348c_6752_9ef8_c7bd;
    pub const QX_PING_RESPONSE: u64 = 0x348c_6752_9ef8_c7be;
}

/// Largest MAX_STREAMS / STREAMS_BLOCKED value (RFC 9000 §19.11).
pub const MAX_STREAM_COUNT: u64 = 1 << 60;

/// A STREAM frame (types 0x08–0x0f).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFrame {
    pub id: StreamId,
    /// `None` when the OFF bit is clear (offset 0 per QUIC).
    pub offset: Option<u64>,
    pub data: Bytes,
    pub fin: bool,
    /// The LEN bit: without it the data runs to the end of the record, so the frame must be
    /// the record's last.
    pub explicit_len: bool,
}

/// One QMux frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Padding,
    ResetStream {
        id: StreamId,
        code: u64,
        final_size: u64,
    },
    /// RESET_STREAM_AT (0x24, draft-02, receive only: we never send it).
    ResetStreamAt {
        id: StreamId,
        code: u64,
        final_size: u64,
        reliable_size: u64,
    },
    StopSending {
        id: StreamId,
        code: u64,
    },
    Stream(StreamFrame),
    MaxData(u64),
    MaxStreamData {
        id: StreamId,
        max: u64,
    },
    MaxStreams {
        dir: Dir,
        max: u64,
    },
    DataBlocked(u64),
    StreamDataBlocked {
        id: StreamId,
        limit: u64,
    },
    StreamsBlocked {
        dir: Dir,
        limit: u64,
    },
    /// CONNECTION_CLOSE (0x1c): a transport error; `frame_type` is the offending type (we send 0).
    ConnectionClose {
        code: u64,
        frame_type: u64,
        reason: Bytes,
    },
    /// APPLICATION_CLOSE (0x1d): the moq session close code and reason.
    ApplicationClose {
        code: u64,
        reason: Bytes,
    },
    /// DATAGRAM: 0x31 with a length, 0x30 running to the end of the record.
    Datagram {
        data: Bytes,
        explicit_len: bool,
    },
    TransportParameters(TransportParams),
    PingRequest(u64),
    PingResponse(u64),
}

impl Frame {
    /// Append the frame's encoding.
    pub fn encode(&self, buf: &mut BytesMut) {
        let put = |buf: &mut BytesMut, v: u64| varint::put(buf, v);
        match self {
            Frame::Padding => put(buf, ty::PADDING),
            Frame::ResetStream {
                id,
                code,
                final_size,
            } => {
                put(buf, ty::RESET_STREAM);
                put(buf, id.0);
                put(buf, *code);
                put(buf, *final_size);
            }
            Frame::ResetStreamAt {
                id,
                code,
                final_size,
                reliable_size,
            } => {
                put(buf, ty::RESET_STREAM_AT);
                put(buf, id.0);
                put(buf, *code);
                put(buf, *final_size);
                put(buf, *reliable_size);
            }
            Frame::StopSending { id, code } => {
                put(buf, ty::STOP_SENDING);
                put(buf, id.0);
                put(buf, *code);
            }
            Frame::Stream(s) => {
                let t = ty::STREAM
                    | if s.offset.is_some() { 0x04 } else { 0 }
                    | if s.explicit_len { 0x02 } else { 0 }
                    | u64::from(s.fin);
                put(buf, t);
                put(buf, s.id.0);
                if let Some(offset) = s.offset {
                    put(buf, offset);
                }
                if s.explicit_len {
                    put(buf, s.data.len() as u64);
                }
                buf.put_slice(&s.data);
            }
            Frame::MaxData(max) => {
                put(buf, ty::MAX_DATA);
                put(buf, *max);
            }
            Frame::MaxStreamData { id, max } => {
                put(buf, ty::MAX_STREAM_DATA);
                put(buf, id.0);
                put(buf, *max);
            }
            Frame::MaxStreams { dir, max } => {
                put(
                    buf,
                    if *dir == Dir::Bi {
                        ty::MAX_STREAMS_BIDI
                    } else {
                        ty::MAX_STREAMS_UNI
                    },
                );
                put(buf, *max);
            }
            Frame::DataBlocked(limit) => {
                put(buf, ty::DATA_BLOCKED);
                put(buf, *limit);
            }
            Frame::StreamDataBlocked { id, limit } => {
                put(buf, ty::STREAM_DATA_BLOCKED);
                put(buf, id.0);
                put(buf, *limit);
            }
            Frame::StreamsBlocked { dir, limit } => {
                put(
                    buf,
                    if *dir == Dir::Bi {
                        ty::STREAMS_BLOCKED_BIDI
                    } else {
                        ty::STREAMS_BLOCKED_UNI
                    },
                );
                put(buf, *limit);
            }
            Frame::ConnectionClose {
                code,
                frame_type,
                reason,
            } => {
                put(buf, ty::CONNECTION_CLOSE);
                put(buf, *code);
                put(buf, *frame_type);
                put(buf, reason.len() as u64);
                buf.put_slice(reason);
            }
            Frame::ApplicationClose { code, reason } => {
                put(buf, ty::APPLICATION_CLOSE);
                put(buf, *code);
                put(buf, reason.len() as u64);
                buf.put_slice(reason);
            }
            Frame::Datagram { data, explicit_len } => {
                if *explicit_len {
                    put(buf, ty::DATAGRAM_LEN);
                    put(buf, data.len() as u64);
                } else {
                    put(buf, ty::DATAGRAM);
                }
                buf.put_slice(data);
            }
            Frame::TransportParameters(params) => {
                let body = params.encode();
                put(buf, ty::QX_TRANSPORT_PARAMETERS);
                put(buf, body.len() as u64);
                buf.put_slice(&body);
            }
            Frame::PingRequest(seq) => {
                put(buf, ty::QX_PING_REQUEST);
                put(buf, *seq);
            }
            Frame::PingResponse(seq) => {
                put(buf, ty::QX_PING_RESPONSE);
                put(buf, *seq);
            }
        }
    }

    /// The encoding as its own buffer.
    pub fn to_bytes(&self) -> Bytes {
        let mut buf = BytesMut::new();
        self.encode(&mut buf);
        buf.freeze()
    }

    /// Decode one frame from the front of `buf`, advancing past it. A STREAM frame without
    /// LEN and a 0x30 DATAGRAM take the rest of `buf`.
    pub fn decode(buf: &mut Bytes) -> Result<Frame, DecodeError> {
        let t = varint::get(buf)?;
        let mut v = || varint::get(buf);
        let frame = match t {
            ty::PADDING => Frame::Padding,
            ty::RESET_STREAM => Frame::ResetStream {
                id: StreamId(v()?),
                code: v()?,
                final_size: v()?,
            },
            ty::RESET_STREAM_AT => {
                let (id, code, final_size, reliable_size) = (v()?, v()?, v()?, v()?);
                if reliable_size > final_size {
                    return Err(DecodeError::Malformed("reliable size beyond final size"));
                }
                Frame::ResetStreamAt {
                    id: StreamId(id),
                    code,
                    final_size,
                    reliable_size,
                }
            }
            ty::STOP_SENDING => Frame::StopSending {
                id: StreamId(v()?),
                code: v()?,
            },
            ty::STREAM..=ty::STREAM_MAX => {
                let id = StreamId(varint::get(buf)?);
                let offset = if t & 0x04 != 0 {
                    Some(varint::get(buf)?)
                } else {
                    None
                };
                let explicit_len = t & 0x02 != 0;
                let len = if explicit_len {
                    varint::get(buf)?
                } else {
                    buf.remaining() as u64
                };
                if (buf.remaining() as u64) < len {
                    return Err(DecodeError::Truncated);
                }
                if offset.unwrap_or(0).saturating_add(len) > varint::MAX {
                    return Err(DecodeError::Malformed("stream offset beyond 2^62"));
                }
                Frame::Stream(StreamFrame {
                    id,
                    offset,
                    data: buf.split_to(len as usize),
                    fin: t & 0x01 != 0,
                    explicit_len,
                })
            }
            ty::MAX_DATA => Frame::MaxData(v()?),
            ty::MAX_STREAM_DATA => Frame::MaxStreamData {
                id: StreamId(v()?),
                max: v()?,
            },
            ty::MAX_STREAMS_BIDI | ty::MAX_STREAMS_UNI => {
                let max = v()?;
                if max > MAX_STREAM_COUNT {
                    return Err(DecodeError::Malformed("stream count beyond 2^60"));
                }
                let dir = if t == ty::MAX_STREAMS_BIDI {
                    Dir::Bi
                } else {
                    Dir::Uni
                };
                Frame::MaxStreams { dir, max }
            }
            ty::DATA_BLOCKED => Frame::DataBlocked(v()?),
            ty::STREAM_DATA_BLOCKED => Frame::StreamDataBlocked {
                id: StreamId(v()?),
                limit: v()?,
            },
            ty::STREAMS_BLOCKED_BIDI | ty::STREAMS_BLOCKED_UNI => {
                let limit = v()?;
                if limit > MAX_STREAM_COUNT {
                    return Err(DecodeError::Malformed("stream count beyond 2^60"));
                }
                let dir = if t == ty::STREAMS_BLOCKED_BIDI {
                    Dir::Bi
                } else {
                    Dir::Uni
                };
                Frame::StreamsBlocked { dir, limit }
            }
            ty::CONNECTION_CLOSE => {
                let (code, frame_type) = (v()?, v()?);
                let reason = length_prefixed(buf)?;
                Frame::ConnectionClose {
                    code,
                    frame_type,
                    reason,
                }
            }
            ty::APPLICATION_CLOSE => {
                let code = v()?;
                let reason = length_prefixed(buf)?;
                Frame::ApplicationClose { code, reason }
            }
            ty::DATAGRAM => Frame::Datagram {
                data: buf.split_to(buf.remaining()),
                explicit_len: false,
            },
            ty::DATAGRAM_LEN => Frame::Datagram {
                data: length_prefixed(buf)?,
                explicit_len: true,
            },
            ty::QX_TRANSPORT_PARAMETERS => {
                let body = length_prefixed(buf)?;
                Frame::TransportParameters(TransportParams::decode(body)?)
            }
            ty::QX_PING_REQUEST => Frame::PingRequest(v()?),
            ty::QX_PING_RESPONSE => Frame::PingResponse(v()?),
            other => return Err(DecodeError::UnknownType(other)),
        };
        Ok(frame)
    }

    /// Whether the frame, once decoded, delimits itself (STREAM without LEN and DATAGRAM 0x30
    /// do not). Only self-delimiting frames may be followed by another in a record.
    pub fn is_self_delimiting(&self) -> bool {
        match self {
            Frame::Stream(s) => s.explicit_len,
            Frame::Datagram { explicit_len, .. } => *explicit_len,
            _ => true,
        }
    }
}

fn length_prefixed(buf: &mut Bytes) -> Result<Bytes, DecodeError> {
    let len = varint::get(buf)?;
    if (buf.remaining() as u64) < len {
        return Err(DecodeError::Truncated);
    }
    Ok(buf.split_to(len as usize))
}

/// Decode every frame of one record (or WebSocket message), in order.
pub fn decode_all(mut record: Bytes) -> Result<Vec<Frame>, DecodeError> {
    let mut frames = Vec::new();
    while record.has_remaining() {
        frames.push(Frame::decode(&mut record)?);
    }
    Ok(frames)
}

/// The largest STREAM payload whose frame (type, id, offset, length, data) fits `budget`.
/// The length field's width depends on the payload, so try each width: a payload that fits
/// the room left by a `w`-byte field encodes its length in at most `w` bytes.
pub fn max_stream_payload(budget: u64, id: StreamId, offset: u64) -> u64 {
    let header = 1 + varint::size(id.0) as u64 + varint::size(offset) as u64;
    let available = budget.saturating_sub(header);
    [
        (1u64, 63u64),
        (2, 16383),
        (4, (1 << 30) - 1),
        (8, varint::MAX),
    ]
    .into_iter()
    .filter(|(width, _)| available >= *width)
    .map(|(width, max)| (available - width).min(max))
    .max()
    .unwrap_or(0)
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
