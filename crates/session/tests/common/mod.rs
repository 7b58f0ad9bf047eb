//! Test harness: publishers, a relay and subscribers wired over the in-memory transport.

#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use starling_model::{
    BroadcastProducer, Frame, Limits, Origin, Route, RouteHandle, StartAt, TrackConsumer,
    TrackInfo, TrackProducer,
};
use starling_proto::{Path, Protocol, Version};
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
        version: impl Into<Protocol>,
        config: SessionConfig,
    ) -> (Session<MemTransport>, Session<MemTransport>) {
        let (session, relay_side, _) = self.connect_raw(version, config).await;
        (session, relay_side)
    }

    /// Like `connect`, also returning the client's transport.
    pub async fn connect_raw(
        &self,
        version: impl Into<Protocol>,
        config: SessionConfig,
    ) -> (Session<MemTransport>, Session<MemTransport>, MemTransport) {
        self.connect_with(version, config, |_| {}).await
    }

    /// Like `connect_raw`, adjusting the relay side's config first.
    pub async fn connect_with(
        &self,
        version: impl Into<Protocol>,
        config: SessionConfig,
        relay_side: impl FnOnce(&mut SessionConfig) + Send + 'static,
    ) -> (Session<MemTransport>, Session<MemTransport>, MemTransport) {
        let protocol = version.into();
        let (client, server) = pair();
        let transport = client.clone();
        let relay = self.clone();
        let accept = tokio::spawn(async move {
            // lite-01/02 are chosen in band, the others by the (here implied) protocol.
            let accepting = match protocol {
                Protocol::Lite(version) if version.negotiates_in_band() => {
                    Accepting::legacy(server, &[version], TIMEOUT).await
                }
                Protocol::Lite(version) => Accepting::new(server, version, TIMEOUT).await,
                Protocol::Ietf(draft) => Accepting::ietf(server, draft, TIMEOUT).await,
            }
            .unwrap();
            let mut config = SessionConfig::new(relay.hop);
            config.publish = Some(relay.origin.clone());
            config.consume = Some(relay.origin.clone());
            relay_side(&mut config);
            accepting.start(config).await.unwrap()
        });
        let session = Session::connect_negotiated(
            client,
            protocol.alpn(),
            &Protocol::lite(&[protocol]),
            ClientSetup::default(),
            config,
        )
        .await
        .unwrap();
        (session, accept.await.unwrap(), transport)
    }
}

/// A client publishing one broadcast with the given tracks.
pub struct Publisher {
    pub origin: Origin,
    pub broadcast: BroadcastProducer,
    pub route: RouteHandle,
    pub tracks: Vec<TrackProducer>,
    pub session: Session<MemTransport>,
    /// The publisher's end of its connection, for tests that inject raw traffic.
    pub transport: MemTransport,
}

pub async fn publisher(
    relay: &Relay,
    version: impl Into<Protocol>,
    name: &str,
    tracks: &[&str],
) -> Publisher {
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
    let (session, _, transport) = relay.connect_raw(version, config).await;
    Publisher {
        origin,
        broadcast,
        route,
        tracks,
        session,
        transport,
    }
}

/// A client that hears announcements into its own origin.
pub struct Subscriber {
    pub origin: Origin,
    pub session: Session<MemTransport>,
    pub relay_side: Session<MemTransport>,
}

pub async fn subscriber(relay: &Relay, version: impl Into<Protocol>) -> Subscriber {
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
    /// Wait until `name` is announced, then read `track` from it at the live edge.
    pub async fn track(&self, name: &str, track: &str) -> TrackConsumer {
        self.track_from(name, track, Default::default()).await
    }

    /// Wait until `name` is announced, then read `track` from it at `start`.
    pub async fn track_from(&self, name: &str, track: &str, start: StartAt) -> TrackConsumer {
        self.announced(name)
            .await
            .subscribe_track(track, start)
            .expect("subscribe")
    }

    /// Wait until `name` is announced to this subscriber.
    pub async fn announced(&self, name: &str) -> starling_model::BroadcastConsumer {
        let interest = self.origin.interest(Path::empty()).unwrap();
        let mut changed = Vec::new();
        loop {
            if let Some(b) = self.origin.consume(&path(name), None) {
                return b;
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

/// Append a group holding the one frame `payload` at `ts`, and finish it.
pub fn write_group(track: &TrackProducer, ts: u64, payload: &str) {
    let mut group = track.append_group().unwrap();
    group.write_frame(frame(ts, payload)).unwrap();
    group.finish();
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

/// A hand-driven client: its SETUP is sent, the relay side is running; the caller writes raw
/// streams on the returned transport.
pub async fn raw_client(
    relay: &Relay,
    version: Version,
    role: starling_proto::Role,
    configure: impl FnOnce(&mut SessionConfig),
) -> (MemTransport, Session<MemTransport>) {
    use bytes::BufMut;
    use starling_transport::{SendStream, Transport};
    let (client, server) = pair();
    let mut config = SessionConfig::new(relay.hop);
    config.publish = Some(relay.origin.clone());
    configure(&mut config);
    let accept = tokio::spawn(async move {
        let accepting = Accepting::new(server, version, TIMEOUT).await.unwrap();
        accepting.start(config).await.unwrap()
    });
    let mut setup = starling_proto::Setup::new();
    setup.set_hop(Some(random_hop())).unwrap();
    setup.set_role(Some(role));
    let mut bytes = bytes::BytesMut::new();
    bytes.put_u8(0x01);
    starling_proto::encode_message(&setup, version, &mut bytes).unwrap();
    let mut uni = client.open_uni().await.unwrap();
    uni.write(bytes.freeze()).await.unwrap();
    uni.finish().unwrap();
    (client, accept.await.unwrap())
}

/// The bytes of a subscribe stream's opening: type, then SUBSCRIBE at the live edge.
pub fn subscribe_bytes(
    version: Version,
    id: u64,
    broadcast: &str,
    track: &str,
    priority: u8,
) -> bytes::Bytes {
    use bytes::BufMut;
    let mut bytes = bytes::BytesMut::new();
    bytes.put_u8(0x02);
    starling_proto::encode_message(
        &starling_proto::Subscribe {
            id,
            broadcast: path(broadcast),
            track: track.into(),
            priority,
            max_age_ms: 0,
            group_start: None,
            group_end: None,
            frame_start: 0,
            frame_end: None,
        },
        version,
        &mut bytes,
    )
    .unwrap();
    bytes.freeze()
}

/// Accept the relay's next group stream (skipping its SETUP stream) and read its header.
pub async fn next_group_stream(
    client: &MemTransport,
    version: Version,
) -> (
    starling_transport::mem::MemRecv,
    starling_proto::GroupHeader,
) {
    let (stream, header, _) = next_group_stream_with_rest(client, version).await;
    (stream, header)
}

/// `next_group_stream`, also returning the bytes read past the header.
pub async fn next_group_stream_with_rest(
    client: &MemTransport,
    version: Version,
) -> (
    starling_transport::mem::MemRecv,
    starling_proto::GroupHeader,
    bytes::BytesMut,
) {
    use starling_transport::{RecvStream, Transport};
    loop {
        let mut stream = tokio::time::timeout(TIMEOUT, client.accept_uni())
            .await
            .expect("a stream from the relay")
            .unwrap();
        let mut head = bytes::BytesMut::new();
        loop {
            let chunk = stream.read(1 << 20).await.unwrap().expect("stream data");
            head.extend_from_slice(&chunk);
            if head[0] == 0x01 {
                break; // the relay's SETUP stream
            }
            let mut rest = bytes::BytesMut::from(&head[1..]);
            if let Some(header) =
                starling_proto::decode_message::<starling_proto::GroupHeader>(&mut rest, version)
                    .unwrap()
            {
                return (stream, header, rest);
            }
        }
    }
}

/// Read a group stream's frames to its FIN: (timestamp, payload) pairs.
pub async fn read_frames(
    stream: &mut starling_transport::mem::MemRecv,
    mut buf: bytes::BytesMut,
    version: Version,
) -> Vec<(u64, String)> {
    use starling_transport::RecvStream;
    let mut out = Vec::new();
    let mut timestamp = 0u64;
    let mut fin = false;
    loop {
        while let Some((header, n)) =
            starling_proto::peek_frame_header(&buf, version, 1 << 20).unwrap()
        {
            if buf.len() < n + header.size as usize {
                break;
            }
            let _ = buf.split_to(n);
            let payload = buf.split_to(header.size as usize);
            timestamp = timestamp
                .checked_add_signed(header.timestamp_delta)
                .unwrap();
            out.push((timestamp, String::from_utf8(payload.to_vec()).unwrap()));
        }
        if fin {
            assert!(buf.is_empty(), "a frame cut short by FIN");
            return out;
        }
        match tokio::time::timeout(TIMEOUT, stream.read(1 << 20))
            .await
            .unwrap()
            .unwrap()
        {
            Some(chunk) => buf.extend_from_slice(&chunk),
            None => fin = true,
        }
    }
}

/// An announce interest's stream opening: type, then ANNOUNCE_REQUEST for everything.
pub fn announce_request_bytes(version: Version) -> bytes::Bytes {
    use bytes::BufMut;
    let mut request = bytes::BytesMut::new();
    request.put_u8(0x01);
    starling_proto::encode_message(
        &starling_proto::AnnounceRequest {
            prefix: Path::empty(),
            exclude_hop: 0,
            hidden: false,
        },
        version,
        &mut request,
    )
    .unwrap();
    request.freeze()
}
