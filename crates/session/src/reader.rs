//! Reads moq-lite units from one receive stream, charging partial units to the receive budget
//! (by the buffer's allocation, so growth is paid for too, plus what the stream itself costs
//! while it holds one).
//!
//! A payload too large to wait for whole (`payload_into`) is not buffered here: each piece goes
//! to its sink as it arrives, so the budget holds at most one small unit per stream.

use bytes::{Bytes, BytesMut};
use starling_proto::{
    decode_frame_header_with_limit, decode_message_with_limit, decode_typed_with_limit, varint,
    DecodeError, FrameHeader, Message, StreamCode, TypedMessage, Version,
};
use starling_transport::RecvStream;

use crate::budget::{Account, RecvBudget};
use crate::error::Error;
use crate::rank::Rank;
use crate::violation::Violation;

/// Most bytes taken from the transport per read.
const READ_CHUNK: usize = 64 * 1024;

/// What a stream costs the relay beyond its buffer (its read state and the transport's
/// stream state), charged from its first byte until its header is decoded: a stream that
/// never gets that far holds this much of the budget, so a flood of streams that each send
/// a byte or two is bounded and evicted like any other incomplete unit. Measured through a
/// relay process: 400 000 such streams took about 2 KiB of RSS each (the stream fleet in
/// `crates/starling/tests/hostile_fleet.rs`). The transport's part is also paid for, for as
/// long as the peer keeps the stream, by the stream credit (`STREAM_CREDIT_COST`): the two
/// overlap while a stream is header-less, which errs on the side of the bound.
pub const HEADERLESS_STREAM_COST: usize = 2 * 1024;

/// A buffer holding the start of a unit keeps its allocation up to twice this (or twice what
/// it holds); a larger one is traded for one the size of what it holds.
const REMNANT_KEEP: usize = 4 * 1024;

pub(crate) struct Reader<R: RecvStream> {
    stream: R,
    buf: BytesMut,
    version: Version,
    account: Account,
    charged: usize,
    /// The size the buffer is filling up to, when a payload's size is known.
    expected: Option<usize>,
    fin: bool,
    /// Whether the stream's header is still to come (its rank is `Unknown`).
    headerless: bool,
    /// What is charged for the stream itself while it is header-less.
    stream_cost: usize,
}

impl<R: RecvStream> Reader<R> {
    /// A reader charging `budget` at `rank` (see [`Rank`]).
    pub fn new(stream: R, version: Version, budget: &RecvBudget, rank: Rank) -> Self {
        Reader {
            stream,
            buf: BytesMut::new(),
            version,
            account: budget.account(rank),
            charged: 0,
            expected: None,
            fin: false,
            headerless: rank == Rank::Unknown,
            stream_cost: 0,
        }
    }

    /// Start with `bytes` already read from the stream (by a handshake before this reader).
    pub fn prefill(&mut self, bytes: &[u8]) -> Result<(), Error> {
        if !bytes.is_empty() {
            self.grow(bytes.len())?;
            self.buf.extend_from_slice(bytes);
        }
        Ok(())
    }

    /// The stream and what was read past the last unit, for a reader on another budget to
    /// go on from (a handshake's reader hands over to the session's).
    pub fn into_parts(mut self) -> (R, BytesMut) {
        let rest = std::mem::take(&mut self.buf);
        self.account.release(self.charged + self.stream_cost);
        self.charged = 0;
        self.stream_cost = 0;
        (self.stream, rest)
    }

    /// Re-rank this stream once its header says what it carries; it no longer pays for
    /// being header-less.
    pub fn set_rank(&mut self, rank: Rank) {
        self.account.set_rank(rank);
        if rank != Rank::Unknown {
            self.headerless = false;
            self.account.release(self.stream_cost);
            self.stream_cost = 0;
        }
    }

    /// Pull one more chunk; false at FIN.
    async fn fill(&mut self) -> Result<bool, Error> {
        if self.fin {
            return Ok(false);
        }
        let read = tokio::select! {
            biased;
            read = self.stream.read(READ_CHUNK) => read?,
            _ = self.account.evicted() => return Err(Error::Stream(StreamCode::Evicted)),
        };
        match read {
            Some(chunk) => {
                if self.headerless && self.stream_cost == 0 {
                    if !self.account.try_charge(HEADERLESS_STREAM_COST) {
                        return Err(Error::Stream(StreamCode::Evicted));
                    }
                    self.stream_cost = HEADERLESS_STREAM_COST;
                }
                self.grow(chunk.len())?;
                self.buf.extend_from_slice(&chunk);
                Ok(true)
            }
            None => {
                self.fin = true;
                Ok(false)
            }
        }
    }

    /// Make room for `more` bytes, charging the allocation before it is made: what the
    /// buffer allocates is what it costs, so a peer dribbling a unit in small chunks gets no
    /// more than its budget through growth. Growth doubles, but never past a payload whose
    /// size is known.
    fn grow(&mut self, more: usize) -> Result<(), Error> {
        let needed = self.buf.len() + more;
        if needed <= self.buf.capacity() {
            return Ok(());
        }
        let doubled = (self.buf.capacity() * 2).max(needed);
        let capacity = match self.expected {
            Some(expected) if expected >= needed => doubled.min(expected),
            _ => doubled,
        };
        if capacity > self.charged {
            if !self.account.try_charge(capacity - self.charged) {
                return Err(Error::Stream(StreamCode::Evicted));
            }
            self.charged = capacity;
        }
        let mut next = BytesMut::with_capacity(capacity);
        next.extend_from_slice(&self.buf);
        self.buf = next;
        Ok(())
    }

    /// A unit was handed on: charge only what the buffer still holds for the next one.
    fn settle(&mut self) {
        if self.buf.is_empty() {
            // Let go of the allocation (what was split off travels on, counted elsewhere).
            self.buf = BytesMut::new();
        } else if self.buf.capacity() > 2 * self.buf.len().max(REMNANT_KEEP) {
            // The start of the next unit at the tail of a large read: move it to a buffer of
            // its own size, so a stream waiting for the rest holds (and is charged) only that.
            let mut remnant = BytesMut::with_capacity(self.buf.len());
            remnant.extend_from_slice(&self.buf);
            self.buf = remnant;
        }
        let held = if self.buf.is_empty() {
            0
        } else {
            self.buf.capacity()
        };
        if self.charged > held {
            self.account.release(self.charged - held);
            self.charged = held;
        }
    }

    /// Decode with `step` until it yields; `Ok(None)` on a clean FIN between units.
    async fn next<T>(
        &mut self,
        mut step: impl FnMut(&mut BytesMut, Version) -> Result<Option<T>, DecodeError>,
    ) -> Result<Option<T>, Error> {
        loop {
            if !self.buf.is_empty() {
                let before = self.buf.len();
                if let Some(value) = step(&mut self.buf, self.version)? {
                    self.account.consume(before - self.buf.len());
                    self.settle();
                    return Ok(Some(value));
                }
            }
            if !self.fill().await? {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(DecodeError::Truncated.into());
            }
        }
    }

    /// The next unit `step` finds at the front of the buffer (consuming what it takes);
    /// `Ok(None)` on a clean FIN between units. The IETF drafts read through this.
    pub async fn unit<T>(
        &mut self,
        mut step: impl FnMut(&mut BytesMut) -> Result<Option<T>, DecodeError>,
    ) -> Result<Option<T>, Error> {
        self.next(|buf, _| step(buf)).await
    }

    /// The next `Len + body` message, with at most `max` body bytes.
    pub async fn message<M: Message>(&mut self, max: usize) -> Result<Option<M>, Error> {
        self.next(|buf, v| decode_message_with_limit::<M>(buf, v, max))
            .await
    }

    /// The next `Type + Len + body` message.
    pub async fn typed<M: TypedMessage>(&mut self, max: usize) -> Result<Option<M>, Error> {
        self.next(|buf, v| decode_typed_with_limit::<M>(buf, v, max))
            .await
    }

    /// A bare varint (stream types).
    pub async fn varint(&mut self) -> Result<Option<u64>, Error> {
        self.next(|buf, version| {
            Ok(varint::peek_as(version.varint(), buf)?.map(|(v, n)| {
                let _ = buf.split_to(n);
                v
            }))
        })
        .await
    }

    pub async fn frame_header(&mut self, max: u64) -> Result<Option<FrameHeader>, Error> {
        self.next(|buf, v| decode_frame_header_with_limit(buf, v, max))
            .await
    }

    /// Exactly `size` payload bytes; a FIN inside them is `WrongSize`.
    pub async fn payload(&mut self, size: usize) -> Result<Bytes, Error> {
        // Growth stops at exactly this payload (plus what already follows it).
        self.expected = Some(size);
        while self.buf.len() < size {
            if !self.fill().await? {
                self.expected = None;
                return Err(Error::Stream(StreamCode::WrongSize));
            }
        }
        self.expected = None;
        let payload = self.buf.split_to(size).freeze();
        self.account.consume(size);
        self.settle();
        Ok(payload)
    }

    /// Bytes already read past the last unit.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Exactly `size` payload bytes, handed to `sink` piece by piece as they arrive instead of
    /// buffered whole; nothing past the payload is read. A FIN inside it is `WrongSize`.
    pub async fn payload_into(
        &mut self,
        size: usize,
        mut sink: impl FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let held = self.buf.len().min(size);
        if held > 0 {
            sink(&self.buf[..held])?;
            self.account.consume(held);
            let _ = self.buf.split_to(held);
            self.settle();
        }
        let mut remaining = size - held;
        while remaining > 0 {
            let read = tokio::select! {
                biased;
                read = self.stream.read(remaining.min(READ_CHUNK)) => read?,
                _ = self.account.evicted() => return Err(Error::Stream(StreamCode::Evicted)),
            };
            let Some(chunk) = read else {
                self.fin = true;
                return Err(Error::Stream(StreamCode::WrongSize));
            };
            if chunk.len() > remaining {
                // More than asked for: keep what follows the payload for the next unit.
                sink(&chunk[..remaining])?;
                self.account.consume(remaining);
                let rest = &chunk[remaining..];
                self.grow(rest.len())?;
                self.buf.extend_from_slice(rest);
                break;
            }
            sink(&chunk)?;
            self.account.consume(chunk.len());
            remaining -= chunk.len();
        }
        Ok(())
    }

    /// Wait for the peer's FIN; any further byte is a protocol error.
    pub async fn finished(&mut self) -> Result<(), Error> {
        if !self.buf.is_empty() || self.fill().await? {
            return Err(Error::ProtocolViolation(Violation::UnexpectedBytes));
        }
        Ok(())
    }

    pub fn stop(&mut self, code: u32) {
        self.stream.stop(code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::encode_frame_header;
    use starling_transport::mem::pair;
    use starling_transport::{SendStream, Transport};

    fn frame(size: usize) -> BytesMut {
        let mut out = BytesMut::new();
        let header = FrameHeader {
            timestamp_delta: 0,
            size: size as u64,
        };
        encode_frame_header(&header, Version::Lite06, &mut out).unwrap();
        out.extend_from_slice(&vec![7u8; size]);
        out
    }

    /// A read that doubled the buffer and ends just into the next unit leaves only that
    /// start charged, not the doubled allocation: with hundreds of streams each waiting on a
    /// small remnant, the budget holds the remnants.
    #[tokio::test]
    async fn a_remnant_of_a_large_read_is_charged_at_its_own_size() {
        let (a, b) = pair();
        let mut send = a.open_uni().await.unwrap();
        let budget = RecvBudget::new(1 << 20);
        let recv = b.accept_uni().await.unwrap();
        let mut reader = Reader::new(recv, Version::Lite06, &budget, Rank::Unknown);
        let first = frame(16_000);
        let split = first.len() - 1000;
        send.write(first.clone().split_to(split).freeze())
            .await
            .unwrap();
        let header = reader.frame_header(1 << 20).await.unwrap().unwrap();
        // The rest of the frame and the start of the next arrive in one read, which doubles
        // the buffer.
        let mut rest = BytesMut::from(&first[split..]);
        rest.extend_from_slice(&frame(16_000)[..500]);
        send.write(rest.freeze()).await.unwrap();
        reader.payload(header.size as usize).await.unwrap();
        assert_eq!(reader.buffered(), 500);
        assert!(
            budget.used() <= 2 * REMNANT_KEEP,
            "{} bytes charged for a 500-byte remnant",
            budget.used()
        );
    }
}
