//! Telling a peer what the origin holds under its interest, whatever the wire: the routes live
//! when the interest begins, then every change (a new path at once, a withdrawn one at once, a
//! changed route once its path has been quiet for the hold, so a burst of changes is told
//! once), until the peer stops listening. Each family says it its own way through a
//! [`Teller`]: lite's in `publisher/announce.rs` (one announce stream, its version's
//! messages), the drafts' in `ietf/announce.rs` (NAMESPACE on the request, or a
//! PUBLISH_NAMESPACE request per broadcast).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use starling_model::entropy::Map;
use starling_model::{Announced, Origin};
use starling_proto::Path;

use crate::error::Error;

/// What the peer asked to hear, as we may show it.
pub(crate) struct View {
    pub origin: Origin,
    /// The absolute prefix of the interest.
    pub prefix: Path,
    /// The session's root (what the peer's grant is relative to).
    pub root: Path,
    pub access: Option<Arc<dyn crate::config::Access>>,
    pub show_hidden: bool,
    /// Routes of this many hops or more are not offered: the receiver's append would not fit
    /// (cluster statement 7).
    pub max_hops: usize,
}

impl View {
    pub fn suffix(&self, path: &Path) -> Path {
        path.strip_prefix(&self.prefix).unwrap_or_else(Path::empty)
    }

    /// Hidden (dot-segment) paths below the requested prefix are not announced (docs/wire.md §4.2).
    pub fn visible(&self, path: &Path) -> bool {
        let permitted = self.access.as_ref().is_none_or(|access| {
            path.strip_prefix(&self.root)
                .is_some_and(|wire| access.can_subscribe(&wire))
        });
        permitted && (self.show_hidden || !has_hidden(&self.suffix(path)))
    }
}

pub(crate) fn has_hidden(path: &Path) -> bool {
    path.segments().any(|s| s.starts_with('.'))
}

/// One family's way of telling a peer about routes.
pub(crate) trait Teller: Send {
    /// Tell the routes live as the interest begins (lite's opening names them together).
    fn open(&mut self, live: Vec<Announced>) -> impl Future<Output = Result<(), Error>> + Send;
    /// Whether `path` was told and not ended since.
    fn told(&self, path: &Path) -> bool;
    /// A path not told gained a route.
    fn start(&mut self, now: &Announced) -> impl Future<Output = Result<(), Error>> + Send;
    /// A told path's best route may have changed.
    fn update(&mut self, now: &Announced) -> impl Future<Output = Result<(), Error>> + Send;
    /// A path lost its last route (told or not).
    fn end(&mut self, path: &Path) -> impl Future<Output = Result<(), Error>> + Send;
    /// Put out what the last changes queued.
    fn flush(&mut self) -> impl Future<Output = Result<(), Error>> + Send;
    /// Resolves when the peer stops listening (`Ok` for a clean stop). Cancel-safe.
    fn stopped(&mut self) -> impl Future<Output = Result<(), Error>> + Send;
    /// The interest ended: forget what was told.
    fn close(&mut self);
}

/// Follow `view` for the peer through `teller` until it stops listening. Routes through
/// `exclude` (the peer's own hop) are not offered; `hold` quiets route changes.
pub(crate) async fn tell(
    teller: &mut impl Teller,
    view: &View,
    exclude: Option<u64>,
    hold: Duration,
) -> Result<(), Error> {
    let result = follow(teller, view, exclude, hold).await;
    teller.close();
    result
}

async fn follow(
    teller: &mut impl Teller,
    view: &View,
    exclude: Option<u64>,
    hold: Duration,
) -> Result<(), Error> {
    // Registered before the look, so no change between the two is missed.
    let interest = view.origin.interest(view.prefix.clone())?;
    let live: Vec<Announced> = view
        .origin
        .announced_forwardable(&view.prefix, exclude, view.max_hops)
        .into_iter()
        .filter(|a| view.visible(&a.path))
        .collect();
    teller.open(live).await?;
    teller.flush().await?;

    let mut held: Map<Path, tokio::time::Instant> = Map::default();
    let mut changed = Vec::new();
    loop {
        let due = held.values().min().copied();
        tokio::select! {
            biased;
            stopped = teller.stopped() => return stopped,
            _ = interest.changed(&mut changed) => {
                for path in changed.drain(..) {
                    if !view.visible(&path) {
                        continue;
                    }
                    let now = view.origin.forwardable(&path, exclude, view.max_hops);
                    match (now, teller.told(&path)) {
                        (None, _) => {
                            teller.end(&path).await?;
                            held.remove(&path);
                        }
                        (Some(now), false) => teller.start(&now).await?,
                        (Some(now), true) if hold.is_zero() => teller.update(&now).await?,
                        (Some(_), true) => {
                            held.entry(path).or_insert_with(|| tokio::time::Instant::now() + hold);
                        }
                    }
                }
                teller.flush().await?;
            }
            _ = async { tokio::time::sleep_until(due.expect("guarded")).await }, if due.is_some() => {
                let now = tokio::time::Instant::now();
                let ready: Vec<Path> = held
                    .iter()
                    .filter(|(_, at)| **at <= now)
                    .map(|(path, _)| path.clone())
                    .collect();
                for path in ready {
                    held.remove(&path);
                    // Gone meanwhile: its END already went out.
                    if let Some(now) = view.origin.forwardable(&path, exclude, view.max_hops) {
                        if teller.told(&path) {
                            teller.update(&now).await?;
                        }
                    }
                }
                teller.flush().await?;
            }
        }
    }
}
