//! One served subscription, whatever the wire: the shared track read at this subscriber's
//! cursor, each group on its own stream (newest first, a bounded number in flight), the
//! subscriber's updates and cancel, and the end. Written once, for the lite versions and the
//! IETF drafts alike; each family says what differs through [`ServeWire`] (how its subscriber's
//! events read, where a group goes, what answers the first group, how a group is written and
//! reset, how the end and a failure are told): `publisher/subscribe.rs` and
//! `ietf/publisher.rs`.
//!
//! Every group stream is its own future, driven from the subscription's task
//! (`crate::inflight`), so a subscriber that reads slowly stalls only its own streams; the
//! shared cache and other subscribers never wait for it. When a newer group starts beyond the
//! bound, the oldest stream is reset with TOO_FAR_BEHIND, and a group that leaves the cache
//! while being written is reset with the code it left with (OLD or EVICTED).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use starling_model::{GroupConsumer, TrackConsumer};
use starling_proto::StreamCode;
use starling_transport::Transport;
use tokio::sync::watch;

use crate::error::Error;
use crate::gate::Gate;
use crate::inflight::InFlight;
use crate::shared::Shared;
use crate::writer::Writer;

/// The span of group ranks within one priority (23 bits).
const SPAN: u64 = 0x7f_ffff;

/// QUIC send order: subscriber priority first, then newer groups first, ranked by how far a
/// group is past the subscription's `base` sequence. Relative, so it does not wrap whatever the
/// publisher numbers its groups with (a clock in milliseconds, say): the subscription moves its
/// base up as its groups approach the top of the span (see [`Urgency::rebased`]).
pub(crate) fn send_order(priority: u8, sequence: u64, base: u64) -> i32 {
    let rank = sequence.saturating_sub(base).min(SPAN);
    ((priority as i32) << 23) | rank as i32
}

/// What orders a subscription's group streams: its priority (higher goes first), and the base
/// its groups are ranked from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Urgency {
    priority: u8,
    base: Option<u64>,
}

impl Urgency {
    pub(crate) fn order(&self, sequence: u64) -> i32 {
        send_order(self.priority, sequence, self.base.unwrap_or(0))
    }

    /// A base for a group about to start, when the current one no longer ranks it well:
    /// a quarter span below it, so late older groups still rank below it, and a quarter span
    /// of headroom is left before the next move.
    fn rebased(&self, sequence: u64) -> Option<u64> {
        match self.base {
            Some(base) if sequence.saturating_sub(base) <= SPAN / 2 => None,
            _ => Some(sequence.saturating_sub(SPAN / 4)),
        }
    }
}

/// What the subscriber did, as its wire reads it.
pub(crate) enum Event<U> {
    /// An update: the wire applies it ([`ServeWire::update`]).
    Update(U),
    /// The subscriber is done: what is in flight is reset with this code.
    Cancel(StreamCode),
    /// Nothing more will come from the subscriber; serving goes on (IETF 19 on: its FIN).
    Quiet,
    /// An update the wire could not apply, already answered: the subscription ends.
    Refused,
}

/// Why a subscription stopped short of its track's end.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The track itself ended in error.
    Track(StreamCode),
    /// The subscriber asked for an update that cannot be served ([`Event::Refused`]).
    Refused,
    /// The subscriber's stream or the session failed.
    Session(Error),
}

/// Where a group of the track goes.
pub(crate) enum Place {
    /// On a stream now, from its current frame, through `last_frame` when bounded.
    Serve(GroupConsumer, Option<u64>),
    /// Held by the wire until an update releases it.
    Held,
    /// Past what the subscription asked for: it ends here, before this sequence.
    End(u64),
}

/// The subscriber's events as one wire reads them. Held apart from its [`ServeWire`], so a
/// pending read never keeps the subscription from starting groups.
pub(crate) trait Events: Send {
    type Update: Send;
    /// The subscriber's next event.
    fn next(&mut self) -> impl Future<Output = Result<Event<Self::Update>, Error>> + Send + '_;
}

/// How one group is written on its stream: a small value each group's send owns a copy of.
pub(crate) trait GroupWire<T: Transport>: Clone + Send + Sync {
    /// Whether a stream in flight takes the subscription's new priority at its next frame
    /// (lite does); else each keeps the order it started with, and no group watches it.
    const REPRIORITIZES: bool;

    /// Write `group` from its current frame, through `last_frame` when bounded; `urgency`
    /// follows the subscription's priority (for a wire that [`Self::REPRIORITIZES`]).
    fn write<'a>(
        &'a self,
        shared: &'a Shared<T>,
        writer: &'a mut Writer<T::Send>,
        group: &'a mut GroupConsumer,
        last_frame: Option<u64>,
        urgency: Option<&'a mut watch::Receiver<Urgency>>,
    ) -> impl Future<Output = Result<(), StreamCode>> + Send + 'a;
    /// The wire code a group stream is reset with for `code`.
    fn reset_code(&self, code: StreamCode) -> u32;
}

/// What one wire family does for a served subscription; the engine ([`serve`]) does the rest.
pub(crate) trait ServeWire<T: Transport, E: Events>: Send {
    type Groups: GroupWire<T>;

    /// The group writer of this subscription.
    fn groups(&self) -> Self::Groups;
    /// Apply an update: the new priority, if it changed, and the groups to place again.
    fn update(&mut self, update: E::Update) -> (Option<u8>, Vec<GroupConsumer>);
    /// Where the track's next group goes.
    fn place(&mut self, group: GroupConsumer) -> Place;
    /// Before the first group's stream opens (lite from 05 answers with its sequence).
    fn starting(&mut self, sequence: u64) -> impl Future<Output = Result<(), Error>> + Send;
    /// Whether the end is told only once every group stream closed (it counts them, or
    /// nothing but the FIN tells it).
    fn end_after_streams(&self) -> bool;
    /// The track ended (`end`, exclusive, when it said; else after `last_started`): tell the
    /// subscriber, `opened` counting the group streams this subscription opened.
    fn ended(
        &mut self,
        shared: &Shared<T>,
        events: &mut E,
        end: Option<u64>,
        last_started: Option<u64>,
        opened: &AtomicU64,
    ) -> impl Future<Output = Result<(), Error>> + Send;
    /// The last group stream after the end closed: close the subscription.
    fn closed(&mut self, events: &mut E) -> impl Future<Output = Result<(), Error>> + Send;
    /// The subscriber cancelled and its streams are reset: close our side.
    fn cancelled(&mut self, events: &mut E) -> Result<(), Error>;
    /// The code the streams in flight are reset with when the subscription fails (for a
    /// track that failed, those its cache holds whole still go to their end).
    fn abort_code(&self, failure: &Failure) -> StreamCode;
    /// The subscription failed and its streams are done: tell the subscriber, or hand the
    /// error up.
    fn failed(
        &mut self,
        events: &mut E,
        failure: Failure,
        opened: &AtomicU64,
    ) -> impl Future<Output = Result<(), Error>> + Send;
}

/// The next event as a future that owns the events' borrow and hands it back with the
/// event, so the subscription keeps one such future across its loop and makes the next from
/// what the last returned.
async fn event_on<E: Events>(events: &mut E) -> (&mut E, Result<Event<E::Update>, Error>) {
    let event = events.next().await;
    (events, event)
}

/// Serve `track` to the subscriber at `priority` (higher goes first) until the track ends,
/// the subscriber cancels, or either fails.
pub(crate) async fn serve<T: Transport, E: Events, W: ServeWire<T, E>>(
    shared: &Arc<Shared<T>>,
    wire: &mut W,
    events: &mut E,
    track: &mut TrackConsumer,
    priority: u8,
) -> Result<(), Error> {
    let limits = &shared.config.limits;
    // In-flight group streams follow the subscription's priority as updates change it, and
    // rank below each newer group as it starts.
    let urgency_tx = watch::Sender::new(Urgency {
        priority,
        base: None,
    });
    // Group streams opened for this subscription (counted in lite-07's SUBSCRIBE_END and the
    // drafts' PUBLISH_DONE).
    let opened = AtomicU64::new(0);
    let groups = wire.groups();
    let mut inflight = InFlight::new(limits.max_inflight_groups);
    let start = |group: GroupConsumer, last_frame: Option<u64>, inflight: &mut InFlight<_>| {
        let sequence = group.sequence();
        let mut current = *urgency_tx.borrow();
        // Rare (every few million groups): streams in flight take the new base at their next
        // frame.
        if let Some(base) = current.rebased(sequence) {
            urgency_tx.send_modify(|u| u.base = Some(base));
            current.base = Some(base);
        }
        let order = current.order(sequence);
        // Seen as of now: the stream starts at `order` and takes only later changes.
        let mut urgency = W::Groups::REPRIORITIZES.then(|| urgency_tx.subscribe());
        let (opened, groups) = (&opened, groups.clone());
        let skipped = inflight.start(sequence, |stop| async move {
            let mut group = group;
            let write = async |writer: &mut Writer<T::Send>| {
                groups
                    .write(shared, writer, &mut group, last_frame, urgency.as_mut())
                    .await
            };
            let reset = |code| groups.reset_code(code);
            shared
                .send_group(sequence, &stop, opened, order, write, reset)
                .await
        });
        shared
            .stats
            .groups_skipped
            .fetch_add(skipped, Ordering::Relaxed);
    };

    // The subscriber's events and the track are polled only when they woke the task, not on
    // the wakes of the group sends (one per frame per stream).
    let (mut events_gate, mut track_gate) = (Gate::default(), Gate::default());
    let mut control = Box::pin(event_on(events));
    let mut started = false;
    let outcome: Result<Option<u64>, Failure> = loop {
        tokio::select! {
            biased;
            (events, event) = events_gate.future(control.as_mut()) => {
                match event {
                    Ok(Event::Update(update)) => {
                        let (priority, released) = wire.update(update);
                        if let Some(priority) = priority {
                            urgency_tx.send_modify(|u| u.priority = priority);
                        }
                        for group in released {
                            if let Place::Serve(group, last) = wire.place(group) {
                                start(group, last, &mut inflight);
                            }
                        }
                    }
                    Ok(Event::Quiet) => {}
                    Ok(Event::Cancel(code)) => {
                        inflight.abort_all(code);
                        inflight.drain().await;
                        drop(control);
                        return wire.cancelled(events);
                    }
                    Ok(Event::Refused) => break Err(Failure::Refused),
                    Err(err) => break Err(Failure::Session(err)),
                }
                control.set(event_on(events));
            }
            next = track_gate.wait(|cx| track.poll_group(cx)) => {
                tracing::trace!(next = ?next.as_ref().map(|g| g.as_ref().map(|g| g.sequence())), "subscription group");
                match next {
                    Ok(Some(group)) => match wire.place(group) {
                        Place::Serve(group, last) => {
                            if !started {
                                started = true;
                                // Boxed: once a subscription, and the largest write
                                // (half the future's size inline).
                                if let Err(err) = Box::pin(wire.starting(group.sequence())).await {
                                    break Err(Failure::Session(err));
                                }
                            }
                            start(group, last, &mut inflight);
                        }
                        Place::Held => {}
                        Place::End(end) => break Ok(Some(end)),
                    },
                    Ok(None) => break Ok(track.end()),
                    Err(code) => break Err(Failure::Track(code)),
                }
            }
            _ = inflight.next() => {}
        }
    };
    drop(control);

    match outcome {
        Ok(end) => {
            if wire.end_after_streams() {
                inflight.drain().await;
            }
            let last_started = inflight.last_started();
            wire.ended(shared, events, end, last_started, &opened)
                .await?;
            inflight.drain().await;
            wire.closed(events).await
        }
        Err(failure) => {
            let code = wire.abort_code(&failure);
            if let Failure::Track(_) = failure {
                inflight.finish_whole(track, code).await;
            } else {
                inflight.abort_all(code);
                inflight.drain().await;
            }
            wire.failed(events, failure, &opened).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{send_order, Urgency};

    #[test]
    fn send_order_ranks_priority_then_newest_group() {
        // A more urgent subscription always goes first, whatever the groups.
        assert!(send_order(2, 0, 0) > send_order(1, 1_000, 0));
        // Within a subscription, newer groups go first.
        assert!(send_order(5, 11, 0) > send_order(5, 10, 0));
        // The extremes stay in range and ordered.
        assert!(send_order(255, 0, u64::MAX) > send_order(254, u64::MAX, 0));
        assert!(send_order(0, 0, u64::MAX) >= 0);
        assert!(send_order(255, u64::MAX, 0) > 0);
    }

    /// Issue 10 item 8: groups numbered by a clock cross 2^23; the newer one still goes
    /// first (23 bits of the sequence used to wrap there).
    #[test]
    fn send_order_does_not_wrap_for_large_sequences() {
        let mut urgency = Urgency {
            priority: 5,
            base: None,
        };
        for first in [(1u64 << 23) - 1, 1_796_000_000_000] {
            urgency.base = urgency.rebased(first).or(urgency.base);
            let mut previous = urgency.order(first);
            // Groups numbered in milliseconds, 33 apart, across many spans.
            for n in 1..2_000_000u64 {
                let sequence = first + n * 33;
                if let Some(base) = urgency.rebased(sequence) {
                    urgency.base = Some(base);
                    previous = urgency.order(sequence - 33);
                }
                let order = urgency.order(sequence);
                assert!(order > previous, "{sequence}: {order} after {previous}");
                previous = order;
            }
        }
    }
}
