//! Serving a peer's announce interest: the live routes under its prefix, then each change, in
//! its version's form (`announce_wire`; docs/wire.md §4.2–4.4).

use starling_model::entropy::Map;
use std::sync::Arc;

use starling_model::{Announced, Origin};
use starling_proto::{AnnounceRequest, Path, RouteCost};
use starling_transport::Transport;

use super::announce_wire::AnnounceWire;
use crate::error::Error;
use crate::reader::Reader;
use crate::shared::Shared;
use crate::writer::Writer;

/// What we last told the peer about one path.
struct Sent {
    id: u64,
    hops: Arc<[u64]>,
    cost: RouteCost,
}

pub(crate) async fn announce<T: Transport>(
    shared: &Arc<Shared<T>>,
    reader: &mut Reader<T::Recv>,
    writer: &mut Writer<T::Send>,
) -> Result<(), Error> {
    let limits = &shared.config.limits;
    let request = reader
        .message::<AnnounceRequest>(limits.max_control_message)
        .await?
        .ok_or(Error::Stream(starling_proto::StreamCode::Cancelled))?;
    let _slot = shared
        .take_slot(
            &shared.announce_interests,
            limits.max_announce_interests,
            crate::Held::Interest,
        )
        .ok_or(Error::Bound("announce interests"))?;

    let exclude = match shared.peer.exclude_hop() {
        Some(hop) => Some(hop),
        None => (request.exclude_hop != 0).then_some(request.exclude_hop),
    };
    let allowed = shared.config.may_subscribe_under(&request.prefix);
    let (true, Some(origin), Ok(prefix)) = (
        allowed,
        shared.config.publish.clone(),
        shared.absolute(&request.prefix),
    ) else {
        // Nothing to offer (or a prefix outside what we can name): an empty opening, the
        // stream held.
        AnnounceWire::new(shared.version, shared.config.hop).open(writer, &[])?;
        writer.flush().await?;
        return reader.finished().await;
    };
    let view = View {
        origin,
        prefix,
        root: shared.config.root.clone(),
        access: shared.config.access.clone(),
        // A cluster peer hears every path; on lite-07 a requester opts in with its Hidden flag.
        show_hidden: shared.config.cluster_peer || request.hidden || has_hidden(&request.prefix),
        max_hops: shared.config.max_hops,
    };

    let interest = view.origin.interest(view.prefix.clone())?;
    let initial: Vec<Announced> = view
        .origin
        .announced_forwardable(&view.prefix, exclude, view.max_hops)
        .into_iter()
        .filter(|a| view.visible(&a.path))
        .collect();

    let mut sent: Map<Path, Sent> = Map::default();
    let mut next_id = 0u64;
    let mut wire = AnnounceWire::new(shared.version, shared.config.hop);
    let initial: Vec<_> = initial
        .into_iter()
        .filter_map(|a| wire.chain(&a).map(|hops| (view.suffix(&a.path), hops, a)))
        .collect();
    let suffixes: Vec<Path> = initial
        .iter()
        .map(|(suffix, _, _)| suffix.clone())
        .collect();
    wire.open(writer, &suffixes)?;
    for (suffix, hops, announced) in initial {
        wire.start(writer, &suffix, hops, &announced, true)?;
        sent.insert(
            announced.path.clone(),
            Sent {
                id: next_id,
                hops: announced.route.hops.clone(),
                cost: announced.route.cost,
            },
        );
        next_id += 1;
    }
    writer.flush().await?;

    // A change of a path's best route goes out as one UPDATE once the path has been quiet
    // for the hold (a burst of changes is one UPDATE); a new path or a withdrawn one goes out
    // at once.
    let hold = limits.announce_update_hold;
    let mut held: Map<Path, tokio::time::Instant> = Map::default();
    let mut changed = Vec::new();
    loop {
        let due = held.values().min().copied();
        tokio::select! {
            biased;
            done = reader.finished() => {
                // The peer FIN'd (stop listening) or sent bytes after its request.
                return done;
            }
            _ = interest.changed(&mut changed) => {
                for path in changed.drain(..) {
                    if !view.visible(&path) {
                        continue;
                    }
                    let current = view.origin.forwardable(&path, exclude, view.max_hops);
                    let suffix = view.suffix(&path);
                    match (current, sent.get(&path)) {
                        (None, None) => {}
                        (None, Some(old)) => {
                            wire.end(writer, &suffix, old.id)?;
                            sent.remove(&path);
                            held.remove(&path);
                        }
                        (Some(now), None) => {
                            if let Some(hops) = wire.chain(&now) {
                                wire.start(writer, &suffix, hops, &now, false)?;
                                sent.insert(path, Sent { id: next_id, hops: now.route.hops, cost: now.route.cost });
                                next_id += 1;
                            }
                        }
                        (Some(_), Some(_)) if hold.is_zero() => {
                            update(writer, &mut wire, &view, &mut sent, &path, exclude)?;
                        }
                        (Some(_), Some(_)) => {
                            held.entry(path).or_insert_with(|| tokio::time::Instant::now() + hold);
                        }
                    }
                }
                writer.flush().await?;
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
                    update(writer, &mut wire, &view, &mut sent, &path, exclude)?;
                }
                writer.flush().await?;
            }
        }
    }
}

/// Tell the peer `path`'s best route now, as an UPDATE on its id, unless it is what the peer
/// already has (or the path is gone, which its END already said). A route that can no longer
/// be sent to this peer (before 05: now a reflection, or no room for our hop) is ended.
fn update<S: starling_transport::SendStream>(
    writer: &mut Writer<S>,
    wire: &mut AnnounceWire,
    view: &View,
    sent: &mut Map<Path, Sent>,
    path: &Path,
    exclude: Option<u64>,
) -> Result<(), Error> {
    let (Some(now), Some(old)) = (
        view.origin.forwardable(path, exclude, view.max_hops),
        sent.get(path),
    ) else {
        return Ok(());
    };
    if old.hops == now.route.hops && old.cost == now.route.cost {
        return Ok(());
    }
    let id = old.id;
    let suffix = view.suffix(path);
    let Some(hops) = wire.chain(&now) else {
        wire.end(writer, &suffix, id)?;
        sent.remove(path);
        return Ok(());
    };
    if !wire.tells_updates() {
        return Ok(());
    }
    wire.update(writer, &suffix, id, hops, &now)?;
    sent.insert(
        path.clone(),
        Sent {
            id,
            hops: now.route.hops,
            cost: now.route.cost,
        },
    );
    Ok(())
}

pub(crate) struct View {
    pub origin: Origin,
    pub prefix: Path,
    pub root: Path,
    pub access: Option<std::sync::Arc<dyn crate::config::Access>>,
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
