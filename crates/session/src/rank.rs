//! How much a stream's buffered bytes are worth keeping: the order in which the receive
//! budgets (per connection and relay-wide) evict incomplete units.

/// How much a reader's buffered bytes are worth keeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    /// A data stream whose header has not been decoded yet.
    Unknown,
    /// A group of a subscription with this priority.
    Data { priority: u8, sequence: u64 },
    /// A control or request stream.
    Control,
}
