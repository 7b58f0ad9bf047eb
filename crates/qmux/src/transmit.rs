//! Building outgoing records: transport parameters first, then control frames, credit
//! updates, pings, datagrams, and stream data in priority order.

use std::time::Instant;

use bytes::{Bytes, BytesMut};

use crate::connection::{Connection, Event, State};
use crate::frame::{max_stream_payload, Frame, StreamFrame};
use crate::params::DEFAULT_MAX_RECORD_SIZE;
use crate::record::{frame_record, MAX_FRAME_SIZE_00};
use crate::streams::SendState;
use crate::version::Dir;

/// Largest STREAM payload we send, whatever the peer accepts: released peers enforce it on
/// receive (qmux 0.5.3's `MAX_FRAME_PAYLOAD`).
pub const MAX_STREAM_PAYLOAD: u64 = 16384 - 32;

impl Connection {
    /// The largest record (frames only) the peer accepts from us.
    pub fn record_budget(&self) -> u64 {
        if !self.config.version.uses_records() {
            return MAX_FRAME_SIZE_00 as u64;
        }
        self.peer_params
            .as_ref()
            .map_or(DEFAULT_MAX_RECORD_SIZE, |p| p.max_record_size)
            .min(DEFAULT_MAX_RECORD_SIZE)
    }

    /// The next record to put on the carrier, already framed for it (a WebSocket message's
    /// payload, or bytes for the byte stream); `None` when there is nothing to send.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Bytes> {
        let mut buf = BytesMut::new();
        if !self.tp_sent && !matches!(self.state, State::Closed(_)) {
            self.tp_sent = true;
            Frame::TransportParameters(self.local_params.clone()).encode(&mut buf);
            return Some(self.finish_record(buf, now));
        }
        match std::mem::replace(&mut self.state, State::Open) {
            State::Open => {}
            State::Closing(reason, frame) => {
                frame.encode(&mut buf);
                self.state = State::Closed(reason);
                return Some(self.finish_record(buf, now));
            }
            closed @ State::Closed(_) => {
                self.state = closed;
                return None;
            }
        }
        let budget = self.record_budget() as usize;
        let coalesce = self.config.coalesce && self.config.version.uses_records();
        loop {
            let room = budget - buf.len();
            let Some(frame) = self.next_frame(room, now) else {
                break;
            };
            frame.encode(&mut buf);
            if !coalesce || !frame.is_self_delimiting() {
                break;
            }
        }
        if buf.is_empty() {
            return None;
        }
        Some(self.finish_record(buf, now))
    }

    fn finish_record(&mut self, buf: BytesMut, now: Instant) -> Bytes {
        self.last_send = now;
        frame_record(self.config.framing, self.config.version, &buf)
    }

    /// The next frame that fits in `room` bytes, most urgent first.
    fn next_frame(&mut self, room: usize, now: Instant) -> Option<Frame> {
        // Control frames are at most a few dozen bytes; a record always has room for one.
        const SMALL: usize = 64;
        if room >= SMALL {
            if let Some(frame) = self.control.pop_front() {
                return Some(frame);
            }
            if let Some(seq) = self.ping_responses.pop_front() {
                return Some(Frame::PingResponse(seq));
            }
            if self.pending_ping && self.config.version.uses_records() {
                self.pending_ping = false;
                let seq = self.ping_seq;
                self.ping_seq += 1;
                if self.pings_out.len() >= 16 {
                    self.pings_out.pop_front();
                }
                self.pings_out.push_back((seq, now));
                return Some(Frame::PingRequest(seq));
            }
            if self.pending_max_data {
                self.pending_max_data = false;
                return Some(Frame::MaxData(self.conn_credit.max));
            }
            for dir in [Dir::Bi, Dir::Uni] {
                let d = dir.index();
                if self.pending_max_streams[d] {
                    self.pending_max_streams[d] = false;
                    return Some(Frame::MaxStreams {
                        dir,
                        max: self.remote_limit[d],
                    });
                }
            }
            while let Some(id) = self.pending_max_stream_data.pop_first() {
                if let Some(recv) = self.streams.get(&id).and_then(|s| s.recv.as_ref()) {
                    return Some(Frame::MaxStreamData {
                        id,
                        max: recv.credit.max,
                    });
                }
            }
        }
        if let Some(data) = self.datagrams_out.front() {
            let size = 1 + crate::varint::size(data.len() as u64) + data.len();
            if size <= room {
                let data = self.datagrams_out.pop_front().unwrap_or_default();
                return Some(Frame::Datagram {
                    data,
                    explicit_len: true,
                });
            }
            return None;
        }
        self.next_stream_frame(room)
    }

    /// One STREAM frame from the highest-priority stream with something to send.
    fn next_stream_frame(&mut self, room: usize) -> Option<Frame> {
        let credit = self.conn_send_max - self.conn_sent;
        while let Some((id, level)) = self.sched.pop() {
            let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) else {
                continue;
            };
            send.scheduled = false;
            if send.priority != level {
                send.scheduled = true;
                self.sched.push_back(id, send.priority);
                continue;
            }
            if !matches!(send.state, SendState::Ready | SendState::Finishing) {
                continue;
            }
            let offset = send.sent;
            let payload = max_stream_payload(room as u64, id, offset).min(MAX_STREAM_PAYLOAD);
            let fin_only = send.unsent == 0;
            if fin_only && send.state != SendState::Finishing {
                continue;
            }
            if !fin_only && credit == 0 {
                // Blocked on MAX_DATA: keep the turn and send nothing more for now.
                send.scheduled = true;
                self.sched.push_front(id, level);
                let limit = self.conn_send_max;
                if self.data_blocked_sent != Some(limit) {
                    self.data_blocked_sent = Some(limit);
                    self.control.push_back(Frame::DataBlocked(limit));
                }
                return None;
            }
            let n = send.unsent.min(credit).min(payload);
            if n == 0
                && (!fin_only || room < 4 + crate::varint::size(id.0) + crate::varint::size(offset))
            {
                send.scheduled = true;
                self.sched.push_front(id, level);
                return None;
            }
            // One queued chunk at most: `n` shrinks to what the front chunk holds.
            let data = send.take(n);
            let n = data.len() as u64;
            send.sent += n;
            let fin = send.unsent == 0 && send.state == SendState::Finishing;
            if fin {
                send.state = SendState::Finished;
            }
            let more = send.unsent > 0;
            if more {
                send.scheduled = true;
                self.sched.push_back(id, level);
            }
            self.conn_sent += n;
            self.unsent_total = self.unsent_total.saturating_sub(n);
            self.wake_buffer_waiters();
            if fin {
                self.events.push_back(Event::Writable(id));
                self.maybe_retire(id);
            }
            return Some(Frame::Stream(StreamFrame {
                id,
                offset: Some(offset),
                data,
                fin,
                explicit_len: true,
            }));
        }
        None
    }
}
