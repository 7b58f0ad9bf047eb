//! Per-stream state: the send half's queue and flow credit, the receive half's buffer and window.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::flow::RecvCredit;

/// Where the send half stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendState {
    /// Accepting writes (until `finish`).
    Ready,
    /// `finish` called; the FIN goes out after the queued data.
    Finishing,
    /// Every byte and the FIN were transmitted.
    Finished,
    /// We reset it (RESET_STREAM queued or sent).
    Reset,
    /// The peer sent STOP_SENDING; we answered with RESET_STREAM. `observed` once the
    /// application was told.
    Stopped { code: u64, observed: bool },
}

#[derive(Debug)]
pub(crate) struct SendHalf {
    pub(crate) state: SendState,
    pub(crate) queue: VecDeque<Bytes>,
    /// Bytes queued and not yet transmitted.
    pub(crate) unsent: u64,
    /// Bytes accepted from the application (the next write's offset).
    pub(crate) written: u64,
    /// Bytes transmitted (the next frame's offset).
    pub(crate) sent: u64,
    /// The peer's MAX_STREAM_DATA.
    pub(crate) max: u64,
    pub(crate) priority: i32,
    pub(crate) scheduled: bool,
    /// A STREAM_DATA_BLOCKED for this limit was queued already.
    pub(crate) blocked_at: Option<u64>,
}

impl SendHalf {
    pub(crate) fn new(max: u64) -> Self {
        Self {
            state: SendState::Ready,
            queue: VecDeque::new(),
            unsent: 0,
            written: 0,
            sent: 0,
            max,
            priority: 0,
            scheduled: false,
            blocked_at: None,
        }
    }

    /// Nothing more will happen on this half that the application has not seen.
    pub(crate) fn is_terminal(&self) -> bool {
        matches!(
            self.state,
            SendState::Finished | SendState::Reset | SendState::Stopped { observed: true, .. }
        )
    }

    /// Take up to `n` queued bytes from the front.
    pub(crate) fn take(&mut self, n: u64) -> Bytes {
        let Some(front) = self.queue.front_mut() else {
            return Bytes::new();
        };
        let out = if (front.len() as u64) <= n {
            self.queue.pop_front().unwrap_or_default()
        } else {
            front.split_to(n as usize)
        };
        self.unsent -= out.len() as u64;
        out
    }

    /// Drop everything queued; returns how many bytes that was.
    pub(crate) fn discard(&mut self) -> u64 {
        self.queue.clear();
        std::mem::take(&mut self.unsent)
    }
}

/// Where the receive half stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvState {
    Open,
    /// The peer reset it; the application has not been told yet.
    ResetReceived(u64),
    /// The application read the FIN, read the reset, or stopped the stream.
    Done,
}

#[derive(Debug)]
pub(crate) struct RecvHalf {
    pub(crate) state: RecvState,
    pub(crate) chunks: VecDeque<Bytes>,
    /// Bytes held unread.
    pub(crate) buffered: u64,
    /// Highest offset received.
    pub(crate) received: u64,
    pub(crate) final_size: Option<u64>,
    pub(crate) credit: RecvCredit,
}

impl RecvHalf {
    pub(crate) fn new(window: u64) -> Self {
        Self {
            state: RecvState::Open,
            chunks: VecDeque::new(),
            buffered: 0,
            received: 0,
            final_size: None,
            credit: RecvCredit::new(window),
        }
    }

    /// Take up to `max` bytes from the front.
    pub(crate) fn take(&mut self, max: usize) -> Option<Bytes> {
        let front = self.chunks.front_mut()?;
        let out = if front.len() <= max {
            self.chunks.pop_front().unwrap_or_default()
        } else {
            front.split_to(max)
        };
        self.buffered -= out.len() as u64;
        Some(out)
    }

    /// Drop everything buffered; returns how many bytes that was.
    pub(crate) fn discard(&mut self) -> u64 {
        self.chunks.clear();
        std::mem::take(&mut self.buffered)
    }
}

/// One stream: a send half unless it is the peer's uni stream, a receive half unless it is ours.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    pub(crate) send: Option<SendHalf>,
    pub(crate) recv: Option<RecvHalf>,
}

impl Stream {
    pub(crate) fn is_terminal(&self) -> bool {
        self.send.as_ref().is_none_or(SendHalf::is_terminal)
            && self
                .recv
                .as_ref()
                .is_none_or(|r| r.state == RecvState::Done)
    }
}
