//! A running session's dispatcher, above both halves: the session is built and started here,
//! then one task accepts the peer's streams and hands each to the half (lite publisher or
//! subscriber, or the IETF family) that answers it, until the session ends.

use starling_model::entropy::Map;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;

use parking_lot::Mutex;

use starling_proto::{legacy, BidiType, Role, StreamCode, UniType, Version};
use starling_transport::{Transport, TransportError};
use tokio_util::sync::CancellationToken;

use crate::budget::RecvBudget;
use crate::config::SessionConfig;
use crate::error::Error;
use crate::gate::Gate;
use crate::rank::Rank;
use crate::reader::Reader;
use crate::session::Session;
use crate::shared::ietf::Ietf;
use crate::shared::{PeerSetup, SessionStats, Shared};
use crate::violation::Violation;
use crate::writer::Writer;
use crate::{publisher, subscriber};

/// The transport closed under the session (an accept failed): note why, once, start the
/// drain's clock and stop new pulls through the peer.
fn closed_under_us(
    closed: &mut Option<TransportError>,
    err: TransportError,
    drain: std::pin::Pin<&mut tokio::time::Sleep>,
    closing: &CancellationToken,
) {
    if closed.is_none() {
        *closed = Some(err);
        drain.reset(tokio::time::Instant::now() + CLOSE_DRAIN);
        closing.cancel();
    }
}

/// lite-01/02's session stream: its halves and the bytes read past the SETUP.
pub(crate) type SessionStream<T> = (
    <T as Transport>::Send,
    <T as Transport>::Recv,
    bytes::BytesMut,
);

/// When the peer closes, how long the group streams it opened before may still be read.
/// Transports keep what arrived before a close readable (QUIC does; so does our QMux), and a
/// publisher that writes its last group and closes at once (moq-cli when its input ends)
/// expects it delivered; reading what is buffered takes microseconds, streams without their
/// FIN fail as soon as their buffer is read, so the bound is only a backstop.
const CLOSE_DRAIN: std::time::Duration = std::time::Duration::from_secs(1);

impl<T: Transport> Session<T> {
    pub(crate) fn run(
        transport: T,
        version: Version,
        config: SessionConfig,
        peer: PeerSetup,
        session_stream: Option<SessionStream<T>>,
        ietf: Option<crate::ietf::Started<T>>,
    ) -> Self {
        let (ietf, ietf_recv) = match ietf {
            Some(started) => (Some(Arc::new(started.state)), started.recv),
            None => (None, None),
        };
        let max_requests = config.limits.max_requests;
        let budget = match &config.limits.recv_pool {
            Some(pool) => {
                let budget = RecvBudget::pooled(config.limits.recv_budget, pool);
                let window = transport.clone();
                budget.on_window(move |bytes| window.set_receive_window(bytes));
                if let Some(gate) = budget.stream_gate() {
                    transport.set_stream_gate(gate);
                }
                budget
            }
            None => RecvBudget::new(config.limits.recv_budget),
        };
        // A peer relay carries its whole cluster's broadcasts and subscriptions: trusted, it
        // holds no account in the state ledger (its per-session bounds still hold).
        let state = match &config.limits.state_ledger {
            Some(ledger) if !config.cluster_peer => Some(ledger.open()),
            _ => None,
        };
        let shared = Arc::new(Shared {
            budget,
            transport,
            version,
            peer,
            config,
            upstream: Mutex::new(Map::default()),
            next_subscribe_id: AtomicU64::new(0),
            served_subscriptions: AtomicUsize::new(0),
            announce_interests: AtomicUsize::new(0),
            requests: tokio::sync::Semaphore::new(max_requests),
            anonymous_stamp: crate::config::random_hop(),
            cancel: CancellationToken::new(),
            error: Mutex::new(None),
            goaway: Mutex::new(None),
            goaway_received: tokio::sync::Notify::new(),
            goaway_sent: std::sync::atomic::AtomicBool::new(false),
            stats: SessionStats::default(),
            state,
            ietf,
            pulls: AtomicUsize::new(0),
            pulls_ended: tokio::sync::Notify::new(),
            closing: CancellationToken::new(),
        });
        tokio::spawn(drive(shared.clone()));
        if let Some(ietf) = Ietf::of(&shared) {
            crate::ietf::begin(&ietf, ietf_recv);
            return Session { shared };
        }
        if let Some((send, recv, rest)) = session_stream {
            let task = shared.clone();
            shared.spawn(async move { session_stream_of(task, send, recv, rest).await });
        }
        if shared.config.consume.is_some() && shared.peer.role != Some(Role::Subscriber) {
            for prefix in shared.config.announce_prefixes.clone() {
                let task = shared.clone();
                shared.spawn(async move { subscriber::announced(task, prefix).await });
            }
        }
        Session { shared }
    }
}

/// Accept the peer's streams until the session ends.
///
/// Request streams (bidirectional) get a task each. Data streams (unidirectional, one group
/// each) are read here, in this task, as futures of one set: a group costs no spawn, and each
/// stream's wake polls only that stream. What the task waits on besides them (the accepts,
/// datagrams, the session's end) is polled through a [`Gate`] only when it woke.
async fn drive<T: Transport>(shared: Arc<Shared<T>>) {
    use futures::future::Either;

    // Each stream goes to its family's handler: the IETF drafts' or moq-lite's.
    let ietf = Ietf::of(&shared);
    let result: Result<(), Error> = async {
        let mut datagrams = shared.version.has_datagrams();
        let transport = &shared.transport;
        let mut cancelled = std::pin::pin!(shared.cancel.cancelled());
        let mut accept_bi = std::pin::pin!(transport.accept_bi());
        let mut accept_uni = std::pin::pin!(transport.accept_uni());
        let mut datagram = std::pin::pin!(transport.recv_datagram());
        // Resolves when the relay-wide state ledger sheds this session (never without one).
        let mut shed = std::pin::pin!(async {
            match &shared.state {
                Some(account) => account.shed().await,
                None => std::future::pending().await,
            }
        });
        let mut gates: [Gate; 5] = Default::default();
        let mut data = crate::future_set::FutureSet::default();
        // Once the transport closed under us: why, and the bound on reading what the peer
        // sent before its close (see `CLOSE_DRAIN`).
        let mut closed: Option<TransportError> = None;
        let mut accepting_uni = true;
        let mut drain = std::pin::pin!(tokio::time::sleep(CLOSE_DRAIN));
        loop {
            let [cancel_gate, bi_gate, uni_gate, datagram_gate, shed_gate] = &mut gates;
            tokio::select! {
                biased;
                _ = cancel_gate.future(cancelled.as_mut()) => return Ok(()),
                _ = shed_gate.future(shed.as_mut()) => {
                    shared.fail(Error::Bound("relay-wide state ledger full: the heaviest session is shed"));
                    return Ok(());
                }
                // Everything the peer sent before its close is read: the group streams it
                // opened and our subscriptions' answers (their ends).
                _ = shared.pulls_settled(), if closed.is_some() && !accepting_uni && data.is_empty() => {
                    return Err(Error::Transport(closed.take().expect("closed")));
                }
                _ = drain.as_mut(), if closed.is_some() => {
                    return Err(Error::Transport(closed.take().expect("closed")));
                }
                bi = bi_gate.future(accept_bi.as_mut()), if closed.is_none() => {
                    accept_bi.set(transport.accept_bi());
                    match bi {
                        Ok((send, recv)) => {
                            match &ietf {
                                Some(ietf) => shared.spawn(crate::ietf::request_stream(ietf.clone(), send, recv)),
                                None => shared.spawn(handle_bi(shared.clone(), send, recv)),
                            }
                        }
                        Err(err) => closed_under_us(&mut closed, err, drain.as_mut(), &shared.closing),
                    }
                }
                // After a close too, until the streams the peer opened before it are taken.
                uni = uni_gate.future(accept_uni.as_mut()), if accepting_uni => {
                    accept_uni.set(transport.accept_uni());
                    match uni {
                        Ok(recv) => {
                            data.push(match &ietf {
                                Some(ietf) => Either::Left(crate::ietf::uni_stream(ietf, recv)),
                                None => Either::Right(handle_uni(&shared, recv)),
                            });
                        }
                        Err(err) => {
                            accepting_uni = false;
                            closed_under_us(&mut closed, err, drain.as_mut(), &shared.closing);
                        }
                    }
                }
                // Pending while no data stream is open; polled again once one is pushed.
                _ = data.next() => {}
                received = datagram_gate.future(datagram.as_mut()), if datagrams => {
                    datagram.set(transport.recv_datagram());
                    match received {
                        Ok(received) => match &ietf {
                            Some(ietf) => crate::ietf::datagram(ietf, received)?,
                            None => subscriber::datagram(&shared, received),
                        },
                        // Datagrams unavailable on this transport: stop asking; the session goes on.
                        Err(_) => datagrams = false,
                    }
                }
            }
        }
    }
    .await;
    if let Err(err) = result {
        let mut slot = shared.error.lock();
        if slot.is_none() {
            *slot = Some(err);
        }
    }
    shared.cancel.cancel();
}

/// lite-01/02's session stream: SESSION_INFO is read and set aside (moq-net does nothing with
/// it either); the peer ending the stream ends the session, a FIN cleanly, anything else as the
/// error it is.
async fn session_stream_of<T: Transport>(
    shared: Arc<Shared<T>>,
    send: T::Send,
    recv: T::Recv,
    rest: bytes::BytesMut,
) {
    let _send = send;
    let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Control);
    if let Err(err) = reader.prefill(&rest) {
        shared.fail(err);
        return;
    }
    let ended = loop {
        match reader
            .message::<legacy::SessionInfo>(shared.config.limits.max_control_message)
            .await
        {
            Ok(Some(_info)) => continue,
            Ok(None) => break Error::Closed,
            Err(err) => break err,
        }
    };
    shared.fail(ended);
}

/// A request stream's task. Its reader and writer are made before the task's future, which
/// then holds them once (an `async fn` keeps its arguments in its future beside the locals
/// they move into).
fn handle_bi<T: Transport>(
    shared: Arc<Shared<T>>,
    send: T::Send,
    recv: T::Recv,
) -> impl std::future::Future<Output = ()> + Send {
    // Until its type is decoded, a request stream is worth no more than any header-less stream.
    let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Unknown);
    let mut writer = Writer::new(send, shared.version);
    async move {
        let kind = match reader.varint().await {
            Ok(Some(kind)) => kind,
            Ok(None) => return,
            Err(err) => {
                let code = err.stream_code().to_code();
                writer.reset(code);
                reader.stop(code);
                return;
            }
        };
        let Some(kind) = BidiType::from_code(kind).filter(|k| k.allowed_in(shared.version)) else {
            // Unknown or version-foreign bidi type: drop the stream, keep the session.
            writer.reset(StreamCode::Internal.to_code());
            reader.stop(StreamCode::Internal.to_code());
            return;
        };
        reader.set_rank(Rank::Control);
        let result = match kind {
            // Boxed: a request stream's task holds only its own kind's state, not the largest.
            BidiType::Announce => {
                Box::pin(publisher::announce(&shared, &mut reader, &mut writer)).await
            }
            BidiType::Subscribe => {
                Box::pin(publisher::subscribe(&shared, &mut reader, &mut writer)).await
            }
            BidiType::Track => Box::pin(publisher::track(&shared, &mut reader, &mut writer)).await,
            BidiType::Fetch => Box::pin(publisher::fetch(&shared, &mut reader, &mut writer)).await,
            BidiType::Probe | BidiType::Goaway => {
                Box::pin(publisher::hold(&shared, kind, &mut reader, &mut writer)).await
            }
            BidiType::Session => Err(Error::Stream(StreamCode::Internal)),
        };
        if let Err(err) = result {
            tracing::debug!(?kind, ?err, "request stream failed");
            if matches!(
                err,
                Error::Decode(_) | Error::ProtocolViolation(_) | Error::Bound(_)
            ) {
                shared.stats.stream_error(err.stream_code());
            }
            let code = err.stream_code().to_code();
            writer.reset(code);
            reader.stop(code);
        }
    }
}

async fn handle_uni<T: Transport>(shared: &Arc<Shared<T>>, recv: T::Recv) {
    let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Unknown);
    match reader.varint().await {
        Ok(Some(code)) if code == UniType::Group.code() => {
            subscriber::group(shared, &mut reader).await;
        }
        Ok(Some(code)) if code == UniType::Setup.code() => {
            shared.fail(Error::ProtocolViolation(Violation::SecondSetupStream));
        }
        Ok(_) => reader.stop(StreamCode::Internal.to_code()),
        Err(err) => reader.stop(err.stream_code().to_code()),
    }
}
