//! Serving a peer's announce interest: ANNOUNCE_OK, then the live routes under its prefix as
//! they change (docs/wire.md §4.2–4.4; lite-05 status announcements, lite-06 typed with ids).

use std::collections::HashMap;
use std::sync::Arc;

use starling_model::{Announced, Origin};
use starling_proto::{
    Announce, AnnounceEncoder, AnnounceOk, AnnounceRequest, AnnounceStatus, Announcement, Hops,
    Path, RouteCost,
};
use starling_transport::Transport;

use crate::error::Error;
use crate::reader::Reader;
use crate::session::Shared;
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
    let _slot = Shared::<T>::take_slot(&shared.announce_interests, limits.max_announce_interests)
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
        // Nothing to offer (or a prefix outside what we can name): an empty OK, stream held.
        writer
            .message(&AnnounceOk {
                hop: shared.config.hop,
                active_count: 0,
            })
            .await?;
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

    let mut sent: HashMap<Path, Sent> = HashMap::new();
    let mut next_id = 0u64;
    // Lite-07 writes its announcements with references to the ones still live.
    let mut encoder = shared
        .version
        .has_announce_compression()
        .then(|| AnnounceEncoder::new(shared.version));
    writer.queue(&AnnounceOk {
        hop: shared.config.hop,
        active_count: initial.len() as u64,
    })?;
    for announced in initial {
        let suffix = view.suffix(&announced.path);
        queue_start(writer, &mut encoder, &suffix, &announced)?;
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
    let mut held: HashMap<Path, tokio::time::Instant> = HashMap::new();
    let mut changed = Vec::new();
    loop {
        let due = held.values().min().copied();
        tokio::select! {
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
                            queue_end(writer, &mut encoder, &suffix, old.id)?;
                            sent.remove(&path);
                            held.remove(&path);
                        }
                        (Some(now), None) => {
                            queue_start(writer, &mut encoder, &suffix, &now)?;
                            sent.insert(path, Sent { id: next_id, hops: now.route.hops, cost: now.route.cost });
                            next_id += 1;
                        }
                        (Some(_), Some(_)) if hold.is_zero() => {
                            update(writer, &mut encoder, &view, &mut sent, &path, exclude)?;
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
                    update(writer, &mut encoder, &view, &mut sent, &path, exclude)?;
                }
                writer.flush().await?;
            }
        }
    }
}

/// Tell the peer `path`'s best route now, as an UPDATE on its id, unless it is what the peer
/// already has (or the path is gone, which its END already said).
fn update<S: starling_transport::SendStream>(
    writer: &mut Writer<S>,
    encoder: &mut Option<AnnounceEncoder>,
    view: &View,
    sent: &mut HashMap<Path, Sent>,
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
    queue_update(writer, encoder, &view.suffix(path), id, &now)?;
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

struct View {
    origin: Origin,
    prefix: Path,
    root: Path,
    access: Option<std::sync::Arc<dyn crate::config::Access>>,
    show_hidden: bool,
    /// Routes of this many hops or more are not offered: the receiver's append would not fit
    /// (cluster statement 7).
    max_hops: usize,
}

impl View {
    fn suffix(&self, path: &Path) -> Path {
        path.strip_prefix(&self.prefix).unwrap_or_else(Path::empty)
    }

    /// Hidden (dot-segment) paths below the requested prefix are not announced (docs/wire.md §4.2).
    fn visible(&self, path: &Path) -> bool {
        let permitted = self.access.as_ref().is_none_or(|access| {
            path.strip_prefix(&self.root)
                .is_some_and(|wire| access.can_subscribe(&wire))
        });
        permitted && (self.show_hidden || !has_hidden(&self.suffix(path)))
    }
}

fn has_hidden(path: &Path) -> bool {
    path.segments().any(|s| s.starts_with('.'))
}

fn hops_of(announced: &Announced) -> Result<Hops, Error> {
    Hops::from_vec(announced.route.hops.to_vec()).map_err(|_| Error::Bound("hops"))
}

/// Queue a typed announcement (06+), through the stream's encoder on lite-07.
fn queue_announcement<S: starling_transport::SendStream>(
    writer: &mut Writer<S>,
    encoder: &mut Option<AnnounceEncoder>,
    announcement: &Announcement,
) -> Result<(), Error> {
    match encoder {
        Some(encoder) => writer.queue_typed(&encoder.compress(announcement)?),
        None => writer.queue_typed(announcement),
    }
}

fn queue_start<S: starling_transport::SendStream>(
    writer: &mut Writer<S>,
    encoder: &mut Option<AnnounceEncoder>,
    suffix: &Path,
    announced: &Announced,
) -> Result<(), Error> {
    let hops = hops_of(announced)?;
    if writer.version().has_announce_id() {
        let start = Announcement::Start {
            suffix: suffix.clone(),
            hops,
            cost: announced.route.cost,
        };
        queue_announcement(writer, encoder, &start)
    } else {
        writer.queue(&Announce {
            status: AnnounceStatus::Active,
            suffix: suffix.clone(),
            hops,
        })
    }
}

fn queue_update<S: starling_transport::SendStream>(
    writer: &mut Writer<S>,
    encoder: &mut Option<AnnounceEncoder>,
    suffix: &Path,
    id: u64,
    announced: &Announced,
) -> Result<(), Error> {
    let hops = hops_of(announced)?;
    if writer.version().has_announce_id() {
        let update = Announcement::Update {
            id,
            hops,
            cost: announced.route.cost,
        };
        queue_announcement(writer, encoder, &update)
    } else {
        // lite-05: a second Active for a live path is a restart.
        writer.queue(&Announce {
            status: AnnounceStatus::Active,
            suffix: suffix.clone(),
            hops,
        })
    }
}

fn queue_end<S: starling_transport::SendStream>(
    writer: &mut Writer<S>,
    encoder: &mut Option<AnnounceEncoder>,
    suffix: &Path,
    id: u64,
) -> Result<(), Error> {
    if writer.version().has_announce_id() {
        queue_announcement(writer, encoder, &Announcement::End { id })
    } else {
        writer.queue(&Announce {
            status: AnnounceStatus::Ended,
            suffix: suffix.clone(),
            hops: Hops::new(),
        })
    }
}
