//! A running session: the handshake, the stream dispatcher, and the state both halves share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use starling_model::{BroadcastConsumer, TrackProducer};
use starling_proto::{
    legacy, BidiType, Path, ProbeLevel, Protocol, Role, SessionCode, Setup, StreamCode, UniType,
    Version,
};
use starling_transport::{RecvStream, SendStream, Transport, TransportError};
use tokio_util::sync::CancellationToken;

use crate::budget::{Rank, RecvBudget};
use crate::config::SessionConfig;
use crate::error::Error;
use crate::gate::Gate;
use crate::reader::Reader;
use crate::stop::Stop;
use crate::writer::Writer;
use crate::{publisher, subscriber};

/// What the peer said in its SETUP.
#[derive(Clone, Debug, Default)]
pub struct PeerSetup {
    pub hop: u64,
    pub role: Option<Role>,
    pub path: Option<String>,
    pub cost: Option<u64>,
    pub probe: ProbeLevel,
    /// The IETF drafts' AUTHORIZATION_TOKEN value (a JWT), presented like `?jwt=`.
    pub token: Option<String>,
}

impl PeerSetup {
    /// A peer whose version has no SETUP (lite-01…04): it names nothing, so a random hop is
    /// assigned to it for split horizon, as moq-net does.
    fn assigned() -> Self {
        PeerSetup {
            hop: crate::config::random_hop(),
            ..PeerSetup::default()
        }
    }

    fn from_setup(setup: &Setup) -> Result<Self, Error> {
        Ok(PeerSetup {
            hop: setup.hop().unwrap_or(0),
            role: setup.role(),
            path: setup.path().map(str::to_string),
            cost: setup.cost(),
            probe: setup.probe(),
            token: None,
        })
    }

    /// The peer's hop for split horizon, if it sent one.
    pub fn exclude_hop(&self) -> Option<u64> {
        (self.hop != 0).then_some(self.hop)
    }
}

/// What a client says in its SETUP beyond its hop.
#[derive(Clone, Debug, Default)]
pub struct ClientSetup {
    /// Request target for URI-less transports (`/path?jwt=…`).
    pub path: Option<String>,
    pub role: Option<Role>,
    pub cost: Option<u64>,
}

/// Counters one session keeps (read by metrics).
#[derive(Debug, Default)]
pub struct SessionStats {
    pub groups_sent: AtomicU64,
    pub frames_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub groups_received: AtomicU64,
    pub frames_received: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Group streams a slow subscriber skipped (reset TOO_FAR_BEHIND).
    pub groups_skipped: AtomicU64,
    /// Routes the peer's announcements hold in our origin now.
    pub routes: AtomicU64,
    /// Streams we reset or stopped because of the peer's input, by moq-lite stream code.
    stream_errors: Mutex<std::collections::BTreeMap<u32, u64>>,
}

impl SessionStats {
    /// A datagram arrived whole as a one-frame group of `size` payload bytes.
    pub(crate) fn datagram_received(&self, size: u64) {
        self.groups_received.fetch_add(1, Ordering::Relaxed);
        self.frames_received.fetch_add(1, Ordering::Relaxed);
        self.bytes_received.fetch_add(size, Ordering::Relaxed);
    }

    pub(crate) fn stream_error(&self, code: StreamCode) {
        *self.stream_errors.lock().entry(code.to_code()).or_default() += 1;
    }

    /// Streams failed on the peer's input so far, by stream code.
    pub fn stream_errors(&self) -> std::collections::BTreeMap<u32, u64> {
        self.stream_errors.lock().clone()
    }
}

/// One subscription of ours to the peer: the track its groups go to, and how many group
/// streams for it have arrived (lite-07's SUBSCRIBE_END settles the tail on that count).
pub(crate) struct Upstream {
    pub track: Arc<TrackProducer>,
    pub streams: StreamCount,
}

/// The group streams of one upstream subscription that arrived. Counting is one atomic add;
/// only an ended subscription waiting for the streams its end counts is ever notified.
#[derive(Debug, Default)]
pub(crate) struct StreamCount {
    count: AtomicU64,
    waiting: std::sync::atomic::AtomicBool,
    reached: tokio::sync::Notify,
}

impl StreamCount {
    fn add(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            self.reached.notify_waiters();
        }
    }

    /// Resolves once `count` streams arrived.
    pub async fn reached(&self, count: u64) {
        loop {
            let notified = self.reached.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            self.waiting.store(true, Ordering::SeqCst);
            if self.count.load(Ordering::SeqCst) >= count {
                return;
            }
            notified.await;
        }
    }
}

impl Upstream {
    /// A group stream of this subscription arrived: count it, and rank its reader by the
    /// priority our readers asked of the subscription (within it, older groups are evicted
    /// first).
    pub fn arrived<R: RecvStream>(&self, reader: &mut Reader<R>, sequence: u64) {
        self.streams.add();
        reader.set_rank(Rank::Data {
            priority: self.track.demand().map_or(0, |demand| demand.priority),
            sequence,
        });
    }
}

pub(crate) struct Shared<T: Transport> {
    pub transport: T,
    pub version: Version,
    pub config: SessionConfig,
    pub peer: PeerSetup,
    pub budget: RecvBudget,
    /// Our subscriptions to the peer, by subscribe id: where its group streams land.
    pub upstream: Mutex<HashMap<u64, Arc<Upstream>>>,
    pub next_subscribe_id: AtomicU64,
    pub served_subscriptions: AtomicUsize,
    pub announce_interests: AtomicUsize,
    /// Slots for the peer's requests (TRACK, FETCH, PROBE, GOAWAY) in flight; a request past
    /// them waits for one (up to the request timeout) instead of being refused.
    pub requests: tokio::sync::Semaphore,
    /// Stamp for announcements whose chain names no publisher.
    pub anonymous_stamp: u64,
    pub cancel: CancellationToken,
    pub error: Mutex<Option<Error>>,
    /// The peer sent GOAWAY: the URI to reconnect to (empty = the same endpoint).
    pub goaway: Mutex<Option<String>>,
    pub goaway_received: tokio::sync::Notify,
    pub goaway_sent: std::sync::atomic::AtomicBool,
    pub stats: SessionStats,
    /// An IETF session's own state (`None` on moq-lite). Such a session's `version` is
    /// lite-06, whose model semantics its tracks take (docs/wire-ietf.md §7).
    pub ietf: Option<crate::ietf::State<T>>,
    /// This session's account in the relay-wide state ledger, when it has one.
    pub state: Option<crate::StateAccount>,
    /// Our subscriptions to the peer still running (see [`Pulling`]): when the peer closes,
    /// the session waits for them to read what it sent before (bounded by `CLOSE_DRAIN`).
    pub pulls: AtomicUsize,
    pub pulls_ended: tokio::sync::Notify,
    /// Fired when the transport closed under us: the broadcasts the peer serves take no new
    /// track request (a request dispatched to a dead session would fail at once and be
    /// handed on, maybe to another dying session and back), while running pulls finish.
    pub closing: CancellationToken,
}

/// Counts one running subscription to the peer in [`Shared::pulls`] while it lives.
pub(crate) struct Pulling<'a> {
    pulls: &'a AtomicUsize,
    ended: &'a tokio::sync::Notify,
}

impl Drop for Pulling<'_> {
    fn drop(&mut self) {
        if self.pulls.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.ended.notify_waiters();
        }
    }
}

impl<T: Transport> Shared<T> {
    /// Count a subscription to the peer as running until the guard drops.
    pub(crate) fn pulling(&self) -> Pulling<'_> {
        self.pulls.fetch_add(1, Ordering::AcqRel);
        Pulling {
            pulls: &self.pulls,
            ended: &self.pulls_ended,
        }
    }

    /// Resolves once no subscription to the peer is running.
    async fn pulls_settled(&self) {
        loop {
            let ended = self.pulls_ended.notified();
            if self.pulls.load(Ordering::Acquire) == 0 {
                return;
            }
            ended.await;
        }
    }

    /// The IETF state; `Closed` on a moq-lite session, where no IETF code runs.
    pub fn ietf(&self) -> Result<&crate::ietf::State<T>, Error> {
        self.ietf.as_ref().ok_or(Error::Closed)
    }

    /// Run `task` until it ends or the session does.
    pub fn spawn<F>(self: &Arc<Self>, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let cancel = self.cancel.clone();
        tokio::spawn(async move {
            // The cancellation is polled only when it fired, not on each of the task's wakes
            // (a subscription wakes once per frame).
            let cancelled = std::pin::pin!(cancel.cancelled_owned());
            let mut gate = Gate::default();
            tokio::select! {
                biased;
                _ = task => {}
                _ = gate.future(cancelled) => {}
            }
        });
    }

    /// A uni stream for one group, unless `abort` resolves before the transport grants one;
    /// counted in `opened` (the stream count a track's end reports). Callers run inside
    /// [`Shared::spawn`], which ends them with the session.
    pub async fn group_stream<A: std::future::Future>(
        &self,
        abort: A,
        opened: &AtomicU64,
    ) -> Option<Writer<T::Send>> {
        let stream = tokio::select! {
            biased;
            stream = self.transport.open_uni() => stream.ok()?,
            _ = abort => return None,
        };
        opened.fetch_add(1, Ordering::Relaxed);
        Some(Writer::new(stream, self.version))
    }

    /// One group on a stream of its own (a subscription's send, both families): the stream
    /// is opened unless `stop` comes first, set to send `order`, written by `write`, then
    /// FIN'd; a group that cannot complete (its write failed, or `stop` came) is reset with
    /// `reset_code` of why. Resolves to `sequence`.
    pub async fn send_group(
        &self,
        sequence: u64,
        stop: &Stop,
        opened: &AtomicU64,
        order: i32,
        write: impl AsyncFnOnce(&mut Writer<T::Send>) -> Result<(), StreamCode>,
        reset_code: impl FnOnce(StreamCode) -> u32,
    ) -> u64 {
        let Some(mut writer) = self.group_stream(stop.stopped(), opened).await else {
            return sequence;
        };
        writer.set_priority(order);
        let result = tokio::select! {
            biased;
            result = write(&mut writer) => result,
            code = stop.stopped() => Err(code),
        };
        tracing::trace!(sequence, ?result, "group stream sent");
        match result {
            Ok(()) => {
                let _ = writer.finish();
                self.stats.groups_sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(code) => writer.reset(reset_code(code)),
        }
        sequence
    }

    /// The peer sent GOAWAY asking to reconnect to `uri`; a second one is a protocol
    /// violation (docs/wire.md §4.12, docs/wire-ietf.md §4.15).
    pub fn goaway_arrived(&self, uri: String) -> Result<(), Error> {
        tracing::info!(%uri, "peer is going away");
        let first = {
            let mut slot = self.goaway.lock();
            let first = slot.is_none();
            slot.get_or_insert(uri);
            first
        };
        self.goaway_received.notify_waiters();
        if first {
            Ok(())
        } else {
            Err(Error::ProtocolViolation("second GOAWAY"))
        }
    }

    /// Resolves once the peer has sent GOAWAY.
    pub async fn going_away(&self) {
        loop {
            let notified = self.goaway_received.notified();
            if self.goaway.lock().is_some() {
                return;
            }
            notified.await;
        }
    }

    /// End the session with the code `err` maps to.
    pub fn fail(&self, err: Error) {
        let code = err.session_code();
        tracing::debug!(?err, ?code, "session failed");
        {
            let mut slot = self.error.lock();
            if slot.is_none() {
                *slot = Some(err.clone());
            }
        }
        self.transport.close(code.to_code(), &err.to_string());
        self.cancel.cancel();
    }

    /// The absolute path for a wire path.
    pub fn absolute(&self, wire: &Path) -> Result<Path, Error> {
        self.config
            .root
            .join(wire)
            .map_err(|_| Error::ProtocolViolation("path too long"))
    }

    /// A slot for one of the peer's requests, waiting up to the request timeout for one to
    /// free (CONTROL_TIMEOUT past it).
    pub async fn request_slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, Error> {
        tokio::time::timeout(self.config.limits.request_timeout, self.requests.acquire())
            .await
            .map_err(|_| Error::Stream(StreamCode::ControlTimeout))?
            .map_err(|_| Error::Stream(StreamCode::Internal))
    }

    /// Take a slot from one of this session's bounded counters, and charge what it holds to
    /// the relay-wide state ledger when the session has an account; `None` when either is
    /// full.
    pub fn take_slot<'a>(
        &self,
        counter: &'a AtomicUsize,
        max: usize,
        held: crate::Held,
    ) -> Option<SlotGuard<'a>> {
        let prev = counter.fetch_add(1, Ordering::AcqRel);
        if prev >= max {
            counter.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let entry = match &self.state {
            Some(account) => match account.charge(held) {
                Some(entry) => Some(entry),
                None => {
                    counter.fetch_sub(1, Ordering::AcqRel);
                    return None;
                }
            },
            None => None,
        };
        Some(SlotGuard {
            counter,
            _entry: entry,
        })
    }

    /// An entry in the relay-wide state ledger for one more announced broadcast: `Ok(None)`
    /// without an account, `Bound` when the ledger refuses it.
    pub fn charge_route(&self) -> Result<Option<crate::StateEntry>, Error> {
        match &self.state {
            Some(account) => account
                .charge(crate::Held::Route)
                .map(Some)
                .ok_or(Error::Bound("relay-wide state ledger")),
            None => Ok(None),
        }
    }
}

/// Releases a bounded-counter slot (and its ledger entry) on drop.
pub(crate) struct SlotGuard<'a> {
    counter: &'a AtomicUsize,
    _entry: Option<crate::StateEntry>,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A session with a peer. Cheap to clone; the session runs until closed by either side.
pub struct Session<T: Transport> {
    shared: Arc<Shared<T>>,
}

impl<T: Transport> Clone for Session<T> {
    fn clone(&self) -> Self {
        Session {
            shared: self.shared.clone(),
        }
    }
}

/// A server-side session whose client SETUP has arrived, waiting for the caller's decision.
pub struct Accepting<T: Transport> {
    transport: T,
    version: Version,
    setup: PeerSetup,
    /// lite-01/02: the legacy SETUP stream, kept open as the session stream, and what was
    /// read past the SETUP on it.
    session_stream: Option<SessionStream<T>>,
    /// An IETF draft's handshake so far.
    ietf: Option<crate::ietf::Handshake<T>>,
}

impl<T: Transport> Accepting<T> {
    /// Read the client's SETUP (docs/wire.md §3.2): it must come first, within the handshake timeout.
    pub async fn new(
        transport: T,
        version: Version,
        timeout: std::time::Duration,
    ) -> Result<Self, Error> {
        check_version(version)?;
        if version.negotiates_in_band() {
            return Err(Error::ProtocolViolation("lite-01/02 are chosen in band"));
        }
        if !version.has_setup_stream() {
            // lite-03/04: the ALPN was all; nothing to read.
            return Ok(Accepting {
                transport,
                version,
                setup: PeerSetup::assigned(),
                session_stream: None,
                ietf: None,
            });
        }
        let read = async {
            loop {
                let stream = transport.accept_uni().await?;
                let mut reader =
                    Reader::new(stream, version, &RecvBudget::new(64 << 10), Rank::Control);
                match reader.varint().await? {
                    Some(code) if code == UniType::Setup.code() => {
                        let setup = reader
                            .message::<Setup>(64 << 10)
                            .await?
                            .ok_or(Error::Decode(starling_proto::DecodeError::Truncated))?;
                        return Ok::<_, Error>(setup);
                    }
                    _ => reader.stop(StreamCode::Internal.to_code()),
                }
            }
        };
        let setup = handshake(&transport, timeout, read).await?;
        Ok(Accepting {
            transport,
            version,
            setup,
            session_stream: None,
            ietf: None,
        })
    }

    /// An IETF draft's handshake (docs/wire-ietf.md §3): read the client's CLIENT_SETUP
    /// (14-16) or SETUP stream (17 on) within `timeout`.
    pub async fn ietf(
        transport: T,
        draft: starling_proto::ietf::Draft,
        timeout: std::time::Duration,
    ) -> Result<Self, Error> {
        let handshake = crate::ietf::accept(&transport, draft, timeout).await?;
        Ok(Accepting {
            transport,
            version: Version::Lite06,
            setup: handshake.peer(),
            session_stream: None,
            ietf: Some(handshake),
        })
    }

    /// The legacy in-band negotiation (ALPN `moql`, or no protocol): read CLIENT_SETUP on the
    /// first bidi stream within `timeout`, choose the first version of the client's list among
    /// `served` that is negotiated in band (lite-02, lite-01), answer SERVER_SETUP and keep the
    /// stream as the session stream. No common version closes the session with
    /// VERSION_NEGOTIATION_FAILED; a malformed SETUP with PROTOCOL_VIOLATION.
    pub async fn legacy(
        transport: T,
        served: &[Version],
        timeout: std::time::Duration,
    ) -> Result<Self, Error> {
        let exchange = async {
            let (send, mut recv) = transport.accept_bi().await?;
            let (offer, rest) = read_legacy_setup(&mut recv, legacy::decode_client_setup).await?;
            let Some(version) = offer.choose(served) else {
                // Closed before the stream goes, so the client reads the reason, not a reset.
                transport.close(
                    SessionCode::VersionNegotiationFailed.to_code(),
                    "no common version",
                );
                return Err(Error::Version);
            };
            let mut out = bytes::BytesMut::new();
            legacy::encode_server_setup(
                &legacy::ServerSetup {
                    version: version.code(),
                    params: legacy::LegacyParams::default(),
                },
                &mut out,
            )?;
            let mut send = send;
            send.write(out.freeze()).await?;
            Ok::<_, Error>((version, send, recv, rest))
        };
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout("setup")),
        };
        match result {
            Ok((version, send, recv, rest)) => Ok(Accepting {
                transport,
                version,
                setup: PeerSetup::assigned(),
                session_stream: Some((send, recv, rest)),
                ietf: None,
            }),
            Err(err) => {
                transport.close(err.session_code().to_code(), "bad setup");
                Err(err)
            }
        }
    }

    pub fn setup(&self) -> &PeerSetup {
        &self.setup
    }

    pub fn version(&self) -> Version {
        self.version
    }

    /// The protocol the session speaks.
    pub fn protocol(&self) -> Protocol {
        match &self.ietf {
            Some(handshake) => Protocol::Ietf(handshake.draft),
            None => Protocol::Lite(self.version),
        }
    }

    /// Refuse the session with a session code.
    pub fn reject(self, code: SessionCode, reason: &str) {
        self.transport.close(code.to_code(), reason);
    }

    /// Send our SETUP (05+; the drafts' SERVER_SETUP or SETUP) and start serving.
    pub async fn start(self, config: SessionConfig) -> Result<Session<T>, Error> {
        if let Some(handshake) = self.ietf {
            let window = config.limits.ietf_request_window();
            let started =
                crate::ietf::start(&self.transport, handshake, config.hop, window).await?;
            return Ok(Session::run(
                self.transport,
                self.version,
                config,
                self.setup,
                None,
                Some(started),
            ));
        }
        if self.version.has_setup_stream() {
            let mut setup = Setup::new();
            setup.set_hop(Some(config.hop))?;
            advertise_probe(&self.transport, &mut setup);
            send_setup(&self.transport, self.version, &setup).await?;
        }
        Ok(Session::run(
            self.transport,
            self.version,
            config,
            self.setup,
            self.session_stream,
            None,
        ))
    }
}

/// Wait for the peer's SETUP within `timeout`; a bad or missing one closes the session with
/// its code (PROTOCOL_VIOLATION, CONTROL_TIMEOUT).
async fn handshake<T: Transport>(
    transport: &T,
    timeout: std::time::Duration,
    read: impl std::future::Future<Output = Result<Setup, Error>>,
) -> Result<PeerSetup, Error> {
    let result = match tokio::time::timeout(timeout, read).await {
        Ok(setup) => setup.and_then(|setup| PeerSetup::from_setup(&setup)),
        Err(_) => Err(Error::Timeout("setup")),
    };
    if let Err(err) = &result {
        transport.close(err.session_code().to_code(), "bad setup");
    }
    result
}

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
type SessionStream<T> = (
    <T as Transport>::Send,
    <T as Transport>::Recv,
    bytes::BytesMut,
);

/// Read one legacy SETUP (`decode`) from `recv`: the message, and whatever followed it in the
/// same reads (SESSION_INFO, say), for the session stream to go on from.
async fn read_legacy_setup<R: RecvStream, M>(
    recv: &mut R,
    decode: fn(&mut bytes::BytesMut) -> Result<Option<M>, starling_proto::DecodeError>,
) -> Result<(M, bytes::BytesMut), Error> {
    let mut buf = bytes::BytesMut::new();
    loop {
        if let Some(setup) = decode(&mut buf)? {
            return Ok((setup, buf));
        }
        if buf.len() > 3 + legacy::MAX_SETUP_BODY {
            return Err(Error::ProtocolViolation("SETUP too large"));
        }
        let chunk = recv
            .read(64 << 10)
            .await?
            .ok_or(Error::Decode(starling_proto::DecodeError::Truncated))?;
        buf.extend_from_slice(&chunk);
    }
}

/// How long a client whose legacy SETUP stream was reset waits for the session's close (and
/// its reason) to follow.
const CLOSE_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// When the peer closes, how long the group streams it opened before may still be read.
/// Transports keep what arrived before a close readable (QUIC does; so does our QMux), and a
/// publisher that writes its last group and closes at once (moq-cli when its input ends)
/// expects it delivered; reading what is buffered takes microseconds, streams without their
/// FIN fail as soon as their buffer is read, so the bound is only a backstop.
const CLOSE_DRAIN: std::time::Duration = std::time::Duration::from_secs(1);

/// We report PROBEs when the transport measures an RTT (docs/wire.md §4.1 Probe), whether
/// or not it has a sample yet.
fn advertise_probe<T: Transport>(transport: &T, setup: &mut Setup) {
    if transport.measures_rtt() {
        setup.set_probe(ProbeLevel::Report);
    }
}

fn check_version(version: Version) -> Result<(), Error> {
    if version.is_implemented() {
        Ok(())
    } else {
        Err(Error::Decode(starling_proto::DecodeError::Unsupported))
    }
}

async fn send_setup<T: Transport>(
    transport: &T,
    version: Version,
    setup: &Setup,
) -> Result<(), Error> {
    let stream = transport.open_uni().await?;
    let mut writer = Writer::new(stream, version);
    writer.queue_varint(UniType::Setup.code())?;
    writer.queue(setup)?;
    writer.flush().await?;
    writer.finish()
}

impl<T: Transport> Session<T> {
    /// Client side: send our SETUP, wait for the server's, start serving.
    pub async fn connect(
        transport: T,
        version: Version,
        client: ClientSetup,
        config: SessionConfig,
    ) -> Result<Self, Error> {
        check_version(version)?;
        if version.negotiates_in_band() {
            return Err(Error::ProtocolViolation("lite-01/02 are chosen in band"));
        }
        if !version.has_setup_stream() {
            // lite-03/04: the ALPN was all.
            return Ok(Session::run(
                transport,
                version,
                config,
                PeerSetup::assigned(),
                None,
                None,
            ));
        }
        let mut setup = Setup::new();
        setup.set_hop(Some(config.hop))?;
        setup.set_role(client.role);
        setup.set_path(client.path.as_deref().filter(|p| !p.is_empty()));
        if let Some(cost) = client.cost {
            setup.set_cost(Some(cost));
        }
        advertise_probe(&transport, &mut setup);
        send_setup(&transport, version, &setup).await?;
        let timeout = config.limits.handshake_timeout;
        let read = async {
            let stream = transport.accept_uni().await?;
            let mut reader =
                Reader::new(stream, version, &RecvBudget::new(64 << 10), Rank::Control);
            match reader.varint().await? {
                Some(code) if code == UniType::Setup.code() => reader
                    .message::<Setup>(64 << 10)
                    .await?
                    .ok_or(Error::Decode(starling_proto::DecodeError::Truncated)),
                _ => Err(Error::ProtocolViolation("first server stream is not SETUP")),
            }
        };
        let server = handshake(&transport, timeout, read).await?;
        Ok(Session::run(transport, version, config, server, None, None))
    }

    /// Client side of an IETF draft: our SETUP (and on 14-16 the server's SERVER_SETUP),
    /// then serving (docs/wire-ietf.md §3.2, §3.3).
    pub async fn connect_ietf(
        transport: T,
        draft: starling_proto::ietf::Draft,
        client: ClientSetup,
        config: SessionConfig,
    ) -> Result<Self, Error> {
        let started = crate::ietf::connect(
            &transport,
            draft,
            client.path.as_deref(),
            client.cost,
            config.hop,
            config.limits.ietf_request_window(),
            config.limits.handshake_timeout,
        )
        .await?;
        let peer = started
            .state
            .peer()
            .map(|options| crate::ietf::peer_of(&options))
            .unwrap_or_else(PeerSetup::assigned);
        Ok(Session::run(
            transport,
            Version::Lite06,
            config,
            peer,
            None,
            Some(started),
        ))
    }

    /// Client side, by the protocol the transport agreed: a version's own ALPN names it (SETUP
    /// follows from lite-05); `moql`, or no protocol (`""`), runs the legacy negotiation
    /// offering those of `versions` that are chosen in band.
    pub async fn connect_negotiated(
        transport: T,
        protocol: &str,
        versions: &[Version],
        client: ClientSetup,
        config: SessionConfig,
    ) -> Result<Self, Error> {
        if protocol.is_empty() || protocol == starling_proto::LEGACY_ALPN {
            return Self::connect_legacy(transport, versions, config).await;
        }
        if let Some(draft) = starling_proto::ietf::Draft::from_alpn(protocol) {
            return Self::connect_ietf(transport, draft, client, config).await;
        }
        let version = Version::from_alpn(protocol).ok_or(Error::Version)?;
        Self::connect(transport, version, client, config).await
    }

    /// Client side of the legacy in-band negotiation (ALPN `moql`, or no protocol): offer
    /// `versions` (those negotiated in band, in this order) in CLIENT_SETUP on the first bidi
    /// stream, read SERVER_SETUP, and start on the version chosen, the stream kept as the
    /// session stream.
    pub async fn connect_legacy(
        transport: T,
        versions: &[Version],
        config: SessionConfig,
    ) -> Result<Self, Error> {
        let offered: Vec<Version> = versions
            .iter()
            .copied()
            .filter(|v| v.negotiates_in_band() && v.is_implemented())
            .collect();
        if offered.is_empty() {
            return Err(Error::Version);
        }
        let timeout = config.limits.handshake_timeout;
        let exchange = async {
            let (mut send, mut recv) = transport.open_bi().await?;
            let mut out = bytes::BytesMut::new();
            legacy::encode_client_setup(
                &legacy::ClientSetup::offering(&offered, "starling"),
                &mut out,
            )?;
            send.write(out.freeze()).await?;
            let (answer, rest) = read_legacy_setup(&mut recv, legacy::decode_server_setup).await?;
            let version = offered
                .iter()
                .copied()
                .find(|v| v.code() == answer.version)
                .ok_or(Error::Version)?;
            Ok::<_, Error>((version, send, recv, rest))
        };
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout("setup")),
        };
        match result {
            Ok((version, send, recv, rest)) => Ok(Session::run(
                transport,
                version,
                config,
                PeerSetup::assigned(),
                Some((send, recv, rest)),
                None,
            )),
            Err(Error::Transport(TransportError::Reset(_))) => {
                // A server refusing closes the session, which may reach us after the reset of
                // the SETUP stream: the close and its reason are what happened.
                let closed = tokio::time::timeout(CLOSE_SETTLE, transport.closed()).await;
                let err = match closed {
                    Ok(closed @ TransportError::ClosedByPeer { .. }) => Error::Transport(closed),
                    _ => Error::ProtocolViolation("SETUP stream reset"),
                };
                transport.close(err.session_code().to_code(), "bad setup");
                Err(err)
            }
            Err(err) => {
                transport.close(err.session_code().to_code(), "bad setup");
                Err(err)
            }
        }
    }

    fn run(
        transport: T,
        version: Version,
        config: SessionConfig,
        peer: PeerSetup,
        session_stream: Option<SessionStream<T>>,
        ietf: Option<crate::ietf::Started<T>>,
    ) -> Self {
        let (ietf, ietf_recv) = match ietf {
            Some(started) => (Some(started.state), started.recv),
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
            upstream: Mutex::new(HashMap::new()),
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
        let driver = shared.clone();
        tokio::spawn(async move { drive(driver).await });
        if shared.ietf.is_some() {
            crate::ietf::begin(&shared, ietf_recv);
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

    pub fn version(&self) -> Version {
        self.shared.version
    }

    /// The protocol the session speaks.
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
        self.shared
            .spawn(async move { subscriber::serve_requests(shared, path, producer).await });
        consumer
    }

    /// Ask the peer to reconnect (to `uri`, or here when empty) and stop opening requests; the
    /// session keeps serving what is open. A second call does nothing (docs/wire.md §4.12).
    pub async fn goaway(&self, uri: &str) -> Result<(), Error> {
        let ietf = self.shared.ietf.is_some();
        if !(ietf || self.shared.version.has_goaway())
            || self.shared.goaway_sent.swap(true, Ordering::AcqRel)
        {
            return Ok(());
        }
        if ietf {
            return crate::ietf::send_goaway(&self.shared, uri).await;
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

/// Accept the peer's streams until the session ends.
///
/// Request streams (bidirectional) get a task each. Data streams (unidirectional, one group
/// each) are read here, in this task, as futures of one set: a group costs no spawn, and each
/// stream's wake polls only that stream. What the task waits on besides them (the accepts,
/// datagrams, the session's end) is polled through a [`Gate`] only when it woke.
async fn drive<T: Transport>(shared: Arc<Shared<T>>) {
    use futures::future::Either;

    // Each stream goes to its family's handler: the IETF drafts' or moq-lite's.
    let ietf = shared.ietf.is_some();
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
                            let task = shared.clone();
                            if ietf {
                                shared.spawn(crate::ietf::request_stream(task, send, recv));
                            } else {
                                shared.spawn(handle_bi(task, send, recv));
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
                            let task = shared.clone();
                            data.push(if ietf {
                                Either::Left(crate::ietf::uni_stream(task, recv))
                            } else {
                                Either::Right(handle_uni(task, recv))
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
                        Ok(received) if ietf => crate::ietf::datagram(&shared, received)?,
                        Ok(received) => subscriber::datagram(&shared, received),
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

async fn handle_bi<T: Transport>(shared: Arc<Shared<T>>, send: T::Send, recv: T::Recv) {
    // Until its type is decoded, a request stream is worth no more than any header-less stream.
    let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Unknown);
    let mut writer = Writer::new(send, shared.version);
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
            publisher::hold(&shared, kind, &mut reader, &mut writer).await
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

async fn handle_uni<T: Transport>(shared: Arc<Shared<T>>, recv: T::Recv) {
    let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Unknown);
    match reader.varint().await {
        Ok(Some(code)) if code == UniType::Group.code() => {
            subscriber::group(&shared, &mut reader).await;
        }
        Ok(Some(code)) if code == UniType::Setup.code() => {
            shared.fail(Error::ProtocolViolation("second SETUP stream"));
        }
        Ok(_) => reader.stop(StreamCode::Internal.to_code()),
        Err(err) => reader.stop(err.stream_code().to_code()),
    }
}

/// Map a transport reset into the stream code it carried.
pub(crate) fn reset_code(err: &Error) -> Option<StreamCode> {
    match err {
        Error::Transport(TransportError::Reset(code)) => Some(StreamCode::from_code(*code)),
        _ => None,
    }
}

// Silence unused-import lints for trait methods used through generics.
#[allow(dead_code)]
fn _assert_traits<S: SendStream, R: RecvStream>() {}
