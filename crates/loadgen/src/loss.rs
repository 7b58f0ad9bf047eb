//! Per-track sequence accounting: what arrived, what never did, what came twice or late.
//!
//! A reader records each sequence number it receives. Loss is what the sequence numbers say
//! should have arrived minus what did: from the expected start (0 for a reader subscribed
//! before the run, else the first sequence it saw) through the last sequence sent. Memory is
//! bounded: a ring of [`WINDOW`] bits remembers which recent sequences were seen, so
//! duplicates and late (out-of-order) arrivals are told apart exactly within the window; an
//! arrival more than `WINDOW` behind the highest is counted as `stale` and not as received.

use serde::Serialize;

/// Sequences remembered behind the highest one seen.
pub const WINDOW: u64 = 8192;
const WORDS: usize = (WINDOW / 64) as usize;

/// How one arrival relates to what came before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Above everything so far (`skipped` sequences between it and the previous highest).
    New { skipped: u64 },
    /// Below the highest, not seen before: reordered.
    Late,
    /// Seen before.
    Duplicate,
    /// Too far behind to tell (or before the expected start); not counted as received.
    Stale,
}

/// Tallies of one or many trackers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LossCounts {
    /// Sequences that should have arrived.
    pub expected: u64,
    /// Distinct sequences that did.
    pub received: u64,
    /// `expected - received` (never negative).
    pub lost: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub stale: u64,
}

impl LossCounts {
    pub fn add(&mut self, other: &LossCounts) {
        self.expected += other.expected;
        self.received += other.received;
        self.lost += other.lost;
        self.duplicates += other.duplicates;
        self.out_of_order += other.out_of_order;
        self.stale += other.stale;
    }
}

/// One track's sequence numbers as one reader saw them.
#[derive(Clone, Debug)]
pub struct SeqTracker {
    /// Where the expected range starts, when known before the first arrival.
    start: Option<u64>,
    first: Option<u64>,
    highest: Option<u64>,
    /// Distinct sequences received (within the expected range).
    unique: u64,
    duplicates: u64,
    out_of_order: u64,
    stale: u64,
    seen: Box<[u64; WORDS]>,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqTracker {
    /// A tracker whose expected range starts at the first sequence it sees (a late joiner).
    pub fn new() -> Self {
        SeqTracker {
            start: None,
            first: None,
            highest: None,
            unique: 0,
            duplicates: 0,
            out_of_order: 0,
            stale: 0,
            seen: Box::new([0; WORDS]),
        }
    }

    /// A tracker that expects every sequence from `start` on (subscribed before the run).
    pub fn expecting_from(start: u64) -> Self {
        SeqTracker {
            start: Some(start),
            ..Self::new()
        }
    }

    fn bit(seq: u64) -> (usize, u64) {
        let slot = seq % WINDOW;
        ((slot / 64) as usize, 1u64 << (slot % 64))
    }

    fn clear(&mut self, seq: u64) {
        let (word, mask) = Self::bit(seq);
        self.seen[word] &= !mask;
    }

    /// Note one arrival.
    pub fn record(&mut self, seq: u64) -> Arrival {
        if self.start.is_some_and(|start| seq < start) {
            self.stale += 1;
            return Arrival::Stale;
        }
        if self.first.is_none() {
            self.first = Some(seq);
        }
        let arrival = match self.highest {
            None => Arrival::New {
                skipped: self.start.map_or(0, |start| seq - start),
            },
            Some(highest) if seq > highest => {
                // The ring slots of the sequences we move past now stand for new ones.
                if seq - highest >= WINDOW {
                    self.seen.fill(0);
                } else {
                    for s in highest + 1..=seq {
                        self.clear(s);
                    }
                }
                Arrival::New {
                    skipped: seq - highest - 1,
                }
            }
            Some(highest) if highest - seq >= WINDOW => {
                self.stale += 1;
                return Arrival::Stale;
            }
            Some(_) => {
                let (word, mask) = Self::bit(seq);
                if self.seen[word] & mask != 0 {
                    self.duplicates += 1;
                    return Arrival::Duplicate;
                }
                self.out_of_order += 1;
                Arrival::Late
            }
        };
        if let Arrival::New { .. } = arrival {
            self.highest = Some(seq);
        }
        let (word, mask) = Self::bit(seq);
        self.seen[word] |= mask;
        self.unique += 1;
        arrival
    }

    /// Distinct sequences received.
    pub fn received(&self) -> u64 {
        self.unique
    }

    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// Sequences expected from the start through `last` that never arrived.
    pub fn lost_through(&self, last: u64) -> u64 {
        self.expected_through(Some(last))
            .saturating_sub(self.unique)
    }

    /// Whether every sequence from the start through `last` arrived.
    pub fn is_complete_through(&self, last: u64) -> bool {
        self.highest.is_some_and(|h| h >= last) && self.lost_through(last) == 0
    }

    /// Sequences expected from the start through `last` (through the highest seen when
    /// `last` is unknown).
    fn expected_through(&self, last: Option<u64>) -> u64 {
        let Some(from) = self.start.or(self.first) else {
            return 0;
        };
        match last.or(self.highest) {
            Some(last) if last >= from => last - from + 1,
            _ => 0,
        }
    }

    /// The tallies, taking `last` as the final sequence sent (`None`: the highest seen).
    pub fn counts(&self, last: Option<u64>) -> LossCounts {
        let expected = self.expected_through(last);
        LossCounts {
            expected,
            received: self.unique,
            lost: expected.saturating_sub(self.unique),
            duplicates: self.duplicates,
            out_of_order: self.out_of_order,
            stale: self.stale,
        }
    }
}
