//! What one member's subscription to one channel owes it, and when it has paid.
//!
//! When the member asks for a channel, the publisher has sent `sent` messages on it
//! (sequences `0..sent`). The subscription reaches back into the relay's cache, so the
//! member is owed the last `history` of those (`sent - history .. sent`): its history is
//! complete when every one of them arrived. Messages from `sent` on are live. The first
//! message of any kind is the subscription's answer. Older messages than the history
//! window, and repeats, are counted apart and never complete anything.

/// What arriving message `sequence` meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The subscription's first message (its answer).
    pub first: bool,
    /// A message sent after the subscription was asked for.
    pub live: bool,
    /// A message older than the history window.
    pub older: bool,
    /// This message completed the history.
    pub completed_history: bool,
}

/// One subscription's accounting.
#[derive(Clone, Debug)]
pub struct ChannelHistory {
    /// The first owed sequence.
    from: u64,
    /// One past the last owed sequence: what had been sent when the subscription was asked.
    to: u64,
    /// Owed sequences that arrived, by offset from `from`.
    arrived: Vec<bool>,
    missing: u64,
    answered: bool,
    /// Messages older than the window.
    pub older: u64,
    /// Messages that arrived more than once.
    pub repeated: u64,
    /// Live messages seen (each sequence once).
    pub live: u64,
    last_live: Option<u64>,
}

impl ChannelHistory {
    /// `sent` messages were out when the subscription was asked; the last `history` of them
    /// are owed.
    pub fn new(sent: u64, history: u64) -> Self {
        let from = sent.saturating_sub(history);
        let owed = (sent - from) as usize;
        ChannelHistory {
            from,
            to: sent,
            arrived: vec![false; owed],
            missing: owed as u64,
            answered: false,
            older: 0,
            repeated: 0,
            live: 0,
            last_live: None,
        }
    }

    /// How many messages are owed.
    pub fn owed(&self) -> u64 {
        self.to - self.from
    }

    /// Owed messages that have not arrived.
    pub fn missing(&self) -> u64 {
        self.missing
    }

    pub fn is_complete(&self) -> bool {
        self.missing == 0
    }

    /// Message `sequence` arrived.
    pub fn record(&mut self, sequence: u64) -> Arrival {
        let first = !self.answered;
        self.answered = true;
        let mut arrival = Arrival {
            first,
            live: false,
            older: false,
            completed_history: false,
        };
        if sequence >= self.to {
            // Groups arrive on their own streams, so live messages may come out of order;
            // repeats are rare and only counted when the same highest one comes again.
            if self.last_live == Some(sequence) {
                self.repeated += 1;
            } else {
                self.live += 1;
                self.last_live = Some(self.last_live.map_or(sequence, |l| l.max(sequence)));
            }
            arrival.live = true;
        } else if sequence < self.from {
            self.older += 1;
            arrival.older = true;
        } else {
            let slot = &mut self.arrived[(sequence - self.from) as usize];
            if *slot {
                self.repeated += 1;
            } else {
                *slot = true;
                self.missing -= 1;
                arrival.completed_history = self.missing == 0;
            }
        }
        arrival
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_h_sent_messages_are_owed() {
        let history = ChannelHistory::new(12, 5);
        assert_eq!(history.owed(), 5);
        assert_eq!(history.missing(), 5);
        // Fewer sent than the window: all of them.
        assert_eq!(ChannelHistory::new(3, 5).owed(), 3);
        // Nothing sent: nothing owed, complete from the start.
        assert!(ChannelHistory::new(0, 5).is_complete());
    }

    #[test]
    fn history_completes_on_the_last_owed_message_in_any_order() {
        let mut history = ChannelHistory::new(10, 3); // owed 7, 8, 9
        let a = history.record(9);
        assert!(a.first && !a.live && !a.completed_history);
        assert!(!history.record(7).completed_history);
        let last = history.record(8);
        assert!(last.completed_history && !last.first);
        assert!(history.is_complete());
    }

    #[test]
    fn older_repeated_and_live_messages_never_complete_history() {
        let mut history = ChannelHistory::new(10, 2); // owed 8, 9
        assert!(!history.record(3).completed_history); // older than the window
        assert!(!history.record(8).completed_history);
        assert!(!history.record(8).completed_history); // repeat
        let live = history.record(10);
        assert!(live.live && !live.completed_history);
        assert_eq!((history.older, history.repeated, history.live), (1, 1, 1));
        assert_eq!(history.missing(), 1);
        assert!(history.record(9).completed_history);
    }

    #[test]
    fn the_first_message_answers_even_when_it_is_live() {
        let mut history = ChannelHistory::new(4, 2);
        let a = history.record(4);
        assert!(a.first && a.live);
        assert!(!history.record(5).first);
    }

    #[test]
    fn live_messages_out_of_order_count_once_each() {
        let mut history = ChannelHistory::new(0, 0);
        for sequence in [2, 1, 3, 3] {
            history.record(sequence);
        }
        assert_eq!(history.live, 3);
        assert_eq!(history.repeated, 1);
    }
}
