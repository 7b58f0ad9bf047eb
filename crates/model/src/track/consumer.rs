//! A track's readers: where a new one starts ([`StartAt`]) and the cursor each keeps over the
//! track's cache ([`TrackConsumer`]), with the demand it adds and the peer it serves.

use super::*;

/// Where a new reader starts, and what it asks of the publisher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartAt {
    /// The reader's max age: delivery reaches back this far (presentation time) into the
    /// cache, 0 meaning the latest group; it is also what relays ask of their upstream.
    pub max_age_ms: u64,
    /// Start at the latest group whatever the max age (lite-05's absent start).
    pub latest: bool,
    /// Never deliver groups below this sequence.
    pub floor: Option<u64>,
    /// The reader's subscriber priority (higher is more urgent).
    pub priority: u8,
}

/// Reads a track: yields each cached or new group once, newest-first positioning at start.
#[derive(Debug)]
pub struct TrackConsumer {
    pub(super) shared: Arc<TrackShared>,
    start: StartAt,
    /// Arrival index of the next group to look at; `None` until positioned.
    cursor: Option<u64>,
    /// Lowest sequence this reader still delivers (the first group it delivered).
    floor: u64,
    delivered_any: bool,
    /// Counted readers keep the track in use; a detached handle (kept by a broadcast's track
    /// table) does not.
    counted: bool,
    /// The hop of the peer this reader serves, registered in the track's peer readers.
    peer: Option<u64>,
}

impl Clone for TrackConsumer {
    fn clone(&self) -> Self {
        self.shared.state.lock().consumers += 1; // clones always count
        TrackConsumer {
            shared: self.shared.clone(),
            start: self.start,
            cursor: self.cursor,
            floor: self.floor,
            delivered_any: self.delivered_any,
            counted: true,
            peer: None,
        }
    }
}

impl TrackConsumer {
    /// A counted handle at `start`; `reads_groups` adds its priority and max age to the
    /// track's demand (a handle that only waits for the info adds nothing).
    pub(super) fn new(shared: Arc<TrackShared>, start: StartAt, reads_groups: bool) -> Self {
        {
            let mut state = shared.state.lock();
            state.consumers += 1;
            if reads_groups {
                let demand = match state.demand {
                    None => Demand {
                        priority: start.priority,
                        max_age_ms: start.max_age_ms,
                    },
                    Some(demand) => Demand {
                        priority: demand.priority.max(start.priority),
                        max_age_ms: demand.max_age_ms.max(start.max_age_ms),
                    },
                };
                if state.demand != Some(demand) {
                    state.demand = Some(demand);
                    state.demand_waiters.wake_all();
                }
            }
        }
        TrackConsumer {
            shared,
            start,
            cursor: None,
            floor: start.floor.unwrap_or(0),
            delivered_any: false,
            counted: true,
            peer: None,
        }
    }

    /// Mark this reader as serving the peer with `hop` (0 or `None`: a client): while it
    /// reads, the track is never pulled through that peer. Refused (UNROUTABLE) while the
    /// track is pulled through that peer: it asks us for what we get from it, a loop that
    /// only exists while routes settle.
    pub fn for_peer(mut self, hop: Option<u64>) -> Result<TrackConsumer, StreamCode> {
        let Some(hop) = hop.filter(|hop| *hop != 0) else {
            return Ok(self);
        };
        if self.peer.is_none() {
            let mut state = self.shared.state.lock();
            if state
                .source
                .as_ref()
                .is_some_and(|route| route.hops.contains(&hop))
            {
                return Err(StreamCode::Unroutable);
            }
            match state.peer_readers.iter_mut().find(|(h, _)| *h == hop) {
                Some((_, count)) => *count += 1,
                None => state.peer_readers.push((hop, 1)),
            }
            self.peer = Some(hop);
        }
        Ok(self)
    }

    /// This handle stops counting as a reader (the track can go unused while it exists).
    pub(crate) fn detached(mut self) -> TrackConsumer {
        if self.counted {
            self.counted = false;
            self.release();
        }
        self
    }

    fn release(&self) {
        let mut state = self.shared.state.lock();
        state.consumers -= 1;
        if state.consumers == 0 {
            state.unused_waiters.wake_all();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().closed.is_some()
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// A fresh reader of the same track with its own start.
    pub fn resubscribe(&self, start: StartAt) -> TrackConsumer {
        TrackConsumer::new(self.shared.clone(), start, true)
    }

    /// A fresh handle on the same track that waits for its info only: it keeps the track in
    /// use but asks nothing of the publisher (see [`Demand`]).
    pub fn watch(&self) -> TrackConsumer {
        TrackConsumer::new(self.shared.clone(), StartAt::default(), false)
    }

    /// The track's info once the publisher provided it.
    pub fn poll_info(&self, cx: &mut Context<'_>) -> Poll<Result<TrackInfo, StreamCode>> {
        let mut state = self.shared.state.lock();
        if let Some(info) = state.info {
            return Poll::Ready(Ok(info));
        }
        match state.closed {
            Some(Err(code)) => Poll::Ready(Err(code)),
            Some(Ok(())) => Poll::Ready(Err(StreamCode::NotFound)),
            None => {
                state.waiters.register(cx);
                Poll::Pending
            }
        }
    }

    pub async fn info(&self) -> Result<TrackInfo, StreamCode> {
        poll_fn(|cx| self.poll_info(cx)).await
    }

    /// Exclusive final sequence, once the track finished.
    pub fn end(&self) -> Option<u64> {
        self.shared.state.lock().end
    }

    fn position(start: StartAt, state: &TrackState, newest_timestamp: u64) -> u64 {
        let tail = state.next_arrival;
        let Some((latest_seq, latest_arrival)) = state.latest else {
            return tail;
        };
        let floor = start.floor.unwrap_or(0);
        if start.latest || start.max_age_ms == 0 || state.info.is_none() {
            if latest_seq >= floor {
                return latest_arrival;
            }
            return tail;
        }
        let info = state.info.unwrap_or_default();
        let reach =
            newest_timestamp.saturating_sub(StartAt::ticks(start.max_age_ms, info.timescale));
        for (arrival, super::Cached { group, start }) in &state.groups {
            if group.sequence() < floor {
                continue;
            }
            if start.is_none_or(|ts| ts >= reach) {
                return *arrival;
            }
        }
        latest_arrival
    }

    /// The next group to deliver: `Ok(None)` when the track finished and every group was given.
    pub fn poll_group(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<GroupConsumer>, StreamCode>> {
        let mut state = self.shared.state.lock();
        let mut cursor = match self.cursor {
            Some(cursor) => cursor,
            None => {
                let cursor =
                    Self::position(self.start, &state, self.shared.counts.newest_timestamp());
                self.cursor = Some(cursor);
                cursor
            }
        };
        // What left the cache is skipped: the next cached group at or after the cursor. A
        // reader reaching back (a max age) also takes stragglers below its first group while
        // they are within its reach: publishers send the newest group first, so a reader's
        // history often arrives after the live edge it was first given.
        let reach = self.reach(&state);
        let floor = self.floor;
        let start_floor = self.start.floor.unwrap_or(0);
        let next = state
            .groups
            .range(cursor..)
            .find(|(_, super::Cached { group, start })| {
                let sequence = group.sequence();
                sequence >= floor
                    || reach.is_some_and(|reach| {
                        sequence >= start_floor && start.is_none_or(|ts| ts >= reach)
                    })
            })
            .map(|(arrival, cached)| (*arrival, cached.group.clone()));
        if let Some((arrival, group)) = next {
            if !self.delivered_any {
                // Stragglers below the first delivered group are never sent.
                self.floor = group.sequence();
                self.delivered_any = true;
            }
            self.cursor = Some(arrival + 1);
            return Poll::Ready(Ok(Some(GroupConsumer::new(group, 0))));
        }
        cursor = cursor.max(state.next_arrival);
        self.cursor = Some(cursor);
        match state.closed {
            Some(Ok(())) => Poll::Ready(Ok(None)),
            Some(Err(code)) => Poll::Ready(Err(code)),
            None => {
                state.waiters.register(cx);
                Poll::Pending
            }
        }
    }

    /// The oldest timestamp this reader still takes a straggler at: `None` for a reader of the
    /// live edge; 0 (everything) while the track's info, and so its timescale, is unknown.
    fn reach(&self, state: &TrackState) -> Option<u64> {
        if self.start.latest || self.start.max_age_ms == 0 {
            return None;
        }
        Some(state.info.map_or(0, |info| {
            self.shared
                .counts
                .newest_timestamp()
                .saturating_sub(StartAt::ticks(self.start.max_age_ms, info.timescale))
        }))
    }

    pub async fn next_group(&mut self) -> Result<Option<GroupConsumer>, StreamCode> {
        poll_fn(|cx| self.poll_group(cx)).await
    }

    /// A cached group by sequence, read from its first frame.
    pub fn group(&self, sequence: u64) -> Option<GroupConsumer> {
        let state = self.shared.state.lock();
        let arrival = *state.by_sequence.get(&sequence)?;
        let group = state.groups.get(&arrival)?.group.clone();
        Some(GroupConsumer::new(group, 0))
    }

    /// The latest cached group's sequence.
    pub fn latest_sequence(&self) -> Option<u64> {
        self.shared.state.lock().latest.map(|(s, _)| s)
    }

    /// Counters and cache occupancy (read-only; for status pages and metrics).
    pub fn stats(&self) -> TrackStats {
        self.shared.stats()
    }

    /// Ready with the count of groups the track accepted once it differs from `seen` (see
    /// [`TrackStats::groups`]), or once the track closed. Read-only: it never moves this
    /// reader's cursor, so a caller can wait for any arrival, older groups included.
    pub fn poll_groups_changed(&self, cx: &mut Context<'_>, seen: u64) -> Poll<u64> {
        let mut state = self.shared.state.lock();
        if state.groups_received != seen || state.closed.is_some() {
            Poll::Ready(state.groups_received)
        } else {
            state.waiters.register(cx);
            Poll::Pending
        }
    }

    pub async fn groups_changed(&self, seen: u64) -> u64 {
        poll_fn(|cx| self.poll_groups_changed(cx, seen)).await
    }

    pub(crate) fn shared(&self) -> &Arc<TrackShared> {
        &self.shared
    }

    /// Resolves when the track closed; the result says how.
    pub fn poll_closed(&self, cx: &mut Context<'_>) -> Poll<Result<(), StreamCode>> {
        let mut state = self.shared.state.lock();
        match state.closed {
            Some(result) => Poll::Ready(result),
            None => {
                state.waiters.register(cx);
                Poll::Pending
            }
        }
    }
}

impl StartAt {
    pub(super) fn ticks(ms: u64, timescale: u64) -> u64 {
        (ms as u128 * timescale as u128 / 1000).min(u64::MAX as u128) as u64
    }
}

impl Drop for TrackConsumer {
    fn drop(&mut self) {
        if let Some(hop) = self.peer {
            let mut state = self.shared.state.lock();
            if let Some(index) = state.peer_readers.iter().position(|(h, _)| *h == hop) {
                state.peer_readers[index].1 -= 1;
                if state.peer_readers[index].1 == 0 {
                    state.peer_readers.swap_remove(index);
                }
            }
        }
        if self.counted {
            self.release();
        }
    }
}
