//! Starling relays joined into a cluster over real sockets on loopback: each relay dials the
//! peers it is given (`--cluster-connect`), announcements cross the mesh with one hop per
//! relay in their chains, media published on one relay reaches subscribers on another, each
//! relay pulls a track once whatever the number of readers, and a link whose peer went away
//! redials once the peer is back.

mod common;
mod http_support;

use std::net::SocketAddr;
use std::path::PathBuf;

use common::{bind_relay, session, within};
use http_support::{get, routed, sample, write_group, Publisher};
use starling_model::{Origin, StartAt, TrackConsumer, TrackInfo};
use starling_net::TlsVerify;
use starling_proto::{Path, Role, Version};
use starling_relay::cluster::PeerEntry;
use starling_relay::{ClusterConfig, RelayConfig};
use starling_session::{random_hop, Session, SessionConfig};
use tokio::sync::oneshot;
use url::Url;

const BROADCAST: &str = "room/alice";

/// One relay of the mesh, serving until dropped.
struct Member {
    url: Url,
    addr: SocketAddr,
    internal: SocketAddr,
    origin: Origin,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Member {
    /// A relay with cluster id `id` dialing `peers` (raw QUIC, certificates not checked), on
    /// `bind` (port 0: any).
    async fn start(id: u64, peers: &[&Url], bind: Option<SocketAddr>) -> Member {
        Self::start_with(id, peers, bind, |_| {}).await
    }

    /// Like [`Member::start`], adjusting the cluster configuration first.
    async fn start_with(
        id: u64,
        peers: &[&Url],
        bind: Option<SocketAddr>,
        configure: impl FnOnce(&mut ClusterConfig),
    ) -> Member {
        Self::start_relay(id, peers, bind, |relay| configure(&mut relay.cluster)).await
    }

    /// Like [`Member::start`], adjusting the whole relay configuration first.
    async fn start_relay(
        id: u64,
        peers: &[&Url],
        bind: Option<SocketAddr>,
        configure: impl FnOnce(&mut RelayConfig),
    ) -> Member {
        let connect = peers
            .iter()
            .map(|url| PeerEntry::parse(url.as_str()).unwrap())
            .collect();
        let mut config = RelayConfig {
            internal_listen: Some("127.0.0.1:0".parse().unwrap()),
            // A peer told GOAWAY keeps its link until the relay closes it: a short drain.
            drain_timeout: std::time::Duration::from_millis(500),
            cluster: ClusterConfig {
                id: Some(id),
                connect,
                connect_tls: TlsVerify::Disabled,
                ..ClusterConfig::default()
            },
            ..RelayConfig::default()
        };
        configure(&mut config);
        let (relay, url) = match bind {
            Some(bind) => {
                let relay = starling_relay::Relay::bind(RelayConfig { bind, ..config })
                    .await
                    .unwrap();
                let url = Url::parse(&format!("moqt://{bind}/")).unwrap();
                (relay, url)
            }
            None => bind_relay(config).await,
        };
        assert_eq!(relay.hop(), id);
        let addr = relay.local_addr().unwrap();
        let internal = relay.internal_addr().unwrap();
        let origin = relay.origin().clone();
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            relay
                .run_until(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Member {
            url,
            addr,
            internal,
            origin,
            stop: Some(stop),
            task,
        }
    }

    /// Shut the relay down (GOAWAY, drain, close) and wait until it has.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        within(&mut self.task).await.unwrap();
    }

    async fn metric(&self, series: &str) -> Option<f64> {
        sample(&get(self.internal, "/metrics").await.text(), series)
    }

    /// Wait until `series` reads `value` (metrics are read live at scrape time).
    async fn metric_reaches(&self, series: &str, value: f64) {
        within(async {
            while self.metric(series).await != Some(value) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A subscriber session on `url`, with the origin its announcements land in.
async fn subscriber(url: &Url) -> (Session<starling_net::QuicTransport>, Origin) {
    let origin = Origin::new();
    let mut config = SessionConfig::new(random_hop());
    config.consume = Some(origin.clone());
    let session = session(url, Version::Lite06, Role::Subscriber, config).await;
    (session, origin)
}

/// Wait until `origin` has a route to [`BROADCAST`]; its hop chain.
async fn announced(origin: &Origin) -> Vec<u64> {
    routed(origin, &[BROADCAST]).await;
    let route = origin
        .route(&Path::new(BROADCAST).unwrap(), None)
        .expect("routed");
    route.route.hops.to_vec()
}

fn reader(origin: &Origin) -> TrackConsumer {
    origin
        .consume(&Path::new(BROADCAST).unwrap(), None)
        .expect("routed")
        .subscribe_track("video", StartAt::default())
        .unwrap()
}

async fn read_payloads(reader: &mut TrackConsumer) -> (u64, Vec<String>) {
    let mut group = within(reader.next_group()).await.unwrap().unwrap();
    let mut frames = Vec::new();
    while let Some(frame) = within(group.next_frame()).await.unwrap() {
        frames.push(String::from_utf8(frame.payload.to_vec()).unwrap());
    }
    (group.sequence(), frames)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_carries_media_from_a_to_c_with_one_upstream_per_relay() {
    // B dials A, C dials B.
    let a = Member::start(1001, &[], None).await;
    let b = Member::start(1002, &[&a.url], None).await;
    let c = Member::start(1003, &[&b.url], None).await;

    let mut publisher = Publisher::connect(&a.url, Version::Lite06).await;
    let index = publisher.broadcast(BROADCAST);
    let track = publisher.track(index, "video", TrackInfo::default());

    // Two subscribers on C: the chain names the publisher, then A, B and C.
    let (_s1, origin1) = subscriber(&c.url).await;
    let (_s2, origin2) = subscriber(&c.url).await;
    for origin in [&origin1, &origin2] {
        let hops = announced(origin).await;
        assert_eq!(hops.len(), 4, "{hops:?}");
        assert_eq!(&hops[1..], &[1001, 1002, 1003], "{hops:?}");
    }
    let (mut r1, mut r2) = (reader(&origin1), reader(&origin2));
    for sequence in 0..3u64 {
        write_group(&track, sequence, sequence * 1000, &["x", "y"]);
        for reader in [&mut r1, &mut r2] {
            let (got, frames) = read_payloads(reader).await;
            assert_eq!((got, frames), (sequence, vec!["x".into(), "y".into()]));
        }
    }

    // One upstream per track per relay: the publisher serves one subscription (A's), and
    // each relay pulls the track once.
    assert_eq!(track.consumers(), 1);
    for member in [&a, &b, &c] {
        member
            .metric_reaches("starling_upstream_subscriptions", 1.0)
            .await;
    }
    // Links are listed by the relay that dialed them, keyed without their query.
    c.metric_reaches("starling_cluster_peer_links", 1.0).await;
    let nodes = get(c.internal, "/nodes").await.json();
    let listed = &nodes["nodes"];
    assert_eq!(listed.as_array().unwrap().len(), 1, "{nodes}");
    assert_eq!(listed[0]["node"], format!("moqt://{}", b.addr));
    assert_eq!(
        get(a.internal, "/nodes").await.json()["nodes"],
        serde_json::json!([])
    );
    drop(publisher);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_redials_a_peer_that_came_back() {
    let a = Member::start(2001, &[], None).await;
    let a_addr = a.addr;
    let b = Member::start(2002, &[&a.url], None).await;
    b.metric_reaches("starling_cluster_peer_links", 1.0).await;

    // A goes away; B's link notices and keeps trying.
    a.stop().await;
    b.metric_reaches("starling_cluster_peer_links", 0.0).await;

    // A is back on the same address, with a publisher: B redials and hears it.
    let a = Member::start(2001, &[], Some(a_addr)).await;
    let mut publisher = Publisher::connect(&a.url, Version::Lite06).await;
    let index = publisher.broadcast(BROADCAST);
    let track = publisher.track(index, "video", TrackInfo::default());
    b.metric_reaches("starling_cluster_peer_links", 1.0).await;
    let (_sub, origin) = subscriber(&b.url).await;
    let hops = announced(&origin).await;
    assert_eq!(&hops[1..], &[2001, 2002], "{hops:?}");
    assert!(b.metric("starling_cluster_redials_total").await >= Some(1.0));
    // The one route A's announcements hold on B, by peer.
    b.metric_reaches(
        &format!("starling_cluster_peer_routes{{peer=\"moqt://{a_addr}\"}}"),
        1.0,
    )
    .await;
    let mut reader = reader(&origin);
    write_group(&track, 0, 0, &["back"]);
    assert_eq!(read_payloads(&mut reader).await, (0, vec!["back".into()]));
    assert!(a
        .origin
        .route(&Path::new(BROADCAST).unwrap(), None)
        .is_some());
}

/// A peer that falls silent (its host died, or the network between them did) is noticed
/// after the peer links' idle timeout (2 s by default; moq-relay takes its QUIC default, 10
/// s): the link drops, the routes learned over it are withdrawn downstream, and once the
/// network is back the link redials and the routes return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_is_dropped_after_the_idle_timeout_and_redialed() {
    let a = Member::start(3001, &[], None).await;
    let link = starling_netsim::UdpLink::start("127.0.0.1:0".parse().unwrap(), a.addr, 3)
        .await
        .unwrap();
    let through_link = Url::parse(&format!("moqt://{}/", link.local_addr())).unwrap();
    let b = Member::start(3002, &[&through_link], None).await;
    let mut publisher = Publisher::connect(&a.url, Version::Lite06).await;
    let _index = publisher.broadcast(BROADCAST);
    let (_sub, origin) = subscriber(&b.url).await;
    announced(&origin).await;

    // Cut the link: nothing more crosses, not even a close.
    link.set_up(false);
    let cut = std::time::Instant::now();
    within(async {
        while origin.route(&Path::new(BROADCAST).unwrap(), None).is_some() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let noticed = cut.elapsed();
    assert!(
        noticed < std::time::Duration::from_secs(5),
        "the dead peer took {noticed:?} to notice (idle timeout 2 s)"
    );
    b.metric_reaches("starling_cluster_peer_links", 0.0).await;

    // Heal it: the link redials and the broadcast is announced again.
    link.set_up(true);
    b.metric_reaches("starling_cluster_peer_links", 1.0).await;
    let hops = announced(&origin).await;
    assert_eq!(&hops[1..], &[3001, 3002], "{hops:?}");
}

/// Peers from `--cluster-connect-api` (a file here) follow the file at run time: a peer it
/// lists is dialed, one it drops is released (its session closed), a list that does not parse
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_api_peers_follow_the_file_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("peers.json");
    let a = Member::start(4001, &[], None).await;
    let write = |body: String| std::fs::write(&list, body).unwrap();
    write(format!("[\"{}\"]", a.url));
    let b = Member::start_with(4002, &[], None, |cluster| {
        cluster.connect_api = Some(starling_relay::cluster::ConnectApi::File(list.clone()));
    })
    .await;
    b.metric_reaches("starling_cluster_peer_links", 1.0).await;
    let nodes = get(b.internal, "/nodes").await.json();
    assert_eq!(nodes["nodes"][0]["node"], format!("moqt://{}", a.addr));

    // A list that does not parse is refused whole: the link stays.
    write("[\"moqt://a:1/?cost=free\"]".into());
    tokio::time::sleep(starling_relay::cluster::FILE_CHECK * 3).await;
    assert_eq!(b.metric("starling_cluster_peer_links").await, Some(1.0));

    // Dropped from the list: released at once.
    write("[]".into());
    b.metric_reaches("starling_cluster_peer_links", 0.0).await;
    assert_eq!(
        get(b.internal, "/nodes").await.json()["nodes"],
        serde_json::json!([])
    );

    // Listed again, with a price: dialed again.
    write(format!("[{{\"url\": \"{}\", \"cost\": 5}}]", a.url));
    b.metric_reaches("starling_cluster_peer_links", 1.0).await;
}

/// An `http://` connect API is fetched with `?node=` naming this relay, and its peers dialed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_api_over_http_names_the_node_and_its_peers_are_dialed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let a = Member::start(5001, &[], None).await;
    let body = format!("[\"{}\"]", a.url);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = listener.local_addr().unwrap();
    let (seen_tx, mut seen) = tokio::sync::mpsc::channel::<String>(4);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = vec![0u8; 4096];
            let n = stream.read(&mut request).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&request[..n]).to_string();
            let _ = seen_tx
                .send(head.lines().next().unwrap_or("").to_string())
                .await;
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        }
    });
    let b = Member::start_with(5002, &[], None, |cluster| {
        cluster.connect_api = Some(
            starling_relay::cluster::ConnectApi::parse(&format!("http://{api}/peers")).unwrap(),
        );
        cluster.node = Some("moqt://b.example:4443/".into());
    })
    .await;
    let request = within(seen.recv()).await.unwrap();
    assert_eq!(
        request,
        "GET /peers?node=moqt%3A%2F%2Fb.example%3A4443%2F HTTP/1.1"
    );
    b.metric_reaches("starling_cluster_peer_links", 1.0).await;
}

/// A triangle (B dials A, C dials B, and C dials A at `?cost=10`): no relay stores a chain with
/// its own hop or a repeated hop; each link's price is charged by both ends (the dialer's
/// `?cost=`, the acceptor through the SETUP Cost); C pulls through B, the cheaper way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_triangle_has_no_loops_and_prices_each_link_at_both_ends() {
    let a = Member::start(6001, &[], None).await;
    let b = Member::start(6002, &[&a.url], None).await;
    let priced = Url::parse(&format!("{}?cost=10", a.url)).unwrap();
    let c = Member::start(6003, &[&b.url, &priced], None).await;

    let mut on_a = Publisher::connect(&a.url, Version::Lite06).await;
    let index = on_a.broadcast(BROADCAST);
    let track = on_a.track(index, "video", TrackInfo::default());
    let mut on_c = Publisher::connect(&c.url, Version::Lite06).await;
    on_c.broadcast("room/bob");
    let alice = Path::new(BROADCAST).unwrap();
    let bob = Path::new("room/bob").unwrap();

    // Wait until each relay holds every route it will: A and C two for the other's broadcast
    // (direct and through B), B two for each (direct and through the third relay).
    within(async {
        loop {
            let counts = [
                a.origin.routes(&bob).len(),
                b.origin.routes(&alice).len(),
                b.origin.routes(&bob).len(),
                c.origin.routes(&alice).len(),
            ];
            if counts == [2, 2, 2, 2] {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    for (member, id) in [(&a, 6001u64), (&b, 6002), (&c, 6003)] {
        for path in [&alice, &bob] {
            for route in member.origin.routes(path) {
                assert!(
                    !route.hops.contains(&id),
                    "{id} stores its own hop: {route:?}"
                );
                let mut seen = route.hops.to_vec();
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(seen.len(), route.hops.len(), "a repeated hop: {route:?}");
            }
        }
    }
    // The publishers' own relays hold one route each: nothing came back around the triangle.
    assert_eq!(a.origin.routes(&alice).len(), 1);
    assert_eq!(c.origin.routes(&bob).len(), 1);
    // A charges C's link 10 (C's SETUP Cost), as C does; the ways through B cost 1 per link.
    let costs = |member: &Member, path: &Path| {
        let mut costs: Vec<u64> = member
            .origin
            .routes(path)
            .iter()
            .map(|r| r.cost.warm)
            .collect();
        costs.sort_unstable();
        costs
    };
    assert_eq!(costs(&a, &bob), vec![3, 11]);
    assert_eq!(costs(&c, &alice), vec![3, 11]);
    let best = c.origin.route(&alice, None).unwrap().route;
    assert_eq!(
        &best.hops[1..],
        &[6001, 6002],
        "C pulls through B: {best:?}"
    );

    // And the media takes that way.
    let (_sub, origin) = subscriber(&c.url).await;
    let hops = announced(&origin).await;
    assert_eq!(&hops[1..], &[6001, 6002, 6003]);
    let mut reader = reader(&origin);
    write_group(&track, 0, 0, &["tri"]);
    assert_eq!(read_payloads(&mut reader).await, (0, vec!["tri".into()]));
    b.metric_reaches("starling_upstream_subscriptions", 1.0)
        .await;
}

/// A port free for both UDP and TCP on 127.0.0.1 (a relay binds both).
fn free_addr() -> SocketAddr {
    for _ in 0..50 {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = udp.local_addr().unwrap();
        if std::net::TcpListener::bind(addr).is_ok() {
            return addr;
        }
    }
    panic!("no port free for both UDP and TCP");
}

/// `--cluster-connect-dns`: every address a name resolves to is a peer; an address that turns
/// out to be this relay (its SETUP carries our hop) is not dialed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_from_dns_are_dialed_and_the_relay_itself_is_skipped() {
    use starling_relay::cluster::DnsPeers;
    let a = Member::start(7001, &[], None).await;
    let own = free_addr();
    let names = vec![
        DnsPeers::parse(&format!("moqt://localhost:{}/", a.addr.port())).unwrap(),
        DnsPeers::parse(&format!("moqt://localhost:{}/", own.port())).unwrap(),
    ];
    let b = Member::start_with(7002, &[], Some(own), |cluster| cluster.connect_dns = names).await;
    b.metric_reaches("starling_cluster_peer_links", 1.0).await;
    let nodes = get(b.internal, "/nodes").await.json();
    let listed = nodes["nodes"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 1, "{nodes}");
    assert_eq!(listed[0]["node"], format!("moqt://{}", a.addr));

    // The media path works through the discovered link.
    let mut publisher = Publisher::connect(&a.url, Version::Lite06).await;
    publisher.broadcast(BROADCAST);
    let (_sub, origin) = subscriber(&b.url).await;
    let hops = announced(&origin).await;
    assert_eq!(&hops[1..], &[7001, 7002]);
}

/// `/sessions` once it lists at least `count` sessions: the relay registers a session just
/// after its SETUP completes, so a dialer can be routed a moment before the acceptor lists it.
async fn listed(internal: SocketAddr, count: usize) -> serde_json::Value {
    within(async {
        loop {
            let all = get(internal, "/sessions").await.json();
            if all["sessions"].as_array().is_some_and(|l| l.len() >= count) {
                return all;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
}

/// `/sessions` lists what a relay accepted, in moq-relay's shape: the peer that dialed in and
/// the clients, never its own dials; the query filters them, and an unknown field is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_lists_accepted_sessions_and_filters_them() {
    let a = Member::start(1001, &[], None).await;
    let b = Member::start(1002, &[&a.url], None).await;
    b.metric_reaches("starling_cluster_peer_links", 1.0).await;
    let (_client, _origin) = subscriber(&a.url).await;
    let all = listed(a.internal, 2).await;
    let list = all["sessions"].as_array().unwrap();
    assert_eq!(
        list.len(),
        2,
        "the peer that dialed in and the client: {all}"
    );
    for entry in list {
        assert_eq!(entry["transport"], "quic", "{entry}");
        assert_eq!(entry["local"], a.addr.to_string(), "{entry}");
        assert!(
            entry["alpn"].as_str().unwrap().starts_with("moq-lite"),
            "{entry}"
        );
        assert_eq!(entry["path"], "/", "{entry}");
        assert!(
            entry["started"].as_u64().unwrap() > 1_700_000_000,
            "{entry}"
        );
        assert!(entry.get("query").is_none(), "{entry}");
    }
    let subscribers = get(a.internal, "/sessions?role=subscriber").await.json();
    assert_eq!(
        subscribers["sessions"].as_array().unwrap().len(),
        1,
        "{subscribers}"
    );
    let id = subscribers["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let by_id = get(a.internal, &format!("/sessions?id={id}")).await.json();
    assert_eq!(by_id["sessions"][0]["role"], "subscriber", "{by_id}");
    let local = get(a.internal, "/sessions?remote=127.0.0.0/8").await.json();
    assert_eq!(local["sessions"].as_array().unwrap().len(), 2, "{local}");
    let elsewhere = get(a.internal, "/sessions?remote=10.0.0.0/8").await.json();
    assert_eq!(elsewhere["sessions"], serde_json::json!([]));

    let refused = get(a.internal, "/sessions?query=jwt").await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.text(), "unknown filter field: query\n");
    assert_eq!(
        get(a.internal, "/sessions?remote=nowhere").await.status,
        400
    );

    // B lists its dial under /nodes only.
    let b_sessions = get(b.internal, "/sessions").await.json();
    assert_eq!(
        b_sessions["sessions"],
        serde_json::json!([]),
        "{b_sessions}"
    );
}

/// A CA, and a client certificate for `name` it signed, written as PEM files in `dir`:
/// (ca.pem, cert.pem, key.pem).
fn client_identity(dir: &std::path::Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "cluster ca");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut leaf = CertificateParams::new(vec![name.to_string()]).unwrap();
    leaf.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca).unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// mTLS: a relay dialing with a client certificate that the acceptor's `--listen-tls-root`
/// verifies is a peer there (it hears hidden paths); the same dial without the certificate
/// is a client (hidden paths stay hidden), and `/sessions` shows the certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_client_certificate_makes_the_dialer_a_peer() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = client_identity(dir.path(), "relay-b.cluster");
    let root = ca.clone();
    let a = Member::start_relay(8001, &[], None, move |relay| {
        relay.listen_tls_root = Some(root);
    })
    .await;
    // A hidden broadcast published on A itself (as moq-relay's stats are), and a plain one.
    let stats = starling_model::BroadcastProducer::new(starling_model::Limits::default());
    let _stats_route = a
        .origin
        .publish(
            Path::new(".stats/node/a").unwrap(),
            stats.consume(),
            starling_model::Route::local(),
        )
        .unwrap();
    let mut publisher = Publisher::connect(&a.url, Version::Lite06).await;
    publisher.broadcast(BROADCAST);

    let (cert_path, key_path) = (cert.clone(), key.clone());
    let with_cert = Member::start_with(8002, &[&a.url], None, move |cluster| {
        cluster.connect_identity = Some((cert_path, key_path));
    })
    .await;
    let without = Member::start(8003, &[&a.url], None).await;
    for member in [&with_cert, &without] {
        routed(&member.origin, &[BROADCAST]).await;
    }
    routed(&with_cert.origin, &[".stats/node/a"]).await;
    let hidden = Path::new(".stats/node/a").unwrap();
    assert!(
        without.origin.route(&hidden, None).is_none(),
        "a dialer without a certificate is a client: hidden paths stay hidden"
    );

    // The publisher and both dialers.
    let sessions = listed(a.internal, 3).await;
    let peers: Vec<&serde_json::Value> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| !s["tls"].is_null())
        .collect();
    assert_eq!(peers.len(), 1, "{sessions}");
    assert_eq!(peers[0]["tls"]["name"], "relay-b.cluster");
    assert!(peers[0]["tls"]["issuer"]
        .as_str()
        .unwrap()
        .contains("cluster ca"));
    let by_name = get(a.internal, "/sessions?tls_name=relay-b.cluster")
        .await
        .json();
    assert_eq!(
        by_name["sessions"].as_array().unwrap().len(),
        1,
        "{by_name}"
    );
    drop(publisher);
}

#[tokio::test]
async fn client_roots_with_public_access_refuse_startup() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, _, _) = client_identity(dir.path(), "x");
    let mut config = RelayConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        listen_tls_root: Some(ca),
        ..RelayConfig::default()
    };
    config.auth.public_subscribe =
        starling_relay::parse_patterns(["**"]).expect("a public pattern");
    let refused = starling_relay::Relay::bind(config)
        .await
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("public"), "{refused}");
}
