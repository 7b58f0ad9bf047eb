//! One relay per fuzzing thread, built once on a paused current-thread runtime and met by
//! every input of that thread, as a long-lived relay meets its peers. The harness is taken
//! out of its slot while an input runs: an input that panics takes it with it, and the next
//! input builds a new one.

use std::cell::RefCell;
use std::future::Future;
use std::thread::LocalKey;

use tokio::runtime::Runtime;

/// The runtime and the relay every input of a thread meets.
pub(crate) struct Harness<R> {
    runtime: Runtime,
    pub(crate) relay: R,
}

/// Where a thread keeps its harness.
pub(crate) type Slot<R> = RefCell<Option<Harness<R>>>;

/// Run `step` with this thread's runtime and relay, starting the relay with `start` first
/// when the thread has none.
pub(crate) fn with_relay<R: 'static, T, S: Future<Output = R>>(
    slot: &'static LocalKey<Slot<R>>,
    start: impl FnOnce() -> S,
    step: impl FnOnce(&Runtime, &mut R) -> T,
) -> T {
    let mut harness = slot
        .with(|cell| cell.borrow_mut().take())
        .unwrap_or_else(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .expect("a runtime");
            let relay = runtime.block_on(start());
            Harness { runtime, relay }
        });
    let out = step(&harness.runtime, &mut harness.relay);
    slot.with(|cell| *cell.borrow_mut() = Some(harness));
    out
}
