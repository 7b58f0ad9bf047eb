//! The dash shape: a stats aggregator on relay 0 following every node's stats across a full
//! relay mesh.
//!
//! Relays 1..R are the nodes. Each publishes, locally in its own origin, one hidden broadcast
//! `.stats/<project>/node/<node>` per project with `tracks` tracks. Relay 0 hosts the "dash": a
//! client session that asks relay 0 for announcements under `.stats` and subscribes to every
//! track of every node's broadcast, so each subscription crosses node -> relay 0 (cluster peer)
//! -> dash. A tick writes one single-frame 128-byte group on every track and returns once the
//! dash has read one group from every track; setup (mesh, announces, subscriptions) happens
//! before the first tick.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use starling_model::{
    BroadcastProducer, Frame, Origin, Route, RouteHandle, StartAt, TrackConsumer, TrackInfo,
    TrackProducer,
};
use starling_proto::{Path, Protocol, SessionCode};
use starling_session::{random_hop, Session, SessionConfig};
use starling_transport::mem::MemTransport;
use tokio::task::JoinHandle;

use crate::mesh::{cache_limits, session_limits, Mesh};
use crate::routes::wait_routes;
use crate::{Error, Tally};

/// Payload bytes of every stats frame.
pub const STATS_BYTES: usize = 128;

/// A dash topology's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DashShape {
    /// Relays in the mesh, the dash's relay 0 included; the other `relays - 1` are nodes.
    pub relays: usize,
    /// Stats broadcasts per node (one per project).
    pub projects: usize,
    /// Tracks per stats broadcast.
    pub tracks: usize,
    /// The version every link speaks.
    pub version: Protocol,
}

impl DashShape {
    pub fn nodes(&self) -> usize {
        self.relays.saturating_sub(1)
    }

    /// Tracks the dash follows: nodes × projects × tracks.
    pub fn total_tracks(&self) -> usize {
        self.nodes() * self.projects * self.tracks
    }
}

/// One node's stats broadcast for one project.
struct Stats {
    _broadcast: BroadcastProducer,
    _route: RouteHandle,
    tracks: Vec<TrackProducer>,
}

/// A mesh with its nodes' stats and a dash following all of them.
pub struct Dash {
    shape: DashShape,
    mesh: Mesh,
    stats: Vec<Stats>,
    session: Session<MemTransport>,
    _origin: Origin,
    readers: Vec<JoinHandle<()>>,
    tally: Arc<Tally>,
    payload: Bytes,
    ticks: u64,
}

impl Dash {
    /// Build the mesh, publish the stats, connect the dash, subscribe every track and run the
    /// first tick, so every subscription is live when this returns.
    pub async fn setup(shape: DashShape) -> Result<Self, Error> {
        if shape.nodes() == 0 || shape.projects == 0 || shape.tracks == 0 {
            return Err(Error::Shape("a dash needs nodes, projects and tracks"));
        }
        let mut mesh = Mesh::full(shape.relays, shape.version).await?;

        let mut stats = Vec::with_capacity(shape.nodes() * shape.projects);
        let mut paths = Vec::with_capacity(shape.nodes() * shape.projects);
        let mut node_hops = Vec::with_capacity(paths.capacity());
        for node in 1..shape.relays {
            let relay = &mesh.relays[node];
            for project in 0..shape.projects {
                let path = Path::new(&format!(".stats/p{project}/node/n{node}"))?;
                let broadcast = BroadcastProducer::new(cache_limits());
                let tracks = (0..shape.tracks)
                    .map(|t| broadcast.create_track(&track_name(t), TrackInfo::default()))
                    .collect();
                let route =
                    relay
                        .origin
                        .publish(path.clone(), broadcast.consume(), Route::local())?;
                stats.push(Stats {
                    _broadcast: broadcast,
                    _route: route,
                    tracks,
                });
                paths.push(path);
                node_hops.push(relay.hop);
            }
        }

        // Relay 0 must reach every node directly (chain = [node]) before the dash subscribes,
        // so no subscription settles on a transient route through a third relay.
        let owner: HashMap<&Path, u64> = paths.iter().zip(node_hops).collect();
        let direct = |path: &Path, hops: &[u64]| owner.get(path).is_some_and(|hop| hops == [*hop]);
        wait_routes(&mesh.relays[0].origin, &paths, direct).await?;

        let origin = Origin::new();
        let mut config = SessionConfig::new(random_hop());
        config.consume = Some(origin.clone());
        config.announce_prefixes = vec![Path::new(".stats")?];
        config.limits = session_limits();
        config.model_limits = cache_limits();
        let session = mesh.relays[0].accept(config).await?;
        wait_routes(&origin, &paths, |_, _| true).await?;

        let tally = Arc::new(Tally::new(shape.total_tracks()));
        let mut readers = Vec::with_capacity(shape.total_tracks());
        for path in &paths {
            let broadcast = origin.consume(path, None).ok_or(Error::Unannounced)?;
            for t in 0..shape.tracks {
                let track = broadcast
                    .subscribe_track(&track_name(t), StartAt::default())
                    .map_err(Error::Subscribe)?;
                let slot = readers.len();
                readers.push(tokio::spawn(follow(track, slot, tally.clone())));
            }
        }

        let mut dash = Dash {
            shape,
            mesh,
            stats,
            session,
            _origin: origin,
            readers,
            tally,
            payload: Bytes::from(vec![0xa5; STATS_BYTES]),
            ticks: 0,
        };
        dash.tick().await?;
        Ok(dash)
    }

    /// Write one single-frame group on every track, then wait until the dash read one group
    /// from every track.
    pub async fn tick(&mut self) -> Result<(), Error> {
        let timestamp = self.ticks * 1000;
        for stats in &self.stats {
            for track in &stats.tracks {
                let mut group = track.append_group()?;
                group.write_frame(Frame {
                    timestamp,
                    payload: self.payload.clone(),
                })?;
                group.finish();
            }
        }
        self.ticks += 1;
        self.tally
            .wait_for(self.ticks * self.readers.len() as u64)
            .await
    }

    pub fn shape(&self) -> DashShape {
        self.shape
    }

    /// Ticks run so far (each read on every track once `tick` returned).
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Stop the dash's readers and close every session.
    pub fn close(&mut self) {
        for reader in self.readers.drain(..) {
            reader.abort();
        }
        self.session.close(SessionCode::NoError, "bench over");
        self.mesh.close();
    }
}

fn track_name(index: usize) -> String {
    format!("t{index}")
}

/// The dash's reader of one track: one group per tick, in sequence, each a single 128-byte
/// frame, counted in `slot`.
async fn follow(mut track: TrackConsumer, slot: usize, tally: Arc<Tally>) {
    let mut next: Option<u64> = None;
    loop {
        let mut group = match track.next_group().await {
            Ok(Some(group)) => group,
            Ok(None) => return,
            Err(_) => return tally.error(),
        };
        if next.is_some_and(|n| n != group.sequence()) {
            tally.error();
        }
        next = Some(group.sequence() + 1);
        match group.next_frame().await {
            Ok(Some(frame)) if frame.payload.len() == STATS_BYTES => tally.add(slot),
            _ => return tally.error(),
        }
    }
}
