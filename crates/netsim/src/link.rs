//! A simulated link for in-memory sessions: [`Laggy`] wraps the in-memory transport so every
//! chunk a stream carries arrives after the link's delay, and a chunk lost on the way (a draw
//! from the link's own seeded generator) arrives a retransmission timeout later, holding up
//! the rest of its stream behind it and only its stream, as QUIC's reliable streams do.
//!
//! The draws happen in the order reads happen; on a single-threaded runtime with a paused
//! clock that order is fixed, so a seed gives the same losses at the same virtual instants.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use starling_transport::mem::{MemRecv, MemSend, MemTransport};
use starling_transport::{RecvStream, Transport, TransportError};

/// One link's delay and loss.
pub struct Link {
    delay: Duration,
    /// Chance in a thousand that a chunk is lost (each retransmission draws again).
    loss: u32,
    state: Mutex<u64>,
}

impl Link {
    /// A link delaying each chunk by `delay` and losing one in a thousand `loss` times,
    /// drawing from `seed`.
    pub fn new(delay: Duration, loss: u32, seed: u64) -> Arc<Link> {
        Arc::new(Link {
            delay,
            loss: loss.min(999),
            state: Mutex::new(seed),
        })
    }

    /// How long a chunk takes: the delay, plus a retransmission timeout (three delays, at
    /// least 20 ms) for each time it is lost.
    pub fn transit(&self) -> Duration {
        let mut transit = self.delay;
        while self.draw_per_mille() < self.loss {
            transit += (self.delay * 3).max(Duration::from_millis(20));
        }
        transit
    }

    /// The next draw in 0..1000 (SplitMix64).
    fn draw_per_mille(&self) -> u32 {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % 1000) as u32
    }
}

/// One side of an in-memory session whose reads cross a [`Link`].
#[derive(Clone)]
pub struct Laggy {
    inner: MemTransport,
    link: Arc<Link>,
}

/// Both sides of an in-memory session over `link`: (client, server).
pub fn laggy_pair(link: Arc<Link>) -> (Laggy, Laggy) {
    let (client, server) = starling_transport::mem::pair();
    (
        Laggy {
            inner: client,
            link: link.clone(),
        },
        Laggy {
            inner: server,
            link,
        },
    )
}

/// A stream's receiving side behind the link.
pub struct LaggyRecv {
    inner: MemRecv,
    link: Arc<Link>,
    /// A chunk read from the pipe and the time it arrives. Held here, not in the read's
    /// future, so a read cancelled while the chunk is in transit loses nothing (reads are
    /// cancel-safe, as QUIC's are).
    held: Option<(tokio::time::Instant, Result<Option<Bytes>, TransportError>)>,
}

impl RecvStream for LaggyRecv {
    async fn read(&mut self, max: usize) -> Result<Option<Bytes>, TransportError> {
        if self.held.is_none() {
            let chunk = self.inner.read(max).await;
            let arrives = tokio::time::Instant::now() + self.link.transit();
            self.held = Some((arrives, chunk));
        }
        let arrives = self.held.as_ref().map(|(at, _)| *at).expect("held above");
        tokio::time::sleep_until(arrives).await;
        match self.held.take().expect("held above") {
            (at, Ok(Some(mut chunk))) if chunk.len() > max => {
                let first = chunk.split_to(max);
                self.held = Some((at, Ok(Some(chunk))));
                Ok(Some(first))
            }
            (_, chunk) => chunk,
        }
    }

    fn stop(&mut self, code: u32) {
        self.inner.stop(code)
    }
}

impl Laggy {
    fn recv(&self, inner: MemRecv) -> LaggyRecv {
        LaggyRecv {
            inner,
            link: self.link.clone(),
            held: None,
        }
    }
}

impl Transport for Laggy {
    type Send = MemSend;
    type Recv = LaggyRecv;

    async fn open_bi(&self) -> Result<(MemSend, LaggyRecv), TransportError> {
        let (send, recv) = self.inner.open_bi().await?;
        Ok((send, self.recv(recv)))
    }

    async fn open_uni(&self) -> Result<MemSend, TransportError> {
        self.inner.open_uni().await
    }

    // Accepting must stay cancel-safe (sessions select over both accepts), so the delay
    // falls on the stream's reads, never on the accept.
    async fn accept_bi(&self) -> Result<(MemSend, LaggyRecv), TransportError> {
        let (send, recv) = self.inner.accept_bi().await?;
        Ok((send, self.recv(recv)))
    }

    async fn accept_uni(&self) -> Result<LaggyRecv, TransportError> {
        let recv = self.inner.accept_uni().await?;
        Ok(self.recv(recv))
    }

    fn close(&self, code: u32, reason: &str) {
        self.inner.close(code, reason)
    }

    fn closed(&self) -> impl Future<Output = TransportError> + Send {
        self.inner.closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_the_same_losses() {
        let draws = |seed| {
            let link = Link::new(Duration::from_millis(10), 300, seed);
            (0..64).map(|_| link.transit()).collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
        let lost = draws(7)
            .iter()
            .filter(|t| **t > Duration::from_millis(10))
            .count();
        assert!((5..40).contains(&lost), "{lost} of 64 lost at 30 %");
    }

    #[tokio::test(start_paused = true)]
    async fn a_chunk_arrives_after_the_delay() {
        let (client, server) = laggy_pair(Link::new(Duration::from_millis(25), 0, 1));
        let mut send = client.open_uni().await.unwrap();
        starling_transport::SendStream::write(&mut send, Bytes::from_static(b"hi"))
            .await
            .unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        let start = tokio::time::Instant::now();
        let chunk = recv.read(16).await.unwrap().unwrap();
        assert_eq!(&chunk[..], b"hi");
        assert_eq!(start.elapsed(), Duration::from_millis(25));
    }
}
