//! The application's side: open and accept streams, write, finish, reset, read, stop,
//! priorities, datagrams. Operations never block; `StreamError::Blocked` means "retry after
//! the matching event".

use bytes::Bytes;

use crate::connection::{Connection, Event, State};
use crate::error::StreamError;
use crate::frame::Frame;
use crate::streams::{RecvHalf, RecvState, SendHalf, SendState, Stream};
use crate::version::{Dir, StreamId};

impl Connection {
    /// Change the connection's receive window (MAX_DATA kept this far ahead of what the
    /// application read). Growing it queues a MAX_DATA now; shrinking it withholds credit
    /// until reading catches up, as credit already advertised cannot be taken back.
    pub fn set_receive_window(&mut self, window: u64) {
        if self.conn_credit.set_window(window) {
            self.pending_max_data = true;
        }
    }

    /// Open a stream, if the peer's MAX_STREAMS allows one more.
    pub fn open(&mut self, dir: Dir) -> Result<StreamId, StreamError> {
        self.check_open()?;
        let d = dir.index();
        if self.next_local[d] >= self.local_limit[d] {
            let limit = self.local_limit[d];
            if self.peer_params.is_some() && self.streams_blocked_sent[d] != Some(limit) {
                self.streams_blocked_sent[d] = Some(limit);
                self.control.push_back(Frame::StreamsBlocked { dir, limit });
            }
            return Err(StreamError::Blocked);
        }
        let side = self.config.side;
        let id = StreamId::new(self.next_local[d], dir, side);
        self.next_local[d] += 1;
        let max = self
            .peer_params
            .as_ref()
            .map_or(0, |p| Self::peer_stream_window(p, side, id));
        let recv = (dir == Dir::Bi).then(|| RecvHalf::new(self.config.max_stream_data_bidi_local));
        self.streams.insert(
            id,
            Stream {
                send: Some(SendHalf::new(max)),
                recv,
            },
        );
        Ok(id)
    }

    /// The next stream the peer opened, oldest first.
    pub fn accept(&mut self, dir: Dir) -> Option<StreamId> {
        self.incoming[dir.index()].pop_front()
    }

    fn send_half(&mut self, id: StreamId) -> Result<&mut SendHalf, StreamError> {
        self.check_open()?;
        self.streams
            .get_mut(&id)
            .and_then(|s| s.send.as_mut())
            .ok_or(StreamError::Closed(id))
    }

    /// Queue as much of `data` as flow control and the send buffer allow; returns how many
    /// bytes were taken (`Blocked` when none could be).
    pub fn write(&mut self, id: StreamId, mut data: Bytes) -> Result<usize, StreamError> {
        let buffer_room = self.config.send_buffer.saturating_sub(self.unsent_total);
        let send = self.send_half(id)?;
        match send.state {
            SendState::Ready => {}
            SendState::Stopped { code, .. } => {
                send.state = SendState::Stopped {
                    code,
                    observed: true,
                };
                self.maybe_retire(id);
                return Err(StreamError::Stopped(code));
            }
            _ => return Err(StreamError::Closed(id)),
        }
        if data.is_empty() {
            return Ok(0);
        }
        let stream_room = send.max - send.written;
        let n = (data.len() as u64).min(stream_room).min(buffer_room);
        if n == 0 {
            if stream_room == 0 {
                let limit = send.max;
                if send.blocked_at != Some(limit) {
                    send.blocked_at = Some(limit);
                    self.control
                        .push_back(Frame::StreamDataBlocked { id, limit });
                }
            } else {
                self.blocked_on_buffer.insert(id);
            }
            return Err(StreamError::Blocked);
        }
        let chunk = data.split_to(n as usize);
        send.queue.push_back(chunk);
        send.written += n;
        send.unsent += n;
        self.unsent_total += n;
        self.schedule(id);
        Ok(n as usize)
    }

    /// Finish the stream: the FIN follows the queued data.
    pub fn finish(&mut self, id: StreamId) -> Result<(), StreamError> {
        let send = self.send_half(id)?;
        match send.state {
            SendState::Ready => {
                send.state = SendState::Finishing;
                self.schedule(id);
                Ok(())
            }
            SendState::Stopped { code, .. } => {
                send.state = SendState::Stopped {
                    code,
                    observed: true,
                };
                self.maybe_retire(id);
                Err(StreamError::Stopped(code))
            }
            _ => Err(StreamError::Closed(id)),
        }
    }

    /// Abandon the send half with `code`; a no-op once finished, reset or stopped.
    pub fn reset(&mut self, id: StreamId, code: u64) {
        let Ok(send) = self.send_half(id) else {
            return;
        };
        match send.state {
            SendState::Ready | SendState::Finishing => {
                let discarded = send.discard();
                let final_size = send.sent;
                send.state = SendState::Reset;
                self.unsent_total -= discarded;
                self.wake_buffer_waiters();
                self.control.push_back(Frame::ResetStream {
                    id,
                    code,
                    final_size,
                });
            }
            SendState::Stopped { code, .. } => {
                send.state = SendState::Stopped {
                    code,
                    observed: true,
                };
            }
            SendState::Finished | SendState::Reset => {}
        }
        self.maybe_retire(id);
    }

    /// `Ok(Some(code))` once the peer sent STOP_SENDING, `Ok(None)` once the half is done
    /// otherwise (every byte and the FIN sent, reset by us, or gone), `Blocked` before.
    pub fn poll_stopped(&mut self, id: StreamId) -> Result<Option<u64>, StreamError> {
        self.check_open()?;
        let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) else {
            return Ok(None);
        };
        match send.state {
            SendState::Stopped { code, .. } => {
                send.state = SendState::Stopped {
                    code,
                    observed: true,
                };
                self.maybe_retire(id);
                Ok(Some(code))
            }
            SendState::Finished | SendState::Reset => Ok(None),
            SendState::Ready | SendState::Finishing => Err(StreamError::Blocked),
        }
    }

    /// Higher sends first; equal priorities share round-robin.
    pub fn set_priority(&mut self, id: StreamId, priority: i32) {
        if let Ok(send) = self.send_half(id) {
            send.priority = priority;
        }
    }

    /// Put the stream in the scheduler if it has something to send and is not queued yet.
    pub(crate) fn schedule(&mut self, id: StreamId) {
        let Some(send) = self.streams.get_mut(&id).and_then(|s| s.send.as_mut()) else {
            return;
        };
        let wants = send.unsent > 0 || send.state == SendState::Finishing;
        if wants && !send.scheduled {
            send.scheduled = true;
            self.sched.push_back(id, send.priority);
        }
    }

    /// Up to `max` bytes; `Ok(None)` at the FIN, `Reset(code)` once after the peer's reset.
    /// Once the peer closed (or the carrier went), what arrived before stays readable; past
    /// it, the close is the error.
    pub fn read(&mut self, id: StreamId, max: usize) -> Result<Option<Bytes>, StreamError> {
        let closed = match &self.state {
            State::Open => None,
            State::Closed(reason) => Some(reason.clone()),
            State::Closing(reason, _) => return Err(reason.clone().into()),
        };
        let Some(recv) = self.streams.get_mut(&id).and_then(|s| s.recv.as_mut()) else {
            return Err(StreamError::Closed(id));
        };
        match recv.state {
            RecvState::ResetReceived(code) => {
                recv.state = RecvState::Done;
                self.maybe_retire(id);
                return Err(StreamError::Reset(code));
            }
            RecvState::Done => return Err(StreamError::Closed(id)),
            RecvState::Open => {}
        }
        if max == 0 {
            return Ok(Some(Bytes::new()));
        }
        if let Some(chunk) = recv.take(max) {
            let n = chunk.len() as u64;
            if closed.is_none() {
                if recv.credit.consume(n) && recv.final_size.is_none() {
                    self.pending_max_stream_data.insert(id);
                }
                self.consume_conn(n);
            }
            return Ok(Some(chunk));
        }
        if recv.final_size == Some(recv.received) {
            recv.state = RecvState::Done;
            self.maybe_retire(id);
            return Ok(None);
        }
        match closed {
            Some(reason) => Err(reason.into()),
            None => Err(StreamError::Blocked),
        }
    }

    /// Stop reading: discard what is buffered and, unless the peer already ended its side,
    /// send STOP_SENDING with `code`.
    pub fn stop(&mut self, id: StreamId, code: u64) {
        if self.check_open().is_err() {
            return;
        }
        let Some(recv) = self.streams.get_mut(&id).and_then(|s| s.recv.as_mut()) else {
            return;
        };
        if recv.state == RecvState::Done {
            return;
        }
        let ended = recv.final_size.is_some();
        recv.state = RecvState::Done;
        let discarded = recv.discard();
        if !ended {
            self.control.push_back(Frame::StopSending { id, code });
        }
        self.pending_max_stream_data.remove(&id);
        self.consume_conn(discarded);
        self.maybe_retire(id);
    }

    /// Largest datagram payload the peer accepts now; 0 when datagrams are unavailable.
    pub fn max_datagram_size(&self) -> usize {
        let Some(peer) = &self.peer_params else {
            return 0;
        };
        if !self.config.version.uses_records() || peer.max_datagram_frame_size == 0 {
            return 0;
        }
        let cap = peer
            .max_datagram_frame_size
            .min(peer.max_record_size)
            .min(crate::params::DEFAULT_MAX_RECORD_SIZE);
        let overhead = 1 + crate::varint::size(cap) as u64;
        usize::try_from(cap.saturating_sub(overhead)).unwrap_or(usize::MAX)
    }

    /// Queue a datagram; when too many wait, the oldest is dropped.
    pub fn send_datagram(&mut self, data: Bytes) -> Result<(), StreamError> {
        self.check_open()?;
        if data.len() > self.max_datagram_size() {
            return Err(StreamError::DatagramUnsupported);
        }
        if self.datagrams_out.len() >= self.config.datagram_queue.max(1) {
            self.datagrams_out.pop_front();
        }
        self.datagrams_out.push_back(data);
        Ok(())
    }

    /// The oldest received datagram.
    pub fn recv_datagram(&mut self) -> Option<Bytes> {
        self.datagrams_in.pop_front()
    }

    /// Streams we may still open in `dir` before the peer raises MAX_STREAMS.
    pub fn streams_available(&self, dir: Dir) -> u64 {
        let d = dir.index();
        self.local_limit[d].saturating_sub(self.next_local[d])
    }

    /// Bytes received and not yet read, over all streams (bounded by our MAX_DATA window).
    pub fn recv_buffered(&self) -> u64 {
        self.streams
            .values()
            .filter_map(|s| s.recv.as_ref())
            .map(|r| r.buffered)
            .sum()
    }

    /// Bytes accepted from the application and not yet transmitted.
    pub fn send_buffered(&self) -> u64 {
        self.unsent_total
    }

    /// Writers refused for want of send-buffer room may go on once half of it is free again:
    /// called wherever queued bytes leave it (sent, or discarded by a reset or the peer's
    /// STOP_SENDING).
    pub(crate) fn wake_buffer_waiters(&mut self) {
        if self.unsent_total <= self.config.send_buffer / 2 {
            for id in std::mem::take(&mut self.blocked_on_buffer) {
                self.events.push_back(Event::Writable(id));
            }
        }
    }
}
