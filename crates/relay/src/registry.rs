//! The relay's live sessions: what each one is (transport, version, root, peer) and a handle
//! to drain it, whatever transport it runs over.
//!
//! The accept loop registers a session once it started and the returned guard removes it
//! when the session task ends, so the table never outlives its sessions. Shutdown drains
//! through it; the status page lists it.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use starling_net::qmux::QmuxBinding;
use starling_net::Binding;
use starling_proto::{Path, Protocol, SessionCode};
use starling_session::{Session, SessionStats};
use starling_transport::Transport;

/// How a session reached the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SessionTransport {
    /// moq-lite directly over QUIC (`moqt://`, `moql://`).
    Quic,
    /// WebTransport over HTTP/3.
    WebTransport,
    /// QMux over a WebSocket on the TCP port.
    WebSocket,
    /// Plaintext QMux over TCP (`tcp://`).
    Tcp,
}

impl SessionTransport {
    pub const ALL: [SessionTransport; 4] = [
        SessionTransport::Quic,
        SessionTransport::WebTransport,
        SessionTransport::WebSocket,
        SessionTransport::Tcp,
    ];

    /// A short lowercase name for logs and the status page.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionTransport::Quic => "quic",
            SessionTransport::WebTransport => "webtransport",
            SessionTransport::WebSocket => "websocket",
            SessionTransport::Tcp => "tcp",
        }
    }
}

impl From<QmuxBinding> for SessionTransport {
    fn from(binding: QmuxBinding) -> Self {
        match binding {
            QmuxBinding::WebSocket => SessionTransport::WebSocket,
            QmuxBinding::Tcp => SessionTransport::Tcp,
        }
    }
}

impl From<Binding> for SessionTransport {
    fn from(binding: Binding) -> Self {
        match binding {
            Binding::RawQuic => SessionTransport::Quic,
            Binding::WebTransport => SessionTransport::WebTransport,
        }
    }
}

/// What the relay knows about one live session.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// Unique for the relay's lifetime.
    pub id: u64,
    pub remote: SocketAddr,
    pub transport: SessionTransport,
    pub version: Protocol,
    /// Wire paths of this session are relative to this root.
    pub root: Path,
    pub publish: bool,
    pub subscribe: bool,
    /// The host the client asked for (SNI or CONNECT authority), when known.
    pub server_name: Option<String>,
    /// When the session started, for its age.
    pub started: Instant,
    /// The same moment on the wall clock, for display.
    pub started_at: SystemTime,
    /// The cluster peer this relay dialed (its key), for links this relay opened; `None` for
    /// accepted sessions.
    pub peer: Option<String>,
    /// The relay's socket the session arrived on, when known.
    pub local: Option<SocketAddr>,
    /// The negotiated application protocol (ALPN or WebTransport protocol).
    pub alpn: Option<String>,
    /// The path the client dialed, without its query (a credential stays out of listings).
    pub path: String,
    /// The direction the client declared in its SETUP, if any.
    pub role: Option<starling_proto::Role>,
    /// The client certificate the listener verified (mTLS), if one was presented.
    pub tls: Option<starling_net::ClientCertificate>,
}

/// A boxed future borrowed from a session.
pub type SessionFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// What the registry needs of a running session; implemented for every `Session<T>`, so a
/// session over another binding (WebSocket) registers the same way.
pub trait LiveSession: Send + Sync + 'static {
    fn stats(&self) -> &SessionStats;
    /// Subscriptions served and announce interests listened on.
    fn load(&self) -> (usize, usize);
    /// The connection's receive budget.
    fn budget(&self) -> starling_session::BudgetStats;
    /// Tracks this relay pulls from the peer (one upstream subscription each).
    fn upstream(&self) -> usize;
    /// Send GOAWAY (asking the peer to reconnect here); errors are ignored.
    fn goaway(&self) -> SessionFuture<'_>;
    fn close(&self, code: SessionCode, reason: &str);
    /// Resolves once the session ended.
    fn closed(&self) -> SessionFuture<'_>;
}

impl<T: Transport> LiveSession for Session<T> {
    fn stats(&self) -> &SessionStats {
        Session::stats(self)
    }

    fn load(&self) -> (usize, usize) {
        self.served()
    }

    fn budget(&self) -> starling_session::BudgetStats {
        Session::budget(self)
    }

    fn upstream(&self) -> usize {
        Session::upstream(self)
    }

    fn goaway(&self) -> SessionFuture<'_> {
        Box::pin(async move {
            let _ = Session::goaway(self, "").await;
        })
    }

    fn close(&self, code: SessionCode, reason: &str) {
        Session::close(self, code, reason)
    }

    fn closed(&self) -> SessionFuture<'_> {
        Box::pin(async move {
            Session::closed(self).await;
        })
    }
}

/// One registered session.
#[derive(Clone)]
pub struct SessionEntry {
    pub info: SessionInfo,
    pub session: Arc<dyn LiveSession>,
}

/// The table of live sessions; cheap to clone, shared by the accept loop and the HTTP side.
#[derive(Clone, Default)]
pub struct SessionRegistry {
    inner: Arc<RegistryInner>,
}

#[derive(Default)]
struct RegistryInner {
    next_id: AtomicU64,
    sessions: Mutex<HashMap<u64, Arc<SessionEntry>>>,
}

impl SessionRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh session id.
    pub fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Add a session; it stays listed until the returned guard drops.
    #[must_use = "the session is unregistered when the guard drops"]
    pub fn register(&self, info: SessionInfo, session: Arc<dyn LiveSession>) -> Registered {
        let id = info.id;
        self.lock()
            .insert(id, Arc::new(SessionEntry { info, session }));
        Registered {
            registry: self.clone(),
            id,
        }
    }

    /// Every live session, in id order (one lock, a reference to each entry).
    pub fn list(&self) -> Vec<Arc<SessionEntry>> {
        let mut entries: Vec<Arc<SessionEntry>> = self.lock().values().cloned().collect();
        entries.sort_by_key(|entry| entry.info.id);
        entries
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<SessionEntry>>> {
        // A panic while holding the lock leaves a consistent map; keep serving.
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Keeps a session registered; dropping it removes the session from the table.
pub struct Registered {
    registry: SessionRegistry,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}
