//! The whole-relay simulation's world outside the relays: the switchboard that stands in for
//! the network (links with seeded delay and loss, crashes and partitions cutting what they
//! carry), the connector relays dial their peers through, clients on every wire, and tokens.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use rand::rngs::StdRng;
use rand::Rng;
use starling_auth::{Jwk, Key, Pattern};
use starling_netsim::link::{laggy_pair, Laggy, Link};
use starling_proto::{Protocol, SessionCode, Version};
use starling_relay::cluster::{Connected, Connector};
use starling_relay::{Incoming, RelayCore, SessionTransport};
use starling_session::{ClientSetup, Session, SessionConfig};
use starling_transport::{Transport, TransportError};

/// How long a client waits for its handshake.
pub const HANDSHAKE: Duration = Duration::from_secs(8);

// ---------------------------------------------------------------------------- the network

/// A link between two relays: its price, delay, loss and wire.
#[derive(Clone, Copy, Debug)]
pub struct Edge {
    /// The dialing relay (the one that joined later) and the dialed one.
    pub from: usize,
    pub to: usize,
    pub cost: u64,
    pub delay: Duration,
    pub loss: u32,
    pub version: Version,
    pub up: bool,
}

/// The switchboard's state: who is up, what is cut, and every connection it made (so a crash
/// or a partition can close them).
#[derive(Default)]
pub struct Board {
    pub relays: Vec<Option<RelayCore>>,
    pub edges: Vec<Edge>,
    /// Per relay, the tasks serving its accepted connections.
    pub serving: Vec<Vec<tokio::task::JoinHandle<()>>>,
    /// Open connections: the two relays' indices (a client counts as its relay's) and one side.
    pub open: Vec<(usize, usize, Laggy)>,
    /// Each connection draws its losses from the next seed.
    pub seed: u64,
}

#[derive(Clone, Default)]
pub struct Switchboard(Arc<Mutex<Board>>);

impl Switchboard {
    pub fn board(&self) -> std::sync::MutexGuard<'_, Board> {
        self.0.lock().unwrap()
    }

    /// A connection to relay `to` over a link of `delay` and `loss`, served there with
    /// `protocol`; `from` is the relay whose crash or partition cuts it. With `url`, the
    /// connection arrives as WebTransport does, its request target naming path and token.
    pub fn connect(
        &self,
        from: usize,
        to: usize,
        protocol: Protocol,
        link: (Duration, u32),
        url: Option<String>,
    ) -> Result<Laggy, String> {
        let mut board = self.board();
        let Some(Some(core)) = board.relays.get(to).cloned() else {
            return Err(format!("relay {to} is down"));
        };
        board.seed = board.seed.wrapping_add(1);
        let (client, server) = laggy_pair(Link::new(link.0, link.1, board.seed));
        let mut incoming = Incoming::quic(server.clone(), protocol.alpn(), address(from));
        if let Some(url) = url {
            incoming.path = Some(url);
            incoming.kind = SessionTransport::WebTransport;
        }
        board.serving[to].push(tokio::spawn(core.serve(incoming)));
        board.open.push((from, to, client.clone()));
        board.open.push((from, to, server));
        Ok(client)
    }

    /// Close every connection between `a` and `b` (`b` = `None`: every one touching `a`).
    pub fn cut(&self, a: usize, b: Option<usize>) {
        let mut board = self.board();
        board.open.retain(|(x, y, side)| {
            let hit = match b {
                None => *x == a || *y == a,
                Some(b) => (*x, *y) == (a, b) || (*x, *y) == (b, a),
            };
            if hit {
                side.close(SessionCode::Internal.to_code(), "simulated failure");
            }
            !hit
        });
    }
}

/// A relay's address as its peers see it.
pub fn address(relay: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, relay as u8 + 1], 4443))
}

/// How relay `from`'s cluster links reach their peers: the URL's host names the relay.
pub struct Dialing {
    pub from: usize,
    pub board: Switchboard,
}

impl Connector for Dialing {
    type Transport = Laggy;

    async fn connect(&self, url: &url::Url) -> Result<Connected<Laggy>, String> {
        let to: usize = url
            .host_str()
            .and_then(|h| h.strip_prefix('r'))
            .and_then(|h| h.strip_suffix(".sim"))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("{url}: no such relay"))?;
        let edge = {
            let board = self.board.board();
            let edge = board
                .edges
                .iter()
                .find(|e| e.from == self.from && e.to == to)
                .copied()
                .ok_or_else(|| format!("no link {} -> {to}", self.from))?;
            if !edge.up {
                return Err("partitioned".into());
            }
            edge
        };
        let protocol = Protocol::Lite(edge.version);
        let transport =
            self.board
                .connect(self.from, to, protocol, (edge.delay, edge.loss), None)?;
        let setup_path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        };
        Ok(Connected {
            transport,
            protocol: protocol.alpn().to_string(),
            setup_path: Some(setup_path),
            binding: SessionTransport::Quic,
            remote: address(to),
        })
    }
}

// -------------------------------------------------------------------------------- clients

/// Every wire a relay serves a client over.
pub fn client_protocols() -> Vec<Protocol> {
    let mut all = Protocol::SUPPORTED.to_vec();
    all.push(Protocol::Lite(Version::Lite07Wip));
    all
}

/// A client session to relay `at` over `protocol`, presenting `token`.
pub async fn client(
    board: &Switchboard,
    at: usize,
    protocol: Protocol,
    token: &str,
    config: SessionConfig,
    rng: &mut StdRng,
) -> Result<Session<Laggy>, String> {
    let link = (
        Duration::from_millis(rng.gen_range(0..=20)),
        rng.gen_range(0..=30),
    );
    // Over WebTransport the URL carries the token (the only way lite-01 to 04 can, having
    // no SETUP path); over raw QUIC the SETUP's path does.
    let target = format!("/?jwt={token}");
    let url_only = matches!(protocol, Protocol::Lite(v) if !v.has_setup_stream());
    let webtransport = url_only || rng.gen_bool(0.5);
    let transport = board.connect(at, at, protocol, link, webtransport.then(|| target.clone()))?;
    let setup = ClientSetup {
        path: (!webtransport).then_some(target),
        ..Default::default()
    };
    let lite = Protocol::lite(&client_protocols());
    let connecting =
        Session::connect_negotiated(transport.clone(), protocol.alpn(), &lite, setup, config);
    match tokio::time::timeout(HANDSHAKE, connecting).await {
        Ok(Ok(session)) => Ok(session),
        Ok(Err(err)) => Err(format!("{protocol:?}: {err}")),
        Err(_) => {
            transport.close(SessionCode::Internal.to_code(), "handshake timeout");
            Err(format!("{protocol:?}: handshake timed out"))
        }
    }
}

/// The code a closed session's peer closed it with.
pub fn peer_code(err: &starling_session::Error) -> Option<u32> {
    match err {
        starling_session::Error::Transport(TransportError::ClosedByPeer { code, .. }) => {
            Some(*code)
        }
        _ => None,
    }
}

pub fn pattern(text: &str) -> Pattern {
    text.parse().expect("a valid pattern")
}

/// A deterministic HS256 key from the seed.
pub fn seeded_key(seed: u64) -> Key {
    let secret: Vec<u8> = (0..32u64)
        .map(|i| (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 8 * 8)) as u8 ^ i as u8)
        .collect();
    let jwk: Jwk = serde_json::from_value(serde_json::json!({
        "alg": "HS256",
        "kty": "oct",
        "k": base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret),
    }))
    .expect("an HS256 JWK");
    Key::from_jwk(jwk).expect("an HS256 key")
}
