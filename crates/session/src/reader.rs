//! Reads moq-lite units from one receive stream, charging partial units to the receive budget
//! (by the buffer's allocation, so growth is paid for too).

use bytes::{Bytes, BytesMut};
use starling_proto::{
    decode_frame_header_with_limit, decode_message_with_limit, decode_typed_with_limit, varint,
    DecodeError, FrameHeader, Message, StreamCode, TypedMessage, Version,
};
use starling_transport::RecvStream;

use crate::budget::{Account, Rank, RecvBudget};
use crate::error::Error;

/// Most bytes taken from the transport per read.
const READ_CHUNK: usize = 64 * 1024;

pub(crate) struct Reader<R: RecvStream> {
    stream: R,
    buf: BytesMut,
    version: Version,
    account: Account,
    charged: usize,
    /// The size the buffer is filling up to, when a payload's size is known.
    expected: Option<usize>,
    fin: bool,
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
        }
    }

    /// Re-rank this stream once its header says what it carries.
    pub fn set_rank(&self, rank: Rank) {
        self.account.set_rank(rank);
    }

    /// Pull one more chunk; false at FIN.
    async fn fill(&mut self) -> Result<bool, Error> {
        if self.fin {
            return Ok(false);
        }
        let read = tokio::select! {
            read = self.stream.read(READ_CHUNK) => read?,
            _ = self.account.evicted() => return Err(Error::Stream(StreamCode::Evicted)),
        };
        match read {
            Some(chunk) => {
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
                if let Some(value) = step(&mut self.buf, self.version)? {
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
        self.next(|buf, _| {
            Ok(varint::peek(buf).map(|(v, n)| {
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
        self.settle();
        Ok(payload)
    }

    /// Wait for the peer's FIN; any further byte is a protocol error.
    pub async fn finished(&mut self) -> Result<(), Error> {
        if !self.buf.is_empty() || self.fill().await? {
            return Err(Error::ProtocolViolation("unexpected bytes"));
        }
        Ok(())
    }

    pub fn stop(&mut self, code: u32) {
        self.stream.stop(code);
    }
}
