//! The QMux connection state machine (quinn-proto style): feed records and time, drain records,
//! events and timeouts. Frame handling lives in `recv.rs`, transmission in `transmit.rs`, and
//! the application's stream operations in `ops.rs`.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::Config;
use crate::error::{CloseReason, PeerError, TransportCode};
use crate::flow::RecvCredit;
use crate::frame::Frame;
use crate::params::TransportParams;
use crate::record::{Framing, RecordReader};
use crate::sched::Scheduler;
use crate::streams::Stream;
use crate::version::{Dir, Side, StreamId, WireVersion};

/// Something the application (or its driver) should react to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The peer's transport parameters arrived (the protocol is known now).
    Connected,
    /// A peer-initiated stream is waiting in [`Connection::accept`].
    StreamOpened(Dir),
    /// More local streams of this direction may be opened.
    StreamsAvailable(Dir),
    /// Data, a FIN or a reset arrived on this stream.
    Readable(StreamId),
    /// This stream's send half can make progress (credit, buffer space, stop, completion).
    Writable(StreamId),
    /// A datagram is waiting in [`Connection::recv_datagram`].
    DatagramReceived,
    /// The connection is closing or closed; see [`Connection::close_reason`].
    Closed,
}

#[derive(Debug)]
pub(crate) enum State {
    Open,
    /// A close frame is queued (APPLICATION_CLOSE or CONNECTION_CLOSE).
    Closing(CloseReason, Frame),
    Closed(CloseReason),
}

/// Peer ids retired before their final size was known, with the offset counted so far, so a
/// late RESET_STREAM or FIN still settles connection flow control.
pub(crate) const MAX_LINGERING: usize = 4096;
/// Ping responses we hold unsent before dropping the oldest.
pub(crate) const MAX_PING_RESPONSES: usize = 64;
/// After the first QX_PING round trip (which includes the peer's start-up), the next ping
/// goes this soon rather than a whole `rtt_interval` later.
pub(crate) const FIRST_RTT_RESAMPLE: Duration = Duration::from_millis(200);
/// Largest reason carried in a close frame.
pub(crate) const MAX_REASON: usize = 1024;

/// One QMux connection, without I/O.
pub struct Connection {
    pub(crate) config: Config,
    pub(crate) local_params: TransportParams,
    pub(crate) peer_params: Option<TransportParams>,
    pub(crate) protocol: Option<String>,
    pub(crate) state: State,
    pub(crate) tp_sent: bool,
    pub(crate) reader: Option<RecordReader>,

    pub(crate) streams: HashMap<StreamId, Stream>,
    /// Streams we opened so far, per direction.
    pub(crate) next_local: [u64; 2],
    /// The peer's MAX_STREAMS.
    pub(crate) local_limit: [u64; 2],
    /// Peer streams opened so far (highest index + 1), per direction.
    pub(crate) next_remote: [u64; 2],
    /// Our MAX_STREAMS, and how many peer streams were retired.
    pub(crate) remote_limit: [u64; 2],
    pub(crate) remote_retired: [u64; 2],
    pub(crate) incoming: [VecDeque<StreamId>; 2],
    pub(crate) lingering: HashMap<StreamId, u64>,
    pub(crate) lingering_order: VecDeque<StreamId>,

    pub(crate) conn_credit: RecvCredit,
    pub(crate) conn_received: u64,
    pub(crate) conn_send_max: u64,
    pub(crate) conn_sent: u64,
    pub(crate) unsent_total: u64,

    pub(crate) sched: Scheduler,
    pub(crate) control: VecDeque<Frame>,
    pub(crate) ping_responses: VecDeque<u64>,
    pub(crate) pending_ping: bool,
    pub(crate) pending_max_data: bool,
    pub(crate) pending_max_stream_data: BTreeSet<StreamId>,
    pub(crate) pending_max_streams: [bool; 2],
    pub(crate) blocked_on_buffer: BTreeSet<StreamId>,
    pub(crate) data_blocked_sent: Option<u64>,
    pub(crate) streams_blocked_sent: [Option<u64>; 2],
    pub(crate) datagrams_in: VecDeque<Bytes>,
    pub(crate) datagrams_out: VecDeque<Bytes>,
    pub(crate) events: VecDeque<Event>,

    pub(crate) last_recv: Instant,
    pub(crate) last_send: Instant,
    pub(crate) next_rtt_ping: Option<Instant>,
    pub(crate) ping_seq: u64,
    pub(crate) pings_out: VecDeque<(u64, Instant)>,
    pub(crate) last_ping_request: Option<u64>,
    pub(crate) rtt: Option<Duration>,
}

impl Connection {
    /// A connection whose transport parameters go out with the first [`poll_transmit`].
    ///
    /// [`poll_transmit`]: Connection::poll_transmit
    pub fn new(config: Config, now: Instant) -> Self {
        let local_params = config.transport_params();
        let reader = (config.framing == Framing::ByteStream)
            .then(|| RecordReader::new(config.version, config.max_record_size));
        // The first QX_PING goes out with the first records, so a round trip is known at
        // once (PROBE reports carry it); then one per interval.
        let rtt = config
            .rtt_interval
            .filter(|_| config.version.uses_records())
            .map(|_| now);
        Self {
            conn_credit: RecvCredit::new(config.max_data),
            remote_limit: [config.max_streams_bidi, config.max_streams_uni],
            local_params,
            peer_params: None,
            protocol: None,
            state: State::Open,
            tp_sent: false,
            reader,
            streams: HashMap::new(),
            next_local: [0; 2],
            local_limit: [0; 2],
            next_remote: [0; 2],
            remote_retired: [0; 2],
            incoming: Default::default(),
            lingering: HashMap::new(),
            lingering_order: VecDeque::new(),
            conn_received: 0,
            conn_send_max: 0,
            conn_sent: 0,
            unsent_total: 0,
            sched: Scheduler::default(),
            control: VecDeque::new(),
            ping_responses: VecDeque::new(),
            pending_ping: false,
            pending_max_data: false,
            pending_max_stream_data: BTreeSet::new(),
            pending_max_streams: [false; 2],
            blocked_on_buffer: BTreeSet::new(),
            data_blocked_sent: None,
            streams_blocked_sent: [None; 2],
            datagrams_in: VecDeque::new(),
            datagrams_out: VecDeque::new(),
            events: VecDeque::new(),
            last_recv: now,
            last_send: now,
            next_rtt_ping: rtt,
            ping_seq: 0,
            pings_out: VecDeque::new(),
            last_ping_request: None,
            rtt: None,
            config,
        }
    }

    pub fn side(&self) -> Side {
        self.config.side
    }

    pub fn version(&self) -> WireVersion {
        self.config.version
    }

    /// The parameters we advertise.
    pub fn local_params(&self) -> &TransportParams {
        &self.local_params
    }

    /// The peer's parameters, once received.
    pub fn peer_params(&self) -> Option<&TransportParams> {
        self.peer_params.as_ref()
    }

    /// Whether the peer's transport parameters arrived.
    pub fn is_established(&self) -> bool {
        self.peer_params.is_some()
    }

    /// The application protocol agreed in-band (`application_protocols`), once established.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// The latest QX_PING round trip.
    pub fn rtt(&self) -> Option<Duration> {
        self.rtt
    }

    /// Whether round trips are measured: QX_PING needs records (01+) and an interval.
    pub fn measures_rtt(&self) -> bool {
        self.config.rtt_interval.is_some() && self.config.version.uses_records()
    }

    /// Why the connection is closing or closed; `None` while open.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        match &self.state {
            State::Open => None,
            State::Closing(reason, _) | State::Closed(reason) => Some(reason),
        }
    }

    /// Closed and nothing left to transmit: the driver may end the carrier.
    pub fn is_drained(&self) -> bool {
        matches!(self.state, State::Closed(_))
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// One WebSocket message's frames (or, on a byte stream, bytes read from it: see
    /// [`Connection::handle_bytes`]).
    pub fn handle_record(&mut self, record: Bytes, now: Instant) {
        if self.config.framing == Framing::ByteStream {
            self.handle_bytes(&record, now);
            return;
        }
        if !matches!(self.state, State::Open) {
            return;
        }
        self.last_recv = now;
        let limit = if self.config.version.uses_records() {
            self.config.max_record_size
        } else {
            crate::record::MAX_FRAME_SIZE_00 as u64
        };
        if record.len() as u64 > limit {
            let err = PeerError::new(
                TransportCode::PROTOCOL_VIOLATION,
                format!("message of {} bytes exceeds {limit}", record.len()),
            );
            self.fail(err);
            return;
        }
        if let Err(err) = self.process_record(record, now) {
            self.fail(err);
        }
    }

    /// Bytes read from a byte-stream carrier (TCP, unix): records are reassembled here.
    pub fn handle_bytes(&mut self, data: &[u8], now: Instant) {
        if !matches!(self.state, State::Open) {
            return;
        }
        self.last_recv = now;
        let Some(mut reader) = self.reader.take() else {
            // Message framing: the bytes are one record.
            self.handle_record(Bytes::copy_from_slice(data), now);
            return;
        };
        reader.push(data);
        loop {
            match reader.next_record() {
                Ok(Some(record)) => {
                    if let Err(err) = self.process_record(record, now) {
                        self.fail(err);
                        break;
                    }
                    if !matches!(self.state, State::Open) {
                        break;
                    }
                }
                Ok(None) => break,
                Err(err) => {
                    self.fail(err);
                    break;
                }
            }
        }
        self.reader = Some(reader);
    }

    /// The carrier ended or failed without a close frame.
    pub fn handle_lost(&mut self, reason: impl Into<String>) {
        if !matches!(self.state, State::Closed(_)) {
            self.enter_closed(CloseReason::Lost(reason.into()));
        }
    }

    /// Close with APPLICATION_CLOSE carrying the moq session code.
    pub fn close(&mut self, code: u64, reason: &str) {
        if !matches!(self.state, State::Open) {
            return;
        }
        let reason = truncate(reason);
        let frame = Frame::ApplicationClose {
            code,
            reason: Bytes::copy_from_slice(reason.as_bytes()),
        };
        self.enter_closing(
            CloseReason::LocalApplication {
                code,
                reason: reason.to_owned(),
            },
            frame,
        );
    }

    /// The earliest instant [`Connection::handle_timeout`] has work to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !matches!(self.state, State::Open) {
            return None;
        }
        let idle = self.idle_timeout();
        let deadlines = [
            idle.map(|d| self.last_recv + d),
            idle.map(|d| self.last_send + d / 3),
            self.next_rtt_ping,
        ];
        deadlines.into_iter().flatten().min()
    }

    /// Advance timers: idle close, keep-alive and RTT pings.
    pub fn handle_timeout(&mut self, now: Instant) {
        if !matches!(self.state, State::Open) {
            return;
        }
        if let Some(idle) = self.idle_timeout() {
            if now >= self.last_recv + idle {
                // Silent, like QUIC's idle timeout.
                self.enter_closed(CloseReason::IdleTimeout);
                return;
            }
            if now >= self.last_send + idle / 3 {
                self.pending_ping = true;
            }
        }
        if let Some(at) = self.next_rtt_ping {
            if now >= at {
                self.pending_ping = true;
                self.next_rtt_ping = self.config.rtt_interval.map(|d| now + d);
            }
        }
    }

    /// The idle timeout in force: the smaller non-zero of ours and the peer's (01+ only).
    pub fn idle_timeout(&self) -> Option<Duration> {
        if !self.config.version.uses_records() {
            return None;
        }
        let ours = self.local_params.max_idle_timeout;
        let theirs = self.peer_params.as_ref().map_or(0, |p| p.max_idle_timeout);
        let ms = match (ours, theirs) {
            (0, 0) => return None,
            (0, t) => t,
            (o, 0) => o,
            (o, t) => o.min(t),
        };
        Some(Duration::from_millis(ms))
    }

    /// A peer fault: queue CONNECTION_CLOSE with its transport code.
    pub(crate) fn fail(&mut self, err: PeerError) {
        if !matches!(self.state, State::Open) {
            return;
        }
        let frame = Frame::ConnectionClose {
            code: err.code.0,
            frame_type: 0,
            reason: Bytes::copy_from_slice(truncate(&err.reason).as_bytes()),
        };
        self.enter_closing(CloseReason::LocalTransport(err), frame);
    }

    fn enter_closing(&mut self, reason: CloseReason, frame: Frame) {
        self.drop_streams();
        self.state = State::Closing(reason, frame);
        self.events.push_back(Event::Closed);
    }

    /// Closed by the peer, the carrier or the idle timer. What the peer sent before stays
    /// readable, streams not yet accepted included, as QUIC keeps it: a peer that writes its
    /// last frames and FIN and closes at once (moq-cli when its input ends) loses nothing.
    /// Only what we would send is dropped.
    pub(crate) fn enter_closed(&mut self, reason: CloseReason) {
        self.streams.retain(|_, stream| {
            stream.send = None;
            stream.recv.is_some()
        });
        self.drop_sending();
        self.state = State::Closed(reason);
        self.events.push_back(Event::Closed);
    }

    /// Our own close: nothing more is read or sent.
    fn drop_streams(&mut self) {
        self.streams.clear();
        self.incoming = Default::default();
        self.drop_sending();
    }

    fn drop_sending(&mut self) {
        self.control.clear();
        self.datagrams_out.clear();
        self.sched = Scheduler::default();
        self.unsent_total = 0;
    }

    /// Split a record into frames and apply them.
    fn process_record(&mut self, mut record: Bytes, now: Instant) -> Result<(), PeerError> {
        if !self.config.version.uses_records() && self.config.framing == Framing::Message {
            // qmux-00: a message is exactly one frame.
            let frame = crate::frame::Frame::decode(&mut record)?;
            if !record.is_empty() {
                return Err(PeerError::new(
                    TransportCode::FRAME_ENCODING_ERROR,
                    "trailing bytes after a qmux-00 frame",
                ));
            }
            return self.on_frame(frame, now);
        }
        while !record.is_empty() {
            let frame = crate::frame::Frame::decode(&mut record)?;
            self.on_frame(frame, now)?;
            if !matches!(self.state, State::Open) {
                break;
            }
        }
        Ok(())
    }
}

fn truncate(reason: &str) -> &str {
    if reason.len() <= MAX_REASON {
        return reason;
    }
    let mut end = MAX_REASON;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}
