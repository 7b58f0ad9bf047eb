//! Applying the peer's frames: stream data and limits, resets, stops, credit, pings, closes.
//!
//! Every rule the peer can break ends the connection with a transport code: exceeding a
//! window (FLOW_CONTROL_ERROR) or the stream count (STREAM_LIMIT_ERROR), touching a stream it
//! cannot (STREAM_STATE_ERROR), a final size that moves (FINAL_SIZE_ERROR), and on qmux-02 a
//! transport-parameter frame that is not first or comes twice (PROTOCOL_VIOLATION).

use std::time::Instant;

use bytes::Bytes;

use crate::connection::{
    Connection, Event, State, FIRST_RTT_RESAMPLE, MAX_LINGERING, MAX_PING_RESPONSES,
};
use crate::error::{CloseReason, PeerError, TransportCode};
use crate::frame::{Frame, StreamFrame};
use crate::params::{negotiate_protocol, TransportParams};
use crate::streams::{RecvHalf, RecvState, SendHalf, SendState, Stream};
use crate::version::{Dir, Side, StreamId, WireVersion};

fn err(code: TransportCode, reason: impl Into<String>) -> PeerError {
    PeerError::new(code, reason)
}

impl Connection {
    pub(crate) fn on_frame(&mut self, frame: Frame, now: Instant) -> Result<(), PeerError> {
        if matches!(frame, Frame::Padding) {
            return Ok(());
        }
        let is_params = matches!(frame, Frame::TransportParameters(_));
        if self.config.version == WireVersion::Qmux02 && is_params == self.peer_params.is_some() {
            return Err(err(
                TransportCode::PROTOCOL_VIOLATION,
                "QX_TRANSPORT_PARAMETERS must be the first frame, once",
            ));
        }
        match frame {
            Frame::Padding => {}
            Frame::TransportParameters(params) => self.on_params(params)?,
            Frame::Stream(stream) => self.on_stream(stream)?,
            Frame::ResetStream {
                id,
                code,
                final_size,
            } => self.on_reset(id, code, final_size)?,
            Frame::ResetStreamAt {
                id,
                code,
                final_size,
                ..
            } => {
                if !self.local_params.reset_stream_at {
                    return Err(err(
                        TransportCode::PROTOCOL_VIOLATION,
                        "RESET_STREAM_AT without reset_stream_at",
                    ));
                }
                // Every byte up to the final size already arrived in order, so the
                // reliable-size guarantee holds; treat it as a plain reset.
                self.on_reset(id, code, final_size)?
            }
            Frame::StopSending { id, code } => self.on_stop(id, code)?,
            Frame::MaxData(max) => {
                if max > self.conn_send_max {
                    self.conn_send_max = max;
                    self.data_blocked_sent = None;
                }
            }
            Frame::MaxStreamData { id, max } => {
                if let Some(id) = self.locate(id, false)? {
                    if let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) {
                        if max > send.max {
                            send.max = max;
                            send.blocked_at = None;
                            self.events.push_back(Event::Writable(id));
                        }
                    }
                }
            }
            Frame::MaxStreams { dir, max } => {
                let d = dir.index();
                if max > self.local_limit[d] {
                    self.local_limit[d] = max;
                    self.streams_blocked_sent[d] = None;
                    self.events.push_back(Event::StreamsAvailable(dir));
                }
            }
            Frame::DataBlocked(_) | Frame::StreamsBlocked { .. } => {}
            Frame::StreamDataBlocked { id, .. } => {
                self.locate(id, true)?;
            }
            Frame::ConnectionClose { code, reason, .. } => {
                self.enter_closed(CloseReason::PeerTransport {
                    code: TransportCode(code),
                    reason: String::from_utf8_lossy(&reason).into_owned(),
                });
            }
            Frame::ApplicationClose { code, reason } => {
                self.enter_closed(CloseReason::PeerApplication {
                    code,
                    reason: String::from_utf8_lossy(&reason).into_owned(),
                });
            }
            Frame::Datagram { data, explicit_len } => self.on_datagram(data, explicit_len)?,
            Frame::PingRequest(seq) => {
                if self.config.version == WireVersion::Qmux02
                    && self.last_ping_request.is_some_and(|prev| seq <= prev)
                {
                    return Err(err(
                        TransportCode::PROTOCOL_VIOLATION,
                        "QX_PING sequence did not increase",
                    ));
                }
                self.last_ping_request = Some(seq);
                if self.ping_responses.len() >= MAX_PING_RESPONSES {
                    self.ping_responses.pop_front();
                }
                self.ping_responses.push_back(seq);
            }
            Frame::PingResponse(seq) => {
                if self.config.version == WireVersion::Qmux02 && seq >= self.ping_seq {
                    return Err(err(
                        TransportCode::PROTOCOL_VIOLATION,
                        "QX_PING response to a ping never sent",
                    ));
                }
                while let Some(&(sent_seq, at)) = self.pings_out.front() {
                    if sent_seq > seq {
                        break;
                    }
                    self.pings_out.pop_front();
                    if sent_seq == seq {
                        // The first ping leaves with the connection's first records, so its
                        // round trip includes the peer's start-up: measure again soon.
                        if self.rtt.is_none() && self.config.rtt_interval.is_some() {
                            self.next_rtt_ping = Some(now + FIRST_RTT_RESAMPLE);
                        }
                        self.rtt = Some(now.saturating_duration_since(at));
                    }
                }
            }
        }
        Ok(())
    }

    fn on_params(&mut self, params: TransportParams) -> Result<(), PeerError> {
        if self.peer_params.is_some() {
            return Err(err(
                TransportCode::PROTOCOL_VIOLATION,
                "second QX_TRANSPORT_PARAMETERS",
            ));
        }
        let in_band = !self.config.application_protocols.is_empty();
        params
            .validate(self.config.version.uses_records(), in_band)
            .map_err(|e| err(TransportCode::TRANSPORT_PARAMETER_ERROR, e.to_string()))?;
        if in_band {
            let ours = &self.config.application_protocols;
            self.protocol = match self.config.side {
                Side::Server => negotiate_protocol(ours, &params.application_protocols),
                Side::Client => negotiate_protocol(&params.application_protocols, ours),
            };
        }
        self.conn_send_max = self.conn_send_max.max(params.initial_max_data);
        self.local_limit[0] = self.local_limit[0].max(params.initial_max_streams_bidi);
        self.local_limit[1] = self.local_limit[1].max(params.initial_max_streams_uni);
        // Peer bidi streams opened before its parameters (00/01 allow that) get their credit now.
        let side = self.config.side;
        for (id, stream) in self.streams.iter_mut() {
            if let Some(send) = stream.send.as_mut() {
                let initial = Self::peer_stream_window(&params, side, *id);
                send.max = send.max.max(initial);
            }
        }
        self.peer_params = Some(params);
        self.events.push_back(Event::Connected);
        self.events.push_back(Event::StreamsAvailable(Dir::Bi));
        self.events.push_back(Event::StreamsAvailable(Dir::Uni));
        Ok(())
    }

    /// What the peer lets us send on `id` before any MAX_STREAM_DATA.
    pub(crate) fn peer_stream_window(params: &TransportParams, side: Side, id: StreamId) -> u64 {
        match (id.dir(), id.initiator() == side) {
            (Dir::Uni, _) => params.initial_max_stream_data_uni,
            (Dir::Bi, true) => params.initial_max_stream_data_bidi_remote,
            (Dir::Bi, false) => params.initial_max_stream_data_bidi_local,
        }
    }

    /// Find the stream a frame names, opening peer streams implicitly up to it (RFC 9000 §3.2).
    /// `recv`: the frame concerns the receive half (STREAM, RESET_STREAM); otherwise the send
    /// half (STOP_SENDING, MAX_STREAM_DATA). `None`: a retired stream; ignore the frame.
    pub(crate) fn locate(
        &mut self,
        id: StreamId,
        recv: bool,
    ) -> Result<Option<StreamId>, PeerError> {
        let side = self.config.side;
        let local = id.initiator() == side;
        let dir = id.dir();
        if dir == Dir::Uni && local == recv {
            return Err(err(
                TransportCode::STREAM_STATE_ERROR,
                format!("frame for the wrong direction of uni stream {id}"),
            ));
        }
        let d = dir.index();
        if local {
            if id.index() >= self.next_local[d] {
                return Err(err(
                    TransportCode::STREAM_STATE_ERROR,
                    format!("stream {id} was never opened"),
                ));
            }
            return Ok(self.streams.contains_key(&id).then_some(id));
        }
        if id.index() >= self.remote_limit[d] {
            return Err(err(
                TransportCode::STREAM_LIMIT_ERROR,
                format!("stream {id} beyond MAX_STREAMS {}", self.remote_limit[d]),
            ));
        }
        while self.next_remote[d] <= id.index() {
            let new = StreamId::new(self.next_remote[d], dir, side.peer());
            self.next_remote[d] += 1;
            let window = match dir {
                Dir::Bi => self.config.max_stream_data_bidi_remote,
                Dir::Uni => self.config.max_stream_data_uni,
            };
            let send = (dir == Dir::Bi).then(|| {
                let max = self
                    .peer_params
                    .as_ref()
                    .map_or(0, |p| Self::peer_stream_window(p, side, new));
                SendHalf::new(max)
            });
            self.streams.insert(
                new,
                Stream {
                    send,
                    recv: Some(RecvHalf::new(window)),
                },
            );
            self.incoming[d].push_back(new);
            self.events.push_back(Event::StreamOpened(dir));
        }
        Ok(self.streams.contains_key(&id).then_some(id))
    }

    /// Count `n` bytes the peer sent against MAX_DATA.
    fn receive_conn(&mut self, n: u64) -> Result<(), PeerError> {
        if self.conn_received + n > self.conn_credit.max {
            return Err(err(
                TransportCode::FLOW_CONTROL_ERROR,
                format!("data beyond MAX_DATA {}", self.conn_credit.max),
            ));
        }
        self.conn_received += n;
        Ok(())
    }

    /// Bytes that will never reach the application release their connection credit.
    pub(crate) fn consume_conn(&mut self, n: u64) {
        if self.conn_credit.consume(n) {
            self.pending_max_data = true;
        }
    }

    /// Data for a stream whose receive half is gone: count it, release it, and remember how
    /// far a lingering stream got.
    fn discard_for(
        &mut self,
        id: StreamId,
        offset: Option<u64>,
        len: u64,
        fin: bool,
    ) -> Result<(), PeerError> {
        let counted = match self.lingering.get_mut(&id) {
            Some(received) => {
                let end = offset.unwrap_or(*received) + len;
                let new = end.saturating_sub(*received);
                *received = (*received).max(end);
                if fin {
                    self.lingering.remove(&id);
                }
                new
            }
            None => len,
        };
        self.receive_conn(counted)?;
        self.consume_conn(counted);
        Ok(())
    }

    fn on_stream(&mut self, f: StreamFrame) -> Result<(), PeerError> {
        let len = f.data.len() as u64;
        let Some(id) = self.locate(f.id, true)? else {
            return self.discard_for(f.id, f.offset, len, f.fin);
        };
        let stream = self.streams.get_mut(&id).and_then(|s| s.recv.as_mut());
        let Some(recv) = stream else {
            return self.discard_for(f.id, f.offset, len, f.fin);
        };
        let offset = f.offset.unwrap_or(recv.received);
        let end = offset + len;
        if let Some(final_size) = recv.final_size {
            if end > final_size || (f.fin && end != final_size) {
                return Err(err(
                    TransportCode::FINAL_SIZE_ERROR,
                    format!("stream {id} final size changed"),
                ));
            }
        }
        if f.fin && end < recv.received {
            return Err(err(
                TransportCode::FINAL_SIZE_ERROR,
                format!("stream {id} FIN below data received"),
            ));
        }
        if end > recv.credit.max {
            return Err(err(
                TransportCode::FLOW_CONTROL_ERROR,
                format!(
                    "stream {id} data beyond MAX_STREAM_DATA {}",
                    recv.credit.max
                ),
            ));
        }
        if offset > recv.received {
            return Err(err(
                TransportCode::PROTOCOL_VIOLATION,
                format!("stream {id} skipped from {} to {offset}", recv.received),
            ));
        }
        let new = end.saturating_sub(recv.received);
        let skip = (recv.received - offset) as usize;
        let mut data = f.data;
        let data = if new > 0 {
            data.split_off(skip.min(data.len()))
        } else {
            Bytes::new()
        };
        recv.received = recv.received.max(end);
        if f.fin {
            recv.final_size = Some(end);
        }
        let deliver = recv.state == RecvState::Open;
        if deliver && new > 0 {
            recv.buffered += new;
            recv.chunks.push_back(data);
        }
        // Connection credit last, so a violation leaves nothing half-applied that matters.
        self.receive_conn(new)?;
        if !deliver {
            self.consume_conn(new);
        } else if new > 0 || f.fin {
            self.events.push_back(Event::Readable(id));
        }
        Ok(())
    }

    fn on_reset(&mut self, id: StreamId, code: u64, final_size: u64) -> Result<(), PeerError> {
        let Some(id) = self.locate(id, true)? else {
            if let Some(received) = self.lingering.remove(&id) {
                let gap = final_size.saturating_sub(received);
                self.receive_conn(gap)?;
                self.consume_conn(gap);
            }
            return Ok(());
        };
        let Some(recv) = self.streams.get_mut(&id).and_then(|s| s.recv.as_mut()) else {
            return Ok(());
        };
        // Drafts up to 02 let senders put 0 here; never let it undercut what arrived.
        let final_size = final_size.max(recv.received);
        if recv.final_size.is_some_and(|known| final_size != known) {
            return Err(err(
                TransportCode::FINAL_SIZE_ERROR,
                format!("stream {id} reset beyond its FIN"),
            ));
        }
        if final_size > recv.credit.max {
            return Err(err(
                TransportCode::FLOW_CONTROL_ERROR,
                format!("stream {id} reset beyond MAX_STREAM_DATA"),
            ));
        }
        let gap = final_size - recv.received;
        recv.received = final_size;
        recv.final_size = Some(final_size);
        let discarded = recv.discard();
        let notify = recv.state == RecvState::Open;
        if notify {
            recv.state = RecvState::ResetReceived(code);
        }
        self.receive_conn(gap)?;
        self.consume_conn(gap + discarded);
        if notify {
            self.events.push_back(Event::Readable(id));
        }
        Ok(())
    }

    fn on_stop(&mut self, id: StreamId, code: u64) -> Result<(), PeerError> {
        let Some(id) = self.locate(id, false)? else {
            return Ok(());
        };
        let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) else {
            return Ok(());
        };
        if !matches!(send.state, SendState::Ready | SendState::Finishing) {
            return Ok(());
        }
        let discarded = send.discard();
        let final_size = send.sent;
        send.state = SendState::Stopped {
            code,
            observed: false,
        };
        self.unsent_total -= discarded;
        // The discarded bytes free send-buffer room: a writer refused for it may go on
        // (nothing else may ever be sent to wake it).
        self.wake_buffer_waiters();
        // Answer with RESET_STREAM (RFC 9000 §3.5), carrying the peer's code.
        self.control.push_back(Frame::ResetStream {
            id,
            code,
            final_size,
        });
        self.events.push_back(Event::Writable(id));
        Ok(())
    }

    fn on_datagram(&mut self, data: Bytes, explicit_len: bool) -> Result<(), PeerError> {
        let max = self.local_params.max_datagram_frame_size;
        let len = data.len() as u64;
        let size =
            1 + if explicit_len {
                crate::varint::size(len) as u64
            } else {
                0
            } + len;
        if max == 0 || size > max {
            return Err(err(
                TransportCode::PROTOCOL_VIOLATION,
                "DATAGRAM not allowed or too large",
            ));
        }
        if self.datagrams_in.len() >= self.config.datagram_queue.max(1) {
            self.datagrams_in.pop_front();
        }
        self.datagrams_in.push_back(data);
        self.events.push_back(Event::DatagramReceived);
        Ok(())
    }

    /// Drop a stream whose halves are both done; a peer stream returns its MAX_STREAMS slot
    /// and, when its final size is still unknown, lingers so late bytes settle MAX_DATA.
    pub(crate) fn maybe_retire(&mut self, id: StreamId) {
        let Some(stream) = self.streams.get(&id) else {
            return;
        };
        if !stream.is_terminal() {
            return;
        }
        let unknown_final = stream
            .recv
            .as_ref()
            .filter(|r| r.final_size.is_none())
            .map(|r| r.received);
        if let Some(send) = &stream.send {
            debug_assert!(!send.scheduled || send.unsent == 0);
        }
        self.streams.remove(&id);
        self.blocked_on_buffer.remove(&id);
        self.pending_max_stream_data.remove(&id);
        if let Some(received) = unknown_final {
            if self.lingering_order.len() >= MAX_LINGERING {
                if let Some(old) = self.lingering_order.pop_front() {
                    self.lingering.remove(&old);
                }
            }
            self.lingering.insert(id, received);
            self.lingering_order.push_back(id);
        }
        if id.initiator() != self.config.side {
            let d = id.dir().index();
            self.remote_retired[d] += 1;
            let window = match id.dir() {
                Dir::Bi => self.config.max_streams_bidi,
                Dir::Uni => self.config.max_streams_uni,
            };
            let target = self.remote_retired[d] + window;
            if target - self.remote_limit[d] >= (window / 4).max(1) {
                self.remote_limit[d] = target;
                self.pending_max_streams[d] = true;
            }
        }
    }

    /// Whether the connection still accepts application operations.
    pub(crate) fn check_open(&self) -> Result<(), crate::error::StreamError> {
        match &self.state {
            State::Open => Ok(()),
            State::Closing(reason, _) | State::Closed(reason) => Err(reason.clone().into()),
        }
    }
}
