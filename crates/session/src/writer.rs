//! Writes moq-lite units to one send stream, batching each unit's bytes into one write.

use bytes::{Bytes, BytesMut};
use starling_proto::{encode_message, encode_typed, varint, Message, TypedMessage, Version};
use starling_transport::SendStream;

use crate::error::Error;

pub(crate) struct Writer<S: SendStream> {
    stream: S,
    buf: BytesMut,
    version: Version,
}

impl<S: SendStream> Writer<S> {
    pub fn new(stream: S, version: Version) -> Self {
        Writer {
            stream,
            buf: BytesMut::new(),
            version,
        }
    }

    pub fn version(&self) -> Version {
        self.version
    }

    /// Queue a message without writing it yet.
    pub fn queue<M: Message>(&mut self, message: &M) -> Result<(), Error> {
        encode_message(message, self.version, &mut self.buf)?;
        Ok(())
    }

    pub fn queue_typed<M: TypedMessage>(&mut self, message: &M) -> Result<(), Error> {
        encode_typed(message, self.version, &mut self.buf)?;
        Ok(())
    }

    pub fn queue_varint(&mut self, value: u64) -> Result<(), Error> {
        varint::encode_as(self.version.varint(), value, &mut self.buf)
            .map_err(|_| Error::Encode(starling_proto::EncodeError::BoundsExceeded("varint")))?;
        Ok(())
    }

    /// The bytes queued so far, for an encoder of another family (the IETF drafts) to append to.
    pub fn queued(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Resolves once the peer stops the stream: its code, or `None` when the stream ended
    /// otherwise.
    pub async fn stopped(&mut self) -> Option<u32> {
        self.stream.stopped().await.ok().flatten()
    }

    /// Write everything queued.
    pub async fn flush(&mut self) -> Result<(), Error> {
        if !self.buf.is_empty() {
            let chunk = self.buf.split().freeze();
            self.stream.write(chunk).await?;
        }
        Ok(())
    }

    /// Write what is queued and then a payload, without copying the payload, in one
    /// transport write.
    pub async fn write_payload(&mut self, payload: Bytes) -> Result<(), Error> {
        match (self.buf.is_empty(), payload.is_empty()) {
            (true, true) => {}
            (true, false) => self.stream.write(payload).await?,
            (false, true) => self.flush().await?,
            (false, false) => {
                let mut chunks = [self.buf.split().freeze(), payload];
                self.stream.write_chunks(&mut chunks).await?;
            }
        }
        Ok(())
    }

    /// Write what is queued and then `payloads` (a frame's pieces, say), without copying
    /// them, in one transport write; `payloads` is left empty for reuse.
    pub async fn write_payloads(&mut self, payloads: &mut Vec<Bytes>) -> Result<(), Error> {
        if !self.buf.is_empty() {
            payloads.insert(0, self.buf.split().freeze());
        }
        let written = match payloads.as_mut_slice() {
            [] => Ok(()),
            [one] => self.stream.write(std::mem::take(one)).await,
            many => self.stream.write_chunks(many).await,
        };
        payloads.clear();
        Ok(written?)
    }

    pub async fn message<M: Message>(&mut self, message: &M) -> Result<(), Error> {
        self.queue(message)?;
        self.flush().await
    }

    pub async fn typed<M: TypedMessage>(&mut self, message: &M) -> Result<(), Error> {
        self.queue_typed(message)?;
        self.flush().await
    }

    pub fn finish(&mut self) -> Result<(), Error> {
        self.stream.finish()?;
        Ok(())
    }

    pub fn reset(&mut self, code: u32) {
        self.stream.reset(code);
    }

    pub fn set_priority(&mut self, order: i32) {
        self.stream.set_priority(order);
    }
}

impl<S: SendStream> Writer<S> {
    /// Queue a FRAME header (the payload follows with `write_payload`).
    pub fn queue_frame(&mut self, header: &starling_proto::FrameHeader) -> Result<(), Error> {
        starling_proto::encode_frame_header(header, self.version, &mut self.buf)?;
        Ok(())
    }
}
