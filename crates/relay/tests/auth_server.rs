//! `--auth-url`: sessions decided by an auth server speaking moq-relay's contract.
//!
//! The server here is the test's own, so it can hold answers, count requests and change its
//! mind; `auth_moq_serve.rs` runs the same relay against the reference `moq auth serve`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use starling_proto::{Role, SessionCode};
use starling_relay::{AuthConfig, Authority, RelayConfig, SessionFacts, TransportKind};
use starling_session::{random_hop, SessionConfig};
use tokio::sync::watch;
use url::Url;

mod auth_support;
mod common;

use auth_support::*;
use common::{within, STEP};

/// An auth server under the test's control.
#[derive(Clone)]
struct AuthServer {
    /// Every request body, in arrival order.
    requests: watch::Sender<Vec<Value>>,
    /// The status and grant `connect`/`revalidate` are answered with.
    answer: Arc<Mutex<(u16, Value)>>,
    /// Answers are held while this is false.
    open: watch::Sender<bool>,
}

impl AuthServer {
    async fn start(grant: Value) -> (AuthServer, Url) {
        let server = AuthServer {
            requests: watch::channel(Vec::new()).0,
            answer: Arc::new(Mutex::new((200, grant))),
            open: watch::channel(true).0,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        let router = Router::new()
            .route("/", post(answer))
            .with_state(server.clone());
        tokio::spawn(async move { axum::serve(listener, router).await });
        (server, url)
    }

    fn answer_with(&self, status: u16, grant: Value) {
        *self.answer.lock().unwrap() = (status, grant);
    }

    /// How many requests carried `event`.
    fn count(&self, event: &str) -> usize {
        self.requests
            .borrow()
            .iter()
            .filter(|r| r["event"] == event)
            .count()
    }

    /// Wait until `event` has been requested `n` times; the requests carrying it.
    async fn until(&self, event: &str, n: usize) -> Vec<Value> {
        let mut requests = self.requests.subscribe();
        let seen = within(
            requests.wait_for(|all| all.iter().filter(|r| r["event"] == event).count() >= n),
        )
        .await
        .unwrap();
        seen.iter()
            .filter(|r| r["event"] == event)
            .cloned()
            .collect()
    }
}

async fn answer(State(server): State<AuthServer>, Json(request): Json<Value>) -> Response {
    let end = request["event"] == "end";
    server.requests.send_modify(|all| all.push(request));
    if end {
        return StatusCode::NO_CONTENT.into_response();
    }
    let mut open = server.open.subscribe();
    let _ = open.wait_for(|open| *open).await;
    let (status, grant) = server.answer.lock().unwrap().clone();
    (StatusCode::from_u16(status).unwrap(), Json(grant)).into_response()
}

fn everything() -> Value {
    json!({"publish": ["**"], "subscribe": ["**"]})
}

/// A running relay deciding through `url` with `max_age`; its raw QUIC URL.
async fn relay(url: &Url, max_age: Duration) -> Url {
    let (relay, quic) = common::bind_relay(RelayConfig {
        auth: AuthConfig {
            url: Some(url.clone()),
            max_age,
            ..AuthConfig::default()
        },
        ..Default::default()
    })
    .await;
    tokio::spawn(relay.run());
    quic
}

fn subscriber_facts(target: &str) -> SessionFacts {
    let mut facts = SessionFacts::new(TransportKind::Quic, target);
    facts.role = Some(Role::Subscriber);
    facts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_cold_sessions_make_one_request() {
    let (server, url) = AuthServer::start(everything()).await;
    server.open.send_replace(false);
    let authority = Authority::new(&AuthConfig {
        url: Some(url),
        ..AuthConfig::default()
    })
    .unwrap();
    let sessions: Vec<_> = (0..1000)
        .map(|_| {
            let authority = authority.clone();
            tokio::spawn(async move { authority.admit(subscriber_facts("/room?jwt=shared")).await })
        })
        .collect();
    // Hold the one request until every session is waiting on it.
    server.until("connect", 1).await;
    let deadline = Instant::now() + STEP;
    loop {
        let stats = authority.stats();
        if stats.misses_cold + stats.coalesced == 1000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "lookups never arrived: {stats:?}"
        );
        tokio::task::yield_now().await;
    }
    server.open.send_replace(true);
    let mut leases = Vec::new();
    for session in sessions {
        let admitted = within(session).await.unwrap().expect("admitted");
        assert!(admitted.grant.subscribe && !admitted.grant.publish);
        leases.push(admitted.lease);
    }
    assert_eq!(server.count("connect"), 1);
    let stats = authority.stats();
    assert_eq!((stats.misses_cold, stats.coalesced), (1, 999), "{stats:?}");
    drop(leases);
    // Each session still reports its own end.
    server.until("end", 1000).await;
    assert_eq!(server.count("connect"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_over_quic_share_one_decision() {
    let (server, url) = AuthServer::start(everything()).await;
    let quic = relay(&url, Duration::from_secs(60)).await;
    let sessions: Vec<_> = (0..100)
        .map(|_| {
            let quic = quic.clone();
            tokio::spawn(async move {
                connect(
                    &quic,
                    "/room?jwt=shared",
                    Some(Role::Subscriber),
                    SessionConfig::new(random_hop()),
                )
                .await
            })
        })
        .collect();
    let mut live = Vec::new();
    for session in sessions {
        live.push(within(session).await.unwrap().expect("admitted"));
    }
    assert_eq!(server.count("connect"), 1);
    let connect = &server.until("connect", 1).await[0];
    assert_eq!(connect["transport"], "quic");
    assert_eq!(connect["path"], "/room");
    assert_eq!(connect["query"], "jwt=shared");
    assert_eq!(connect["role"], "subscriber");
    assert_eq!(connect["node"], "starling");
    assert_eq!(connect["alpn"], "moq-lite-06");
    assert!(connect["remote"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_the_server_revokes_stops_live_sessions_within_the_max_age() {
    let (server, url) = AuthServer::start(everything()).await;
    let max_age = Duration::from_secs(3);
    let quic = relay(&url, max_age).await;
    let target = "/room?jwt=revocable";
    let subscriber = || {
        connect(
            &quic,
            target,
            Some(Role::Subscriber),
            SessionConfig::new(random_hop()),
        )
    };
    let live = subscriber().await.expect("admitted");

    server.answer_with(403, json!("banned"));
    let revoked = Instant::now();
    // Inside the window the cached decision still admits the credential…
    let inside = subscriber().await.expect("admitted inside the max age");
    assert!(
        revoked.elapsed() < max_age,
        "the window passed before the check"
    );
    assert_eq!(server.count("connect"), 1);
    // …and the re-check that follows it closes every session holding it.
    assert_closed_within(&[&live, &inside], revoked, max_age).await;
    assert!(server.count("revalidate") >= 1);
    assert_refused(&quic, target, Some(Role::Subscriber), "after the window").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_reports_its_end() {
    let (server, url) = AuthServer::start(everything()).await;
    let quic = relay(&url, Duration::from_secs(1)).await;
    let session = connect(
        &quic,
        "/room?jwt=ends",
        Some(Role::Subscriber),
        SessionConfig::new(random_hop()),
    )
    .await
    .expect("admitted");
    let connect_id = server.until("connect", 1).await[0]["id"].clone();
    session.close(SessionCode::NoError, "bye");
    let end = server.until("end", 1).await.remove(0);
    assert_eq!(end["id"], connect_id, "the session's own id");
    assert_eq!(end["path"], "/room");
    assert_eq!(end["query"], "jwt=ends");
    assert!(
        end["reason"].as_str().is_some_and(|r| r.contains("bye")),
        "{end}"
    );
    assert!(end["duration"].as_f64().unwrap() > 0.0);

    // What a session moved rides on its end: a publisher's group reaches a subscriber.
    let (publisher, subscriber) = carry_one_group(&quic, "/room?jwt=pub", "/room?jwt=sub").await;
    publisher.close(SessionCode::NoError, "done");
    subscriber.close(SessionCode::NoError, "done");
    let ends = server.until("end", 3).await;
    let moved = |query: &str, direction: &str| {
        ends.iter()
            .find(|end| end["query"] == query)
            .unwrap_or_else(|| panic!("no end for {query}: {ends:?}"))["bytes"][direction]
            .as_u64()
            .unwrap()
    };
    assert!(moved("jwt=pub", "received") >= 5, "{ends:?}");
    assert!(moved("jwt=sub", "sent") >= 5, "{ends:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_or_failing_server_refuses_and_http_answers_502() {
    let (server, url) = AuthServer::start(everything()).await;
    server.answer_with(503, json!("down"));
    let quic = relay(&url, Duration::from_secs(1)).await;
    // moq-relay closes with the HTTP status as an application code: 502 -> 64 + 502.
    assert_closed_with(
        &quic,
        "/room?jwt=t",
        Some(Role::Subscriber),
        SessionCode::App(502),
        "outage",
    )
    .await;
    let port = quic.port().unwrap();
    assert_eq!(http_status(port, "/announced/room?jwt=t").await, 502);
    // A refusal is 401; a grant that names nothing is a refusal too.
    server.answer_with(403, json!("no"));
    assert_eq!(http_status(port, "/announced/room?jwt=t").await, 401);
    server.answer_with(200, json!({}));
    assert_eq!(http_status(port, "/announced/room?jwt=u").await, 401);
    // A grant that names the broadcast serves its listing.
    server.answer_with(200, json!({"subscribe": ["**"]}));
    assert_eq!(http_status(port, "/announced/room?jwt=v").await, 200);
}

/// A grant marked `"peer": true` makes the session a cluster peer: it hears hidden (`.`)
/// paths, which a plain grant's session does not (moq-relay's peer classification).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_grant_hears_hidden_paths_and_a_plain_one_does_not() {
    use starling_model::{BroadcastProducer, Limits, Origin, Route};
    use starling_proto::Path;
    let (server, auth) = AuthServer::start(everything()).await;
    let url = relay(&auth, Duration::from_secs(30)).await;

    // A publisher announces a hidden path and a plain one.
    let published = Origin::new();
    let broadcasts = [".stats/node/x", "room/a"].map(|path| {
        let broadcast = BroadcastProducer::new(Limits::default());
        let route = published
            .publish(
                Path::new(path).unwrap(),
                broadcast.consume(),
                Route::local(),
            )
            .unwrap();
        (broadcast, route)
    });
    let mut config = SessionConfig::new(random_hop());
    config.publish = Some(published);
    // As a relay publishes (moq-relay's dialer): hidden paths included.
    config.cluster_peer = true;
    let _publisher = connect(&url, "/", Some(Role::Publisher), config)
        .await
        .unwrap();

    let listen = |target: &'static str| {
        let url = url.clone();
        async move {
            let origin = Origin::new();
            let mut config = SessionConfig::new(random_hop());
            config.consume = Some(origin.clone());
            let session = connect(&url, target, None, config).await.unwrap();
            (session, origin)
        }
    };
    let hidden = Path::new(".stats/node/x").unwrap();
    let plain = Path::new("room/a").unwrap();
    let wait_for = |origin: &Origin, path: &Path| {
        let (origin, path) = (origin.clone(), path.clone());
        async move {
            let interest = origin.interest(Path::empty()).unwrap();
            let mut changed = Vec::new();
            while origin.route(&path, None).is_none() {
                within(interest.changed(&mut changed)).await;
            }
        }
    };

    let (_plain_session, plain_origin) = listen("/?as=client").await;
    wait_for(&plain_origin, &plain).await;
    // Answers to one announce request arrive in one write: had the hidden path been sent,
    // it would be here by now.
    assert!(plain_origin.route(&hidden, None).is_none());

    server.answer_with(
        200,
        json!({"publish": ["**"], "subscribe": ["**"], "peer": true}),
    );
    let (_peer_session, peer_origin) = listen("/?as=peer").await;
    wait_for(&peer_origin, &hidden).await;
    wait_for(&peer_origin, &plain).await;
    drop(broadcasts);
}
