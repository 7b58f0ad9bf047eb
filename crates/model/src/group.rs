//! One group: an append-only run of frames shared by every reader, with its own end state.
//!
//! The producer appends `Frame`s (payloads are `Bytes`, shared, never copied per reader); each
//! consumer walks the same vector at its own index. A group ends finished or aborted with a
//! moq-lite stream code, which readers see once they have read every frame before it.
//!
//! A frame larger than one read may arrive in pieces: the producer starts it with its declared
//! size (`begin_frame`), which is checked against the group limits and charged to the track's
//! cache at once, then appends its payload (`write_chunk`). The relay hands every piece to the
//! group as it arrives, so a connection's receive budget never holds more than a small unit of
//! any stream (see the session's reader). Readers of whole frames (`poll_frame`) see it once
//! its last byte came; a forwarding reader (`poll_units`) takes its header and each piece as
//! it comes (cut-through), so a large frame crosses a relay without waiting for its end. The
//! pieces stay with the group until the frame is whole, so a reader arriving mid-frame still
//! starts at the frame's first byte; once whole, the frame is one payload like any other.
//!
//! A group of a *resumable* track (a relay's front, see `broadcast/request.rs`) outlives the
//! source that was writing it: when that source is lost mid-group, the group is orphaned
//! instead of aborted, readers wait inside it, and the next source continues it at the first
//! frame not yet written.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use starling_proto::StreamCode;

use crate::cache::FRAME_OVERHEAD;
use crate::error::ModelError;
use crate::waiters::Waiters;
use crate::Limits;

/// A sized payload with a presentation timestamp in the track's timescale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub timestamp: u64,
    pub payload: Bytes,
}

/// What a forwarding reader takes next (`GroupConsumer::poll_units`): a whole frame, or a
/// frame still arriving as its header and then its payload in pieces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A whole frame.
    Frame(Frame),
    /// A frame still arriving starts: its timestamp and payload size. `Bytes` units follow
    /// until `size` bytes have come (none for an empty frame).
    Head { timestamp: u64, size: usize },
    /// The next bytes of the frame the last `Head` started.
    Bytes(Bytes),
}

/// The frame after the group's last whole one, while its payload arrives: what has come so
/// far, in the pieces it came in.
#[derive(Debug)]
struct Partial {
    timestamp: u64,
    size: usize,
    pieces: Vec<Bytes>,
}

#[derive(Debug)]
struct GroupState {
    frames: Vec<Frame>,
    /// The frame arriving in pieces after `frames` (see [`Partial`]).
    partial: Option<Partial>,
    bytes: usize,
    /// What the group is charged in its track's cache: payload bytes (a frame arriving in
    /// pieces is charged when it begins) and cost (payload plus overheads). Kept under the
    /// group's lock, with the frames, so a frame takes one lock; given back when it expires.
    charged_bytes: usize,
    charged_cost: usize,
    /// Its first frame was charged (the track keeps that frame's timestamp, beside its key).
    started: bool,
    end: Option<Result<(), StreamCode>>,
    /// Its producer was dropped mid-group on a resumable track: the group waits open for the
    /// next source to continue it.
    orphaned: bool,
    waiters: Waiters,
}

impl GroupState {
    /// Refused with how the group ended, if it did.
    fn still_open(&self) -> Result<(), ModelError> {
        match self.end {
            None => Ok(()),
            Some(Ok(())) => Err(ModelError::Ended),
            Some(Err(code)) => Err(ModelError::Aborted(code)),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Group {
    sequence: u64,
    state: Mutex<GroupState>,
}

impl Group {
    pub(crate) fn new(sequence: u64) -> Arc<Self> {
        Group::charged(sequence, 0)
    }

    /// A group of a track's cache, charged `cost` (its overhead) before any frame.
    pub(crate) fn charged(sequence: u64, cost: usize) -> Arc<Self> {
        Arc::new(Group {
            sequence,
            state: Mutex::new(GroupState {
                frames: Vec::new(),
                partial: None,
                bytes: 0,
                charged_bytes: 0,
                charged_cost: cost,
                started: false,
                end: None,
                orphaned: false,
                waiters: Waiters::default(),
            }),
        })
    }

    /// Whether the group waits for a new source to continue it.
    pub(crate) fn is_orphaned(&self) -> bool {
        let state = self.state.lock();
        state.orphaned && state.end.is_none()
    }

    /// Leave the group open for another producer; false if it already ended.
    pub(crate) fn orphan(&self) -> bool {
        let mut state = self.state.lock();
        if state.end.is_some() {
            return false;
        }
        state.orphaned = true;
        true
    }

    /// Take over an orphaned group: what it already holds (the new source sends the same
    /// content from the group's start, and that much of it is skipped), or `None` when it is
    /// not orphaned.
    pub(crate) fn adopt(&self) -> Option<Held> {
        let mut state = self.state.lock();
        if !state.orphaned || state.end.is_some() {
            return None;
        }
        state.orphaned = false;
        Some(Held {
            frames: state.frames.len(),
            partial: state
                .partial
                .as_ref()
                .map(|p| (p.size, p.pieces.iter().map(Bytes::len).sum())),
        })
    }

    pub(crate) fn sequence(&self) -> u64 {
        self.sequence
    }

    /// Abort unless already ended; readers past the last frame see `code`.
    pub(crate) fn abort(&self, code: StreamCode) {
        let mut state = self.state.lock();
        if state.end.is_none() {
            state.end = Some(Err(code));
            state.waiters.wake_all();
        }
    }

    /// Expire the group: readers stop at once with `code` (even mid-group), memory goes with
    /// the last reader. What it was charged, payload bytes and cost, for the track to give
    /// back: nothing more is charged to it after this.
    pub(crate) fn expire(&self, code: StreamCode) -> (usize, usize) {
        let mut state = self.state.lock();
        // A finished group that expires still stops readers that lag inside it.
        state.frames.clear();
        state.frames.shrink_to_fit();
        state.partial = None;
        state.bytes = 0;
        state.end = Some(Err(code));
        state.waiters.wake_all();
        (
            std::mem::take(&mut state.charged_bytes),
            std::mem::take(&mut state.charged_cost),
        )
    }
}

/// What an orphaned group holds when a new source adopts it: its whole frames, and the
/// declared size and bytes received of the frame it was in the middle of.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Held {
    pub(crate) frames: usize,
    pub(crate) partial: Option<(usize, usize)>,
}

/// A frame begun with `begin_frame` whose payload is still arriving. Its pieces are the
/// group's ([`Partial`]); the producer keeps the count and the block they are cut from.
#[derive(Debug)]
struct PendingFrame {
    size: usize,
    /// Bytes of it written so far.
    received: usize,
    /// The group holds this frame whole already (a resumed group): all of it is dropped.
    skipped: bool,
    /// The first bytes to drop: what a lost source already gave of the frame it left
    /// unfinished (all of them for a skipped frame).
    skip_bytes: usize,
    /// The block pieces are copied into and cut from: one allocation serves many pieces.
    block: BytesMut,
    /// Bytes allocated for it so far.
    allocated: usize,
}

/// The first block a pending frame's pieces are cut from; each next one is as large as all
/// before it, never past the declared size, so a peer declaring a large frame and sending
/// little of it makes the relay allocate little.
const PENDING_START: usize = 64 * 1024;

/// What a group tells the track holding it (its home): each frame written, so the track's
/// cache can account it, and a lost source, so a resumable track can keep the group for the
/// next one. Named here, so a group knows nothing of tracks.
pub(crate) trait GroupHome: Send + Sync + std::fmt::Debug {
    /// Count a frame of `size` payload bytes stamped `timestamp` charged to one of the
    /// track's groups, `first` when it is that group's first. Called under the group's lock,
    /// so it only counts (atomics, never the track's lock); what it returns is done by
    /// [`GroupHome::settle`] once the group is unlocked.
    fn charge(&self, size: usize, timestamp: u64, first: bool) -> Settle;
    /// Apply the track's cache policy and the relay-wide budget, as a charge of the group at
    /// `arrival` (its key in the track) asked.
    fn settle(&self, arrival: u64, settle: Settle);
    /// The source writing `group` was lost: `true` when the track keeps it for the next.
    fn orphan(&self, group: &Group) -> bool;
}

/// What a frame's charge leaves for its track to do with no group locked.
#[derive(Clone, Copy, Debug, Default)]
#[must_use]
pub(crate) struct Settle {
    /// The track's own cache policy may drop a group (its bytes over, a group aged out, or a
    /// group's first frame that moves when one ages out).
    pub(crate) policy: bool,
    /// The relay-wide budget is over.
    pub(crate) budget: bool,
    /// The group's first frame was stamped so: the track keeps it beside the group, where its
    /// age policy reads it with no pointer to chase.
    pub(crate) started: Option<u64>,
}

/// The track a group belongs to, and the group's key there.
#[derive(Debug)]
pub(crate) struct Home {
    pub(crate) track: Arc<dyn GroupHome>,
    pub(crate) arrival: u64,
}

/// Writes frames into a group. Dropping it without `finish` aborts the group as cancelled.
#[derive(Debug)]
pub struct GroupProducer {
    group: Arc<Group>,
    limits: Limits,
    /// The track whose cache accounts this group's bytes and timestamps, if any.
    home: Option<Home>,
    /// Frames still to skip: a group continued from a new source starts again at its first
    /// frame, and what the group already holds is not written twice.
    skip: usize,
    /// The group holds part of the frame after those (a lost source's unfinished one): its
    /// declared size and the bytes it holds, continued by this producer's next frame.
    continues: Option<(usize, usize)>,
    /// Ending the group is up to the next source (it belongs to a resumable track).
    resumable: bool,
    /// A frame arriving in pieces.
    pending: Option<PendingFrame>,
}

impl GroupProducer {
    pub(crate) fn new(group: Arc<Group>, limits: Limits, home: Option<Home>) -> Self {
        GroupProducer {
            group,
            limits,
            home,
            skip: 0,
            continues: None,
            resumable: false,
            pending: None,
        }
    }

    /// A producer of a resumable track's group that skips what the group already `held`.
    pub(crate) fn resuming(mut self, held: Held) -> Self {
        self.skip = held.frames;
        self.continues = held.partial;
        self.resumable = true;
        self
    }

    /// A group outside any track (a fetched group), bounded by `limits`.
    pub fn standalone(sequence: u64, limits: Limits) -> Self {
        GroupProducer::new(Group::new(sequence), limits, None)
    }

    pub fn sequence(&self) -> u64 {
        self.group.sequence
    }

    /// Append one frame. Refused past the group limits (frame size, frame count, group bytes)
    /// or after the group ended.
    pub fn write_frame(&mut self, frame: Frame) -> Result<(), ModelError> {
        if self.pending.is_some() {
            return Err(ModelError::FrameIncomplete);
        }
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(());
        }
        if self.continues.is_some() {
            // The frame a lost source left unfinished: continued past what the group holds.
            self.begin_frame(frame.timestamp, frame.payload.len())?;
            return self.write_chunk(&frame.payload);
        }
        // One lock a frame: admitted, charged and published under the group's alone.
        let settle = {
            let mut state = self.group.state.lock();
            let size = frame.payload.len();
            self.admit(&state, size)?;
            let settle = self.charge(&mut state, size, frame.timestamp);
            publish(&mut state, frame);
            settle
        };
        self.settle(settle);
        Ok(())
    }

    /// Start a frame of `size` bytes whose payload follows in pieces (`write_chunk`). The
    /// size is checked against the group limits and charged to the cache now; forwarding
    /// readers see the frame begin at once and each piece as it is written, readers of whole
    /// frames see it once its last byte is written.
    pub fn begin_frame(&mut self, timestamp: u64, size: usize) -> Result<(), ModelError> {
        if self.pending.is_some() {
            return Err(ModelError::FrameIncomplete);
        }
        let skipped = self.skip > 0;
        let skip_bytes = if skipped {
            self.skip -= 1;
            size
        } else if let Some((held_size, held)) = self.continues.take() {
            // The frame a lost source left unfinished, already begun and charged: a new
            // source sending another size sends other content, which readers that took the
            // first part cannot be given.
            if size != held_size {
                self.group.abort(StreamCode::WrongSize);
                return Err(ModelError::Aborted(StreamCode::WrongSize));
            }
            held
        } else {
            let settle = {
                let mut state = self.group.state.lock();
                self.admit(&state, size)?;
                let settle = self.charge(&mut state, size, timestamp);
                state.partial = Some(Partial {
                    timestamp,
                    size,
                    pieces: Vec::new(),
                });
                state.waiters.wake_all();
                settle
            };
            self.settle(settle);
            0
        };
        self.pending = Some(PendingFrame {
            size,
            received: 0,
            skipped,
            skip_bytes,
            block: BytesMut::new(),
            allocated: 0,
        });
        if size == 0 {
            self.complete()?;
        }
        Ok(())
    }

    /// Append the next piece of the frame begun with `begin_frame`, for forwarding readers
    /// at once; the frame is whole once `size` bytes have come. More than the declared size
    /// is `WrongSize`; a piece for a group that ended (expired from the cache, aborted) is
    /// refused with its end.
    pub fn write_chunk(&mut self, chunk: &[u8]) -> Result<(), ModelError> {
        let pending = self.pending.as_mut().ok_or(ModelError::WrongSize)?;
        let before = pending.received;
        let received = before + chunk.len();
        if received > pending.size {
            return Err(ModelError::WrongSize);
        }
        pending.received = received;
        // What the group already holds of this frame is dropped.
        let kept = &chunk[pending.skip_bytes.saturating_sub(before).min(chunk.len())..];
        let piece = (!kept.is_empty()).then(|| pending.cut(kept));
        {
            let mut state = self.group.state.lock();
            // A group that left the cache (or was aborted) no longer accounts for what
            // would arrive: refuse the piece rather than hold it uncharged.
            state.still_open()?;
            if let (Some(piece), Some(partial)) = (piece, state.partial.as_mut()) {
                partial.pieces.push(piece);
                state.waiters.wake_all();
            }
        }
        if received == pending.size {
            self.complete()?;
        }
        Ok(())
    }

    /// The pending frame has all its bytes: the group's partial frame becomes whole (one
    /// payload), unless the group already held it whole.
    fn complete(&mut self) -> Result<(), ModelError> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        if pending.skipped {
            return Ok(());
        }
        // The pieces are joined outside the lock; readers keep following them meanwhile.
        let pieces = {
            let state = self.group.state.lock();
            state.still_open()?;
            match state.partial.as_ref() {
                Some(partial) => partial.pieces.clone(),
                None => return Ok(()),
            }
        };
        let payload = match pieces.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => {
                let mut whole = BytesMut::with_capacity(pending.size);
                for piece in many {
                    whole.extend_from_slice(piece);
                }
                whole.freeze()
            }
        };
        let mut state = self.group.state.lock();
        state.still_open()?;
        let Some(partial) = state.partial.take() else {
            return Ok(());
        };
        publish(
            &mut state,
            Frame {
                timestamp: partial.timestamp,
                payload,
            },
        );
        Ok(())
    }

    /// Whether one more frame of `size` bytes fits the group and its limits.
    fn admit(&self, state: &GroupState, size: usize) -> Result<(), ModelError> {
        state.still_open()?;
        if size > self.limits.max_frame_bytes {
            return Err(ModelError::FrameTooLarge(size));
        }
        if state.frames.len() >= self.limits.max_group_frames
            || state.bytes + size > self.limits.max_group_bytes
        {
            return Err(ModelError::GroupTooLarge);
        }
        Ok(())
    }

    /// Charge an admitted frame to the group and its track's cache (under the group's lock,
    /// which a group that expires takes to give its charge back).
    fn charge(&self, state: &mut GroupState, size: usize, timestamp: u64) -> Settle {
        let Some(home) = &self.home else {
            return Settle::default();
        };
        state.charged_bytes += size;
        state.charged_cost += size + FRAME_OVERHEAD;
        let first = !state.started;
        state.started = true;
        home.track.charge(size, timestamp, first)
    }

    /// What the charge left for the track, with the group unlocked.
    fn settle(&self, settle: Settle) {
        if let (Some(home), true) = (&self.home, settle.policy || settle.budget) {
            home.track.settle(home.arrival, settle);
        }
    }

    /// End the group cleanly after the frames written so far. A frame still missing bytes
    /// ends it with WRONG_SIZE instead.
    pub fn finish(mut self) {
        self.resumable = false;
        if self.pending.is_some() {
            self.group.abort(StreamCode::WrongSize);
            return;
        }
        let mut state = self.group.state.lock();
        if state.end.is_none() {
            state.end = Some(Ok(()));
            state.waiters.wake_all();
        }
    }

    /// End the group with an error code (forwarded to readers after the frames they can read).
    pub fn abort(mut self, code: StreamCode) {
        self.resumable = false;
        self.group.abort(code);
    }

    /// The source writing this group was lost: on a resumable track that is still open the
    /// group waits for the next source; otherwise it is aborted as cancelled.
    pub fn source_lost(self) {
        drop(self)
    }

    /// A reader of this group from its first frame.
    pub fn consume(&self) -> GroupConsumer {
        GroupConsumer::new(self.group.clone(), 0)
    }
}

impl Drop for GroupProducer {
    fn drop(&mut self) {
        if self.resumable {
            if let Some(home) = &self.home {
                // Decided under the track's lock, so a track closing at the same moment
                // either sees the orphan and aborts it, or we see it closed.
                if home.track.orphan(&self.group) {
                    return;
                }
            }
        }
        self.group.abort(StreamCode::Cancelled);
    }
}

impl PendingFrame {
    /// Copy `bytes` into the block and cut them off as a shared piece; a new block is
    /// allocated only when the current one is used up.
    fn cut(&mut self, bytes: &[u8]) -> Bytes {
        if self.block.capacity() < bytes.len() {
            let left = self.size - self.allocated.min(self.size);
            let grown = self.allocated.max(PENDING_START).min(left).max(bytes.len());
            self.block = BytesMut::with_capacity(grown);
            self.allocated += grown;
        }
        self.block.extend_from_slice(bytes);
        self.block.split().freeze()
    }
}

/// Append a frame for the group's readers and wake them.
fn publish(state: &mut GroupState, frame: Frame) {
    state.bytes += frame.payload.len();
    state.frames.push(frame);
    state.waiters.wake_all();
}

/// Reads a group's frames in order, at its own pace.
#[derive(Debug, Clone)]
pub struct GroupConsumer {
    group: Arc<Group>,
    index: usize,
    /// A forwarding reader inside frame `index` while it arrives: the pieces and bytes of it
    /// taken so far.
    following: Option<(usize, usize)>,
}

impl GroupConsumer {
    pub(crate) fn new(group: Arc<Group>, index: usize) -> Self {
        GroupConsumer {
            group,
            index,
            following: None,
        }
    }

    pub fn sequence(&self) -> u64 {
        self.group.sequence
    }

    /// Index of the next frame this reader returns.
    pub fn frame_index(&self) -> usize {
        self.index
    }

    /// Skip to frame `index` (used for frame-offset subscriptions and fetches).
    pub fn seek(&mut self, index: usize) {
        self.index = index;
        self.following = None;
    }

    /// Next frame; `Ok(None)` when the group finished; `Err(code)` when it was aborted.
    pub fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Frame>, StreamCode>> {
        let mut state = self.group.state.lock();
        if let Some(frame) = state.frames.get(self.index) {
            self.index += 1;
            return Poll::Ready(Ok(Some(frame.clone())));
        }
        match state.end {
            Some(Ok(())) => Poll::Ready(Ok(None)),
            Some(Err(code)) => Poll::Ready(Err(code)),
            None => {
                state.waiters.register(cx);
                Poll::Pending
            }
        }
    }

    /// Whether the group finished cleanly: every frame it will ever hold is here.
    pub fn is_finished(&self) -> bool {
        self.group.state.lock().end == Some(Ok(()))
    }

    /// Ready with the code once the group was aborted or expired (never for a clean finish).
    pub fn poll_aborted(&self, cx: &mut Context<'_>) -> Poll<StreamCode> {
        let mut state = self.group.state.lock();
        match state.end {
            Some(Err(code)) => Poll::Ready(code),
            _ => {
                state.waiters.register(cx);
                Poll::Pending
            }
        }
    }

    pub async fn aborted(&self) -> StreamCode {
        poll_fn(|cx| self.poll_aborted(cx)).await
    }

    pub async fn next_frame(&mut self) -> Result<Option<Frame>, StreamCode> {
        poll_fn(|cx| self.poll_frame(cx)).await
    }

    /// Every frame currently buffered past the cursor, plus whether the group has ended, in one
    /// lock: lets a writer batch frames into one transport write.
    pub fn poll_frames(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut Vec<Frame>,
    ) -> Poll<Result<bool, StreamCode>> {
        let mut state = self.group.state.lock();
        if self.index < state.frames.len() {
            out.extend_from_slice(&state.frames[self.index..]);
            self.index = state.frames.len();
            return Poll::Ready(Ok(matches!(state.end, Some(Ok(())))));
        }
        match state.end {
            Some(Ok(())) => Poll::Ready(Ok(true)),
            Some(Err(code)) => Poll::Ready(Err(code)),
            None => {
                state.waiters.register(cx);
                Poll::Pending
            }
        }
    }

    /// For a writer forwarding the group: every whole frame past the cursor, then the frame
    /// still arriving, if any (its header at once, then each piece as it comes, and the rest
    /// of it once it is whole), plus whether the group has ended with all of it handed out,
    /// in one lock.
    pub fn poll_units(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut Vec<Unit>,
    ) -> Poll<Result<bool, StreamCode>> {
        let mut state = self.group.state.lock();
        let before = out.len();
        if let Some((_, taken)) = self.following {
            if let Some(frame) = state.frames.get(self.index) {
                // The frame it followed is whole now: the rest of it, from its payload.
                if taken < frame.payload.len() {
                    out.push(Unit::Bytes(frame.payload.slice(taken..)));
                }
                self.following = None;
                self.index += 1;
            }
        }
        if self.following.is_none() {
            if let Some(frames) = state.frames.get(self.index..) {
                out.extend(frames.iter().cloned().map(Unit::Frame));
                self.index += frames.len();
            }
            if let (Some(partial), true) = (&state.partial, self.index == state.frames.len()) {
                out.push(Unit::Head {
                    timestamp: partial.timestamp,
                    size: partial.size,
                });
                self.following = Some((0, 0));
            }
        }
        if let (Some((pieces, taken)), Some(partial)) = (&mut self.following, &state.partial) {
            for piece in partial.pieces.get(*pieces..).unwrap_or_default() {
                *taken += piece.len();
                out.push(Unit::Bytes(piece.clone()));
            }
            *pieces = partial.pieces.len();
        }
        let ended = self.following.is_none() && self.index >= state.frames.len();
        if out.len() > before {
            return Poll::Ready(Ok(ended && state.end == Some(Ok(()))));
        }
        match state.end {
            Some(Ok(())) if ended => Poll::Ready(Ok(true)),
            Some(Err(code)) => Poll::Ready(Err(code)),
            _ => {
                state.waiters.register(cx);
                Poll::Pending
            }
        }
    }
}
