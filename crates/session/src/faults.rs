//! Bugs planted on purpose, for the simulation to show it finds them (feature `faults`, off
//! in every build but that test's). A fault is planted per thread: the simulation runs a
//! relay mesh on one thread, and only that thread's sessions misbehave.

use std::cell::Cell;

/// A bug the session can be told to have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// When what carried a peer's announcements ends (its announce stream or namespace
    /// request: the peer crashed or its link was cut), the routes it announced stay in the
    /// origin (`hearing.rs`).
    KeepRoutesOfLostPeers,
}

thread_local! {
    static PLANTED: Cell<Option<Fault>> = const { Cell::new(None) };
}

/// Plant `fault` in the sessions this thread runs from now on (`None` clears it).
pub fn plant(fault: Option<Fault>) {
    PLANTED.with(|planted| planted.set(fault));
}

/// Whether `fault` is planted on this thread.
pub(crate) fn planted(fault: Fault) -> bool {
    PLANTED.with(|planted| planted.get() == Some(fault))
}
