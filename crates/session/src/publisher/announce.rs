//! Serving a peer's lite announce interest: its request, then the announcing engine
//! (`announcing.rs`) telling it the live routes under its prefix and each change on the
//! announce stream, in its version's form (`announce_wire`; docs/wire.md §4.2–4.4).

use starling_model::entropy::Map;
use std::sync::Arc;

use starling_model::Announced;
use starling_proto::{AnnounceRequest, Path, RouteCost};
use starling_transport::Transport;

use super::announce_wire::AnnounceWire;
use crate::announcing::{has_hidden, Teller, View};
use crate::error::Error;
use crate::reader::Reader;
use crate::shared::Shared;
use crate::writer::Writer;

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
    let mut teller = LiteTeller::<T> {
        reader,
        writer,
        wire: AnnounceWire::new(shared.version, shared.config.hop),
        view: &view,
        sent: Map::default(),
        next_id: 0,
    };
    crate::announcing::tell(&mut teller, &view, exclude, limits.announce_update_hold).await
}

/// What we last told the peer about one path.
struct Sent {
    id: u64,
    hops: Arc<[u64]>,
    cost: RouteCost,
}

/// One announce stream we serve, as the announcing engine drives it.
struct LiteTeller<'a, T: Transport> {
    reader: &'a mut Reader<T::Recv>,
    writer: &'a mut Writer<T::Send>,
    wire: AnnounceWire,
    view: &'a View,
    /// By absolute path.
    sent: Map<Path, Sent>,
    next_id: u64,
}

impl<T: Transport> LiteTeller<'_, T> {
    fn started(&mut self, announced: &Announced) {
        self.sent.insert(
            announced.path.clone(),
            Sent {
                id: self.next_id,
                hops: announced.route.hops.clone(),
                cost: announced.route.cost,
            },
        );
        self.next_id += 1;
    }
}

impl<T: Transport> Teller for LiteTeller<'_, T> {
    async fn open(&mut self, live: Vec<Announced>) -> Result<(), Error> {
        let live: Vec<_> = live
            .into_iter()
            .filter_map(|a| {
                self.wire
                    .chain(&a)
                    .map(|hops| (self.view.suffix(&a.path), hops, a))
            })
            .collect();
        let suffixes: Vec<Path> = live.iter().map(|(suffix, _, _)| suffix.clone()).collect();
        self.wire.open(self.writer, &suffixes)?;
        for (suffix, hops, announced) in live {
            self.wire
                .start(self.writer, &suffix, hops, &announced, true)?;
            self.started(&announced);
        }
        Ok(())
    }

    fn told(&self, path: &Path) -> bool {
        self.sent.contains_key(path)
    }

    async fn start(&mut self, now: &Announced) -> Result<(), Error> {
        if let Some(hops) = self.wire.chain(now) {
            let suffix = self.view.suffix(&now.path);
            self.wire.start(self.writer, &suffix, hops, now, false)?;
            self.started(now);
        }
        Ok(())
    }

    /// Tell the peer the path's best route now, as an UPDATE on its id, unless it is what the
    /// peer already has. A route that can no longer be sent to this peer (before 05: now a
    /// reflection, or no room for our hop) is ended.
    async fn update(&mut self, now: &Announced) -> Result<(), Error> {
        let Some(old) = self.sent.get(&now.path) else {
            return Ok(());
        };
        if old.hops == now.route.hops && old.cost == now.route.cost {
            return Ok(());
        }
        let id = old.id;
        let suffix = self.view.suffix(&now.path);
        let Some(hops) = self.wire.chain(now) else {
            self.wire.end(self.writer, &suffix, id)?;
            self.sent.remove(&now.path);
            return Ok(());
        };
        if !self.wire.tells_updates() {
            return Ok(());
        }
        self.wire.update(self.writer, &suffix, id, hops, now)?;
        self.sent.insert(
            now.path.clone(),
            Sent {
                id,
                hops: now.route.hops.clone(),
                cost: now.route.cost,
            },
        );
        Ok(())
    }

    async fn end(&mut self, path: &Path) -> Result<(), Error> {
        if let Some(old) = self.sent.remove(path) {
            self.wire
                .end(self.writer, &self.view.suffix(path), old.id)?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Error> {
        self.writer.flush().await
    }

    /// The peer FIN'd (stop listening) or sent bytes after its request.
    async fn stopped(&mut self) -> Result<(), Error> {
        self.reader.finished().await
    }

    fn close(&mut self) {}
}
