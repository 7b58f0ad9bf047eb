//! The state shared by a QMux connection's driver task and its application handles: the
//! sans-IO connection behind a mutex, and the wakers its events release.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Waker};

use starling_qmux::{CloseReason, Connection, Event, StreamError, StreamId};
use starling_transport::TransportError;

#[derive(Default)]
pub(crate) struct Wakers(Vec<Waker>);

impl Wakers {
    pub(crate) fn register(&mut self, cx: &Context<'_>) {
        if !self.0.iter().any(|w| w.will_wake(cx.waker())) {
            self.0.push(cx.waker().clone());
        }
    }

    pub(crate) fn wake(&mut self) {
        for w in self.0.drain(..) {
            w.wake();
        }
    }
}

/// Everything behind the lock.
pub(crate) struct Inner {
    pub(crate) conn: Connection,
    /// The application protocol negotiated out of band (the WebSocket subprotocol's ALPN).
    pub(crate) protocol: Option<String>,
    pub(crate) driver: Option<Waker>,
    pub(crate) send: HashMap<StreamId, Wakers>,
    pub(crate) recv: HashMap<StreamId, Wakers>,
    pub(crate) open: [Wakers; 2],
    pub(crate) accept: [Wakers; 2],
    pub(crate) datagrams: Wakers,
    pub(crate) connected: Wakers,
    pub(crate) closed: Wakers,
    /// Set by our own `close`, so the close reads as `ClosedLocally`.
    pub(crate) closed_locally: bool,
}

impl Inner {
    /// Wake whoever the connection's events concern, and the driver (there may be records
    /// to send now). For the streams' side; the driver itself calls [`Inner::dispatch`].
    pub(crate) fn process(&mut self) {
        self.dispatch();
        if let Some(driver) = &self.driver {
            driver.wake_by_ref();
        }
    }

    /// Wake whoever the connection's events concern. The driver calls this from its own
    /// poll, which goes on to send what there is: waking itself there made every driver
    /// poll schedule the next, a busy loop of one core per WebSocket or TCP session.
    pub(crate) fn dispatch(&mut self) {
        while let Some(event) = self.conn.poll_event() {
            match event {
                Event::Connected => {
                    self.connected.wake();
                    self.open.iter_mut().for_each(Wakers::wake);
                }
                Event::StreamOpened(dir) => self.accept[dir_index(dir)].wake(),
                Event::StreamsAvailable(dir) => self.open[dir_index(dir)].wake(),
                Event::Readable(id) => {
                    if let Some(w) = self.recv.get_mut(&id) {
                        w.wake();
                    }
                }
                Event::Writable(id) => {
                    if let Some(w) = self.send.get_mut(&id) {
                        w.wake();
                    }
                }
                Event::DatagramReceived => self.datagrams.wake(),
                Event::Closed => {
                    self.send.values_mut().for_each(Wakers::wake);
                    self.recv.values_mut().for_each(Wakers::wake);
                    self.open.iter_mut().for_each(Wakers::wake);
                    self.accept.iter_mut().for_each(Wakers::wake);
                    self.datagrams.wake();
                    self.connected.wake();
                    self.closed.wake();
                }
            }
        }
    }

    /// The error a closed connection reports, `None` while open.
    pub(crate) fn close_error(&self) -> Option<TransportError> {
        self.conn
            .close_reason()
            .map(|r| close_error(r, self.closed_locally))
    }
}

pub(crate) fn dir_index(dir: starling_qmux::Dir) -> usize {
    match dir {
        starling_qmux::Dir::Bi => 0,
        starling_qmux::Dir::Uni => 1,
    }
}

/// A close reason as the transport contract reports it.
pub(crate) fn close_error(reason: &CloseReason, closed_locally: bool) -> TransportError {
    match reason {
        CloseReason::LocalApplication { .. } => TransportError::ClosedLocally,
        _ if closed_locally => TransportError::ClosedLocally,
        CloseReason::PeerApplication { code, reason } => match u32::try_from(*code) {
            Ok(code) => TransportError::ClosedByPeer {
                code,
                reason: reason.clone(),
            },
            Err(_) => TransportError::Failed(format!("peer closed with code {code}: {reason}")),
        },
        other => TransportError::Failed(other.to_string()),
    }
}

/// A stream operation's failure as the transport contract reports it.
pub(crate) fn stream_error(err: StreamError, closed_locally: bool) -> TransportError {
    let code = |c: u64| u32::try_from(c).ok();
    match err {
        StreamError::Reset(c) => code(c).map_or_else(
            || TransportError::Failed(format!("RESET_STREAM code {c} exceeds u32")),
            TransportError::Reset,
        ),
        StreamError::Stopped(c) => code(c).map_or_else(
            || TransportError::Failed(format!("STOP_SENDING code {c} exceeds u32")),
            TransportError::Stopped,
        ),
        StreamError::ConnectionClosed(reason) => close_error(&reason, closed_locally),
        other => TransportError::Failed(other.to_string()),
    }
}

/// The connection and its wakers.
pub(crate) struct Shared {
    inner: Mutex<Inner>,
}

impl Shared {
    pub(crate) fn new(conn: Connection, protocol: Option<String>) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner {
                conn,
                protocol,
                driver: None,
                send: HashMap::new(),
                recv: HashMap::new(),
                open: Default::default(),
                accept: Default::default(),
                datagrams: Wakers::default(),
                connected: Wakers::default(),
                closed: Wakers::default(),
                closed_locally: false,
            }),
        })
    }

    /// Lock; a poisoned lock (a panic elsewhere) still yields the state.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
