//! An in-memory transport: two connected endpoints whose streams are byte pipes.
//!
//! Used by session tests and the socket-free benches, so a whole relay mesh can run in one
//! process on one thread. Pipes have a bounded window, so a reader that stops reading stalls its
//! writer exactly as QUIC flow control would. Resets, stops, FIN and session close behave as on
//! a real transport.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;

use crate::{RecvStream, SendStream, Transport, TransportError};

/// Bytes a stream buffers before its writer waits.
const WINDOW: usize = 1 << 20;

#[derive(Default)]
struct Wakers(Vec<Waker>);

impl Wakers {
    fn register(&mut self, cx: &Context<'_>) {
        if !self.0.iter().any(|w| w.will_wake(cx.waker())) {
            self.0.push(cx.waker().clone());
        }
    }
    fn wake(&mut self) {
        for w in self.0.drain(..) {
            w.wake();
        }
    }
}

#[derive(Default)]
struct PipeState {
    chunks: VecDeque<Bytes>,
    buffered: usize,
    fin: bool,
    reset: Option<u32>,
    stopped: Option<u32>,
    /// The reader is gone or finished reading.
    reader_done: bool,
    /// The sender's current send order (tests inspect it from the receiving side).
    priority: i32,
    /// The side that writes (0 client, 1 server).
    sender: usize,
    /// Once the session closed: what each side (by index) sees, the closer
    /// `ClosedLocally`, its peer the code it closed with, as QUIC's streams fail.
    closed: Option<[TransportError; 2]>,
    readers: Wakers,
    writers: Wakers,
}

#[derive(Clone, Default)]
struct Pipe(Arc<Mutex<PipeState>>);

impl Pipe {
    fn close(&self, errs: &[TransportError; 2]) {
        let mut s = self.0.lock().unwrap();
        if s.closed.is_none() {
            s.closed = Some(errs.clone());
        }
        s.readers.wake();
        s.writers.wake();
    }
}

/// Datagrams a side holds unread before new ones are dropped, like a full socket buffer.
const DATAGRAM_QUEUE: usize = 1024;
/// Largest datagram payload, like a QUIC path's.
const DATAGRAM_SIZE: usize = 1200;

struct SideState {
    bi: VecDeque<(MemSend, MemRecv)>,
    uni: VecDeque<MemRecv>,
    datagrams: VecDeque<Bytes>,
    accept_wakers: Wakers,
    closed: Option<TransportError>,
    closed_wakers: Wakers,
    /// Every pipe of the session, to fail them on close; dead ones are pruned as it grows.
    pipes: Vec<Weak<Mutex<PipeState>>>,
    prune_at: usize,
}

struct Shared {
    /// Index 0 is the client side, 1 the server side: what each side accepts.
    sides: [Mutex<SideState>; 2],
}

/// One endpoint of an in-memory session.
#[derive(Clone)]
pub struct MemTransport {
    shared: Arc<Shared>,
    side: usize,
}

/// A connected (client, server) pair.
pub fn pair() -> (MemTransport, MemTransport) {
    let side = || {
        Mutex::new(SideState {
            bi: VecDeque::new(),
            uni: VecDeque::new(),
            datagrams: VecDeque::new(),
            accept_wakers: Wakers::default(),
            closed: None,
            closed_wakers: Wakers::default(),
            pipes: Vec::new(),
            prune_at: 64,
        })
    };
    let shared = Arc::new(Shared {
        sides: [side(), side()],
    });
    (
        MemTransport {
            shared: shared.clone(),
            side: 0,
        },
        MemTransport { shared, side: 1 },
    )
}

impl MemTransport {
    fn peer(&self) -> usize {
        1 - self.side
    }

    fn check_open(&self) -> Result<(), TransportError> {
        match &self.shared.sides[self.side].lock().unwrap().closed {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }

    /// A stream written by side `sender`.
    fn new_pipe(&self, sender: usize) -> Pipe {
        let pipe = Pipe::default();
        pipe.0.lock().unwrap().sender = sender;
        for side in &self.shared.sides {
            let mut side = side.lock().unwrap();
            side.pipes.push(Arc::downgrade(&pipe.0));
            if side.pipes.len() >= side.prune_at {
                side.pipes.retain(|p| p.strong_count() > 0);
                side.prune_at = (side.pipes.len() * 2).max(64);
            }
        }
        pipe
    }
}

impl Transport for MemTransport {
    type Send = MemSend;
    type Recv = MemRecv;

    async fn open_bi(&self) -> Result<(MemSend, MemRecv), TransportError> {
        self.check_open()?;
        let out = self.new_pipe(self.side);
        let back = self.new_pipe(self.peer());
        let mut peer = self.shared.sides[self.peer()].lock().unwrap();
        peer.bi
            .push_back((MemSend(back.clone()), MemRecv(out.clone())));
        peer.accept_wakers.wake();
        Ok((MemSend(out), MemRecv(back)))
    }

    async fn open_uni(&self) -> Result<MemSend, TransportError> {
        self.check_open()?;
        let out = self.new_pipe(self.side);
        let mut peer = self.shared.sides[self.peer()].lock().unwrap();
        peer.uni.push_back(MemRecv(out.clone()));
        peer.accept_wakers.wake();
        Ok(MemSend(out))
    }

    async fn accept_bi(&self) -> Result<(MemSend, MemRecv), TransportError> {
        poll_fn(|cx| {
            let mut side = self.shared.sides[self.side].lock().unwrap();
            // As QUIC: streams the peer opened before a close are still accepted.
            if let Some(pair) = side.bi.pop_front() {
                return Poll::Ready(Ok(pair));
            }
            if let Some(err) = &side.closed {
                return Poll::Ready(Err(err.clone()));
            }
            side.accept_wakers.register(cx);
            Poll::Pending
        })
        .await
    }

    async fn accept_uni(&self) -> Result<MemRecv, TransportError> {
        poll_fn(|cx| {
            let mut side = self.shared.sides[self.side].lock().unwrap();
            if let Some(recv) = side.uni.pop_front() {
                return Poll::Ready(Ok(recv));
            }
            if let Some(err) = &side.closed {
                return Poll::Ready(Err(err.clone()));
            }
            side.accept_wakers.register(cx);
            Poll::Pending
        })
        .await
    }

    fn max_datagram_size(&self) -> usize {
        DATAGRAM_SIZE
    }

    fn send_datagram(&self, payload: Bytes) -> Result<(), TransportError> {
        self.check_open()?;
        if payload.len() > DATAGRAM_SIZE {
            return Ok(()); // dropped, as an oversized datagram is
        }
        let mut peer = self.shared.sides[self.peer()].lock().unwrap();
        if peer.datagrams.len() < DATAGRAM_QUEUE {
            peer.datagrams.push_back(payload);
            peer.accept_wakers.wake();
        }
        Ok(())
    }

    async fn recv_datagram(&self) -> Result<Bytes, TransportError> {
        poll_fn(|cx| {
            let mut side = self.shared.sides[self.side].lock().unwrap();
            if let Some(err) = &side.closed {
                return Poll::Ready(Err(err.clone()));
            }
            if let Some(datagram) = side.datagrams.pop_front() {
                return Poll::Ready(Ok(datagram));
            }
            side.accept_wakers.register(cx);
            Poll::Pending
        })
        .await
    }

    fn close(&self, code: u32, reason: &str) {
        let mut errs = [TransportError::ClosedLocally, TransportError::ClosedLocally];
        errs[self.peer()] = TransportError::ClosedByPeer {
            code,
            reason: reason.to_string(),
        };
        let mut pipes = Vec::new();
        for (index, err) in errs.iter().enumerate() {
            let mut side = self.shared.sides[index].lock().unwrap();
            if side.closed.is_none() {
                side.closed = Some(err.clone());
            }
            side.accept_wakers.wake();
            side.closed_wakers.wake();
            pipes.append(&mut side.pipes);
        }
        for pipe in pipes.iter().filter_map(Weak::upgrade) {
            Pipe(pipe).close(&errs);
        }
    }

    async fn closed(&self) -> TransportError {
        poll_fn(|cx| {
            let mut side = self.shared.sides[self.side].lock().unwrap();
            if let Some(err) = &side.closed {
                return Poll::Ready(err.clone());
            }
            side.closed_wakers.register(cx);
            Poll::Pending
        })
        .await
    }
}

/// Sending half of an in-memory stream.
pub struct MemSend(Pipe);

impl SendStream for MemSend {
    async fn write(&mut self, chunk: Bytes) -> Result<(), TransportError> {
        self.write_chunks(&mut [chunk]).await
    }

    async fn write_chunks(&mut self, chunks: &mut [Bytes]) -> Result<(), TransportError> {
        poll_fn(|cx| {
            let mut s = self.0 .0.lock().unwrap();
            if let Some(errs) = &s.closed {
                return Poll::Ready(Err(errs[s.sender].clone()));
            }
            if let Some(code) = s.stopped {
                return Poll::Ready(Err(TransportError::Stopped(code)));
            }
            if s.fin || s.reset.is_some() {
                return Poll::Ready(Err(TransportError::Failed("stream already ended".into())));
            }
            if s.buffered >= WINDOW {
                s.writers.register(cx);
                return Poll::Pending;
            }
            Poll::Ready(Ok(()))
        })
        .await?;
        let mut s = self.0 .0.lock().unwrap();
        if !s.reader_done {
            for chunk in chunks.iter_mut().filter(|c| !c.is_empty()) {
                s.buffered += chunk.len();
                s.chunks.push_back(std::mem::take(chunk));
            }
        }
        s.readers.wake();
        Ok(())
    }

    fn set_priority(&mut self, order: i32) {
        self.0 .0.lock().unwrap().priority = order;
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        let mut s = self.0 .0.lock().unwrap();
        if s.reset.is_some() {
            return Err(TransportError::Failed("stream reset".into()));
        }
        s.fin = true;
        s.readers.wake();
        Ok(())
    }

    fn reset(&mut self, code: u32) {
        let mut s = self.0 .0.lock().unwrap();
        // Like QUIC: once the session closed, no reset reaches the peer.
        if !s.fin && s.reset.is_none() && s.closed.is_none() {
            s.reset = Some(code);
            s.chunks.clear();
            s.buffered = 0;
            s.readers.wake();
        }
    }

    async fn stopped(&mut self) -> Result<Option<u32>, TransportError> {
        poll_fn(|cx| {
            let mut s = self.0 .0.lock().unwrap();
            if let Some(code) = s.stopped {
                return Poll::Ready(Ok(Some(code)));
            }
            if s.reader_done {
                return Poll::Ready(Ok(None));
            }
            if let Some(errs) = &s.closed {
                return Poll::Ready(Err(errs[s.sender].clone()));
            }
            s.writers.register(cx);
            Poll::Pending
        })
        .await
    }
}

impl Drop for MemSend {
    fn drop(&mut self) {
        // Like QUIC libraries: a send stream dropped without finish is reset (code 0 is what a
        // dropped noq stream sends; callers reset explicitly with their own code first).
        let mut s = self.0 .0.lock().unwrap();
        if !s.fin && s.reset.is_none() && s.closed.is_none() {
            s.reset = Some(0);
            s.readers.wake();
        }
    }
}

/// Receiving half of an in-memory stream.
pub struct MemRecv(Pipe);

impl MemRecv {
    /// The send order the sender last set on this stream.
    pub fn send_priority(&self) -> i32 {
        self.0 .0.lock().unwrap().priority
    }
}

impl RecvStream for MemRecv {
    async fn read(&mut self, max: usize) -> Result<Option<Bytes>, TransportError> {
        poll_fn(|cx| {
            let mut s = self.0 .0.lock().unwrap();
            if let Some(code) = s.reset {
                return Poll::Ready(Err(TransportError::Reset(code)));
            }
            if let Some(mut chunk) = s.chunks.pop_front() {
                if chunk.len() > max {
                    let rest = chunk.split_off(max);
                    s.chunks.push_front(rest);
                }
                s.buffered -= chunk.len();
                s.writers.wake();
                return Poll::Ready(Ok(Some(chunk)));
            }
            if s.fin {
                s.reader_done = true;
                s.writers.wake();
                return Poll::Ready(Ok(None));
            }
            if let Some(errs) = &s.closed {
                return Poll::Ready(Err(errs[1 - s.sender].clone()));
            }
            s.readers.register(cx);
            Poll::Pending
        })
        .await
    }

    fn stop(&mut self, code: u32) {
        let mut s = self.0 .0.lock().unwrap();
        if !s.reader_done {
            s.stopped = Some(code);
            s.reader_done = true;
            s.chunks.clear();
            s.buffered = 0;
            s.writers.wake();
        }
    }
}

impl Drop for MemRecv {
    fn drop(&mut self) {
        let mut s = self.0 .0.lock().unwrap();
        if !s.reader_done {
            s.reader_done = true;
            if !s.fin && s.reset.is_none() {
                s.stopped = Some(0);
            }
            s.chunks.clear();
            s.buffered = 0;
            s.writers.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RecvStream, SendStream, Transport};

    #[tokio::test]
    async fn chunks_written_together_arrive_in_order() {
        let (a, b) = pair();
        let mut send = a.open_uni().await.unwrap();
        send.write_chunks(&mut [
            Bytes::from_static(b"head"),
            Bytes::new(),
            Bytes::from_static(b"er+"),
        ])
        .await
        .unwrap();
        send.write(Bytes::from_static(b"payload")).await.unwrap();
        send.finish().unwrap();
        let mut recv = b.accept_uni().await.unwrap();
        let mut got = Vec::new();
        while let Some(chunk) = recv.read(usize::MAX).await.unwrap() {
            got.extend_from_slice(&chunk);
        }
        assert_eq!(got, b"header+payload");
    }

    /// As on QUIC, a close fails the peer's streams with the closer's code, and the closer's
    /// own with `ClosedLocally`.
    #[tokio::test]
    async fn a_close_reaches_the_peers_streams_with_its_code() {
        let (client, server) = pair();
        let (mut client_send, mut client_recv) = client.open_bi().await.unwrap();
        let (mut server_send, mut server_recv) = server.accept_bi().await.unwrap();
        server.close(7, "bye");
        let by_peer = TransportError::ClosedByPeer {
            code: 7,
            reason: "bye".into(),
        };
        assert_eq!(client_recv.read(16).await, Err(by_peer.clone()));
        assert_eq!(
            client_send.write(Bytes::from_static(b"x")).await,
            Err(by_peer)
        );
        assert_eq!(
            server_recv.read(16).await,
            Err(TransportError::ClosedLocally)
        );
        assert_eq!(
            server_send.write(Bytes::from_static(b"x")).await,
            Err(TransportError::ClosedLocally)
        );
    }
}
