//! The session handle: what a relay or a client does with a running session (its version,
//! peer, stats, the broadcasts it consumes, GOAWAY, FETCH, close). Starting one is in
//! `handshake`, running it in `dispatch`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use starling_model::BroadcastConsumer;
use starling_proto::{BidiType, Path, Protocol, SessionCode, StreamCode};
use starling_transport::Transport;

use crate::error::Error;
use crate::pulls::serve_requests;
use crate::shared::ietf::Ietf;
use crate::shared::{PeerSetup, SessionStats, Shared};
use crate::subscriber;
use crate::writer::Writer;

/// A session with a peer. Cheap to clone; the session runs until closed by either side.
pub struct Session<T: Transport> {
    pub(crate) shared: Arc<Shared<T>>,
}

impl<T: Transport> Clone for Session<T> {
    fn clone(&self) -> Self {
        Session {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Transport> Session<T> {
    /// The protocol the session speaks (an IETF session's draft, never the lite codec its
    /// model semantics come from).
    pub fn protocol(&self) -> Protocol {
        match self.shared.ietf.as_ref().map(|state| state.draft) {
            Some(draft) => Protocol::Ietf(draft),
            None => Protocol::Lite(self.shared.version),
        }
    }

    pub fn peer(&self) -> &PeerSetup {
        &self.shared.peer
    }

    pub fn stats(&self) -> &SessionStats {
        &self.shared.stats
    }

    /// Subscriptions the peer holds with us, and announce interests it listens on.
    pub fn served(&self) -> (usize, usize) {
        (
            self.shared.served_subscriptions.load(Ordering::Relaxed),
            self.shared.announce_interests.load(Ordering::Relaxed),
        )
    }

    /// Tracks pulled from the peer: one upstream subscription each, whatever the readers.
    pub fn upstream(&self) -> usize {
        self.shared.upstream.lock().len()
    }

    /// The receive budget: bytes buffered in incomplete units, the limit, the peak, and
    /// streams evicted for it.
    pub fn budget(&self) -> crate::BudgetStats {
        self.shared.budget.stats()
    }

    /// Read broadcast `path` (relative to the session root) from the peer, announced or not.
    /// Tracks are subscribed on first read and shared by every reader.
    pub fn consume_broadcast(&self, path: Path) -> BroadcastConsumer {
        let producer = Arc::new(self.shared.config.dynamic_broadcast());
        let consumer = producer.consume();
        let shared = self.shared.clone();
        let serve = async move {
            match Ietf::of(&shared) {
                Some(ietf) => {
                    serve_requests(shared, path, producer, crate::ietf::IetfPull(ietf)).await
                }
                None => serve_requests(shared, path, producer, subscriber::LitePull).await,
            }
        };
        self.shared.spawn(serve);
        consumer
    }

    /// Ask the peer to reconnect (to `uri`, or here when empty) and stop opening requests; the
    /// session keeps serving what is open. A second call does nothing (docs/wire.md §4.12).
    pub async fn goaway(&self, uri: &str) -> Result<(), Error> {
        let ietf = Ietf::of(&self.shared);
        if !(ietf.is_some() || self.shared.version.has_goaway())
            || self.shared.goaway_sent.swap(true, Ordering::AcqRel)
        {
            return Ok(());
        }
        if let Some(ietf) = ietf {
            return crate::ietf::send_goaway(&ietf, uri).await;
        }
        let (send, _recv) = self.shared.transport.open_bi().await?;
        let mut writer = Writer::new(send, self.shared.version);
        writer.queue_varint(BidiType::Goaway.code())?;
        writer
            .message(&starling_proto::Goaway {
                uri: uri.to_string(),
            })
            .await?;
        writer.finish()
    }

    /// Resolves with the peer's GOAWAY URI once it sent one.
    pub async fn goaway_received(&self) -> String {
        self.shared.going_away().await;
        self.shared.goaway.lock().clone().unwrap_or_default()
    }

    /// Fetch one group of `track` in broadcast `path` (relative to the root) from frame
    /// `frame_start` on; the group fills as the frames arrive.
    pub fn fetch(
        &self,
        path: Path,
        track: &str,
        group: u64,
        frame_start: u64,
    ) -> Result<starling_model::GroupConsumer, Error> {
        if self.shared.ietf.is_some() {
            // Starling asks IETF peers for no FETCH yet.
            return Err(Error::Stream(StreamCode::Internal));
        }
        subscriber::fetch(
            &self.shared,
            subscriber::fetch_request(path, track, group, frame_start),
        )
    }

    /// Close the session with `code`.
    pub fn close(&self, code: SessionCode, reason: &str) {
        self.shared.transport.close(code.to_code(), reason);
        self.shared.cancel.cancel();
    }

    /// Resolves once the session ended; says why.
    pub async fn closed(&self) -> Error {
        tokio::select! {
            biased;
            _ = self.shared.cancel.cancelled() => {}
            err = self.shared.transport.closed() => {
                let mut slot = self.shared.error.lock();
                if slot.is_none() {
                    *slot = Some(Error::Transport(err));
                }
            }
        }
        self.shared.error.lock().clone().unwrap_or(Error::Closed)
    }
}
