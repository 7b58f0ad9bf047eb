//! Test harness: publishers, a relay and subscribers wired over the in-memory transport.

#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use starling_model::{
    BroadcastProducer, Frame, Limits, Origin, Route, RouteHandle, TrackConsumer, TrackInfo,
    TrackProducer,
};
use starling_proto::{Path, Version};
use starling_session::{random_hop, Accepting, ClientSetup, Session, SessionConfig};
use starling_transport::mem::{pair, MemTransport};

pub const TIMEOUT: Duration = Duration::from_secs(10);

pub fn path(s: &str) -> Path {
    Path::new(s).unwrap()
}

/// A relay: one origin shared by every session it accepts.
#[derive(Clone)]
pub struct Relay {
    pub origin: Origin,
    pub hop: u64,
}

impl Relay {
    pub fn new() -> Self {
        Relay {
            origin: Origin::new(),
            hop: random_hop(),
        }
    }

    /// Connect a client with `config` to this relay over a fresh in-memory pair.
    pub async fn connect(
        &self,
        version: Version,
        config: SessionConfig,
    ) -> (Session<MemTransport>, Session<MemTransport>) {
        let (client, server) = pair();
        let relay = self.clone();
        let accept = tokio::spawn(async move {
            let accepting = Accepting::new(server, version, TIMEOUT).await.unwrap();
            let mut config = SessionConfig::new(relay.hop);
            config.publish = Some(relay.origin.clone());
            config.consume = Some(relay.origin.clone());
            accepting.start(config).await.unwrap()
        });
        let session = Session::connect(client, version, ClientSetup::default(), config)
            .await
            .unwrap();
        (session, accept.await.unwrap())
    }
}

/// A client publishing one broadcast with the given tracks.
pub struct Publisher {
    pub origin: Origin,
    pub broadcast: BroadcastProducer,
    pub route: RouteHandle,
    pub tracks: Vec<TrackProducer>,
    pub session: Session<MemTransport>,
}

pub async fn publisher(relay: &Relay, version: Version, name: &str, tracks: &[&str]) -> Publisher {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new(Limits::default());
    let tracks = tracks
        .iter()
        .map(|t| broadcast.create_track(t, TrackInfo::default()))
        .collect();
    let route = origin
        .publish(path(name), broadcast.consume(), Route::local())
        .unwrap();
    let mut config = SessionConfig::new(random_hop());
    config.publish = Some(origin.clone());
    let (session, _) = relay.connect(version, config).await;
    Publisher {
        origin,
        broadcast,
        route,
        tracks,
        session,
    }
}

/// A client that hears announcements into its own origin.
pub struct Subscriber {
    pub origin: Origin,
    pub session: Session<MemTransport>,
    pub relay_side: Session<MemTransport>,
}

pub async fn subscriber(relay: &Relay, version: Version) -> Subscriber {
    let origin = Origin::new();
    let mut config = SessionConfig::new(random_hop());
    config.consume = Some(origin.clone());
    let (session, relay_side) = relay.connect(version, config).await;
    Subscriber {
        origin,
        session,
        relay_side,
    }
}

impl Subscriber {
    /// Wait until `name` is announced, then read `track` from it.
    pub async fn track(&self, name: &str, track: &str) -> TrackConsumer {
        let interest = self.origin.interest(Path::empty()).unwrap();
        let mut changed = Vec::new();
        loop {
            if let Some(b) = self.origin.consume(&path(name), None) {
                return b
                    .subscribe_track(track, Default::default())
                    .expect("subscribe");
            }
            tokio::time::timeout(TIMEOUT, interest.changed(&mut changed))
                .await
                .expect("announce");
        }
    }
}

pub fn frame(ts: u64, payload: &str) -> Frame {
    Frame {
        timestamp: ts,
        payload: Bytes::copy_from_slice(payload.as_bytes()),
    }
}

/// Read a whole group's payloads.
pub async fn read_group(track: &mut TrackConsumer) -> (u64, Vec<String>) {
    let mut group = tokio::time::timeout(TIMEOUT, track.next_group())
        .await
        .expect("group in time")
        .expect("group ok")
        .expect("track open");
    let mut out = Vec::new();
    while let Some(f) = tokio::time::timeout(TIMEOUT, group.next_frame())
        .await
        .expect("frame in time")
        .expect("frame ok")
    {
        out.push(String::from_utf8(f.payload.to_vec()).unwrap());
    }
    (group.sequence(), out)
}
