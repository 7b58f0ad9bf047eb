//! Token admission over real sockets: grants, refusals with UNAUTHORIZED, expiry mid-session, public patterns, WebSocket 401.

use std::time::{Duration, SystemTime};

use starling_auth::{Algorithm, Key};
use starling_model::{BroadcastProducer, Limits, Origin, Route};
use starling_proto::{Path, Role, SessionCode};
use starling_relay::{AuthConfig, KeySource, RelayConfig};
use starling_session::{random_hop, SessionConfig};

use url::Url;

mod auth_support;
mod common;
mod http_support;

use auth_support::*;
use common::{within, STEP};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_token_publishes_and_subscribes_inside_its_grant() {
    let key = key();
    let url = auth_relay(Some(vec![key.clone()]), &[], &[]).await;
    let publish = key.sign(&claims("room", &["**"], &[])).unwrap();
    let subscribe = key.sign(&claims("room", &[], &["**"])).unwrap();

    carry_one_group(
        &url,
        &with_token("/room", &publish),
        &with_token("/room", &subscribe),
    )
    .await;

    // The same tokens at a narrower dialed path are still inside the grant.
    assert_admitted(
        &url,
        &with_token("/room/alice", &publish),
        Some(Role::Publisher),
        "narrower",
    )
    .await;
    // A grant narrower than the dialed root is admitted there (the session checks each path
    // against it) and at its prefix, never at a sibling.
    let alice = key.sign(&claims("room", &["alice/**"], &[])).unwrap();
    assert_admitted(
        &url,
        &with_token("/room", &alice),
        Some(Role::Publisher),
        "narrow grant at its parent",
    )
    .await;
    assert_refused(
        &url,
        &with_token("/room/bob", &alice),
        Some(Role::Publisher),
        "sibling of the grant",
    )
    .await;
    assert_admitted(
        &url,
        &with_token("/room/alice", &alice),
        Some(Role::Publisher),
        "narrow grant at its prefix",
    )
    .await;
    // A subscribe-only token cannot publish, and the reverse.
    assert_refused(
        &url,
        &with_token("/room", &subscribe),
        Some(Role::Publisher),
        "subscribe token publishing",
    )
    .await;
    assert_refused(
        &url,
        &with_token("/room", &publish),
        Some(Role::Subscriber),
        "publish token subscribing",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_tokens_close_the_session_with_unauthorized() {
    let key = key();
    let url = auth_relay(Some(vec![key.clone()]), &[], &[]).await;
    let good = key.sign(&claims("room", &["**"], &["**"])).unwrap();
    // Sanity: the good token is admitted.
    assert_admitted(&url, &with_token("/room", &good), None, "good token").await;

    let mut expired = claims("room", &["**"], &["**"]);
    expired.expires = Some(SystemTime::now() - Duration::from_secs(10));
    let expired = sign_raw(&key, serde_json::to_value(&expired).unwrap());
    let mut early = claims("room", &["**"], &["**"]);
    early.not_before = Some(SystemTime::now() + Duration::from_secs(3600));
    let early = key.sign(&early).unwrap();
    // Another secret under the same kid.
    let other = Key::generate_with_id(Algorithm::HS256, key.kid().map(str::to_owned)).unwrap();
    let wrong_key = other.sign(&claims("room", &["**"], &["**"])).unwrap();
    let stranger = Key::generate(Algorithm::HS256).unwrap();
    let unknown_kid = stranger.sign(&claims("room", &["**"], &["**"])).unwrap();
    let mut tampered = good.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let payload = serde_json::json!({"root": "room", "put": [""], "get": [""], "exp": epoch(3600)});
    let alg_none = unsigned(&key, payload.clone());
    let mut extra = payload.clone();
    extra["admin"] = serde_json::json!(true);
    let unknown_claim = sign_raw(&key, extra);
    // The payload of the good token with a different root, the signature left as is.
    let mut parts: Vec<&str> = good.split('.').collect();
    let forged_payload = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
            serde_json::json!({"root": "", "put": [""], "get": [""], "exp": epoch(3600)})
                .to_string(),
        )
    };
    parts[1] = &forged_payload;
    let forged = parts.join(".");
    let roomy = key.sign(&claims("roomy", &["**"], &["**"])).unwrap();

    let cases: Vec<(&str, String)> = vec![
        ("no token", "/room".into()),
        (
            "outside the grant (wrong root)",
            with_token("/other", &good),
        ),
        (
            "root prefix lookalike: room vs roomy",
            with_token("/roomy", &good),
        ),
        ("token root roomy dialing room", with_token("/room", &roomy)),
        ("dot segments", with_token("/room/../other", &good)),
        (
            "percent-encoded slash",
            with_token("/room%2F..%2Fother", &good),
        ),
        (
            "percent-encoded slash in a segment",
            with_token("/room%2fx", &good),
        ),
        ("expired", with_token("/room", &expired)),
        ("not yet valid", with_token("/room", &early)),
        ("wrong key, same kid", with_token("/room", &wrong_key)),
        ("unknown kid", with_token("/room", &unknown_kid)),
        ("tampered signature", with_token("/room", &tampered)),
        ("forged payload", with_token("/room", &forged)),
        ("alg none", with_token("/room", &alg_none)),
        ("unknown claim", with_token("/room", &unknown_claim)),
        ("garbage", with_token("/room", "not.a.token")),
    ];
    for (what, target) in cases {
        assert_refused(&url, &target, None, what).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_expiring_mid_session_closes_it_with_unauthorized() {
    let key = key();
    let url = auth_relay(Some(vec![key.clone()]), &[], &[]).await;
    // `exp` has whole-second precision: two seconds ahead is at least one second of session.
    let mut short = claims("room", &[], &["**"]);
    short.expires = Some(std::time::UNIX_EPOCH + Duration::from_secs(epoch(2) as u64));
    let token = key.sign(&short).unwrap();
    let session = connect(
        &url,
        &with_token("/room", &token),
        Some(Role::Subscriber),
        SessionConfig::new(random_hop()),
    )
    .await
    .expect("admitted before exp");
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(STEP, session.closed())
        .await
        .expect("closed at exp");
    assert_eq!(
        peer_code(&err),
        Some(SessionCode::Unauthorized.to_code()),
        "{err:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "closed too early"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_relay_admits_anonymous_sessions_and_refuses_tokens() {
    let url = auth_relay(None, &[], &[]).await;
    assert_admitted(&url, "/", None, "anonymous at /").await;
    assert_admitted(
        &url,
        "/anything/here",
        Some(Role::Publisher),
        "anonymous publisher",
    )
    .await;
    assert_admitted(
        &url,
        "/anything",
        Some(Role::Subscriber),
        "anonymous subscriber",
    )
    .await;
    let token = key().sign(&claims("", &["**"], &["**"])).unwrap();
    assert_refused(&url, &with_token("/", &token), None, "token without a key").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_patterns_admit_anonymous_sessions_only_under_them() {
    let key = key();
    let url = auth_relay(
        Some(vec![key.clone()]),
        &["anon/**"],
        &["demo/**", "anon/**"],
    )
    .await;
    assert_admitted(&url, "/anon", Some(Role::Publisher), "publish under anon").await;
    assert_admitted(&url, "/anon/room", None, "both under anon").await;
    assert_admitted(
        &url,
        "/demo",
        Some(Role::Subscriber),
        "subscribe under demo",
    )
    .await;
    assert_refused(&url, "/demo", Some(Role::Publisher), "publish under demo").await;
    assert_refused(&url, "/other", None, "outside").await;
    assert_refused(&url, "/anonymous", None, "prefix lookalike").await;
    // At `/` the public grant covers only part of the tree: admitted, each path checked.
    assert_admitted(&url, "/", None, "root").await;
    // A token still works next to the public grant.
    let token = key.sign(&claims("private", &["**"], &[])).unwrap();
    assert_admitted(
        &url,
        &with_token("/private", &token),
        Some(Role::Publisher),
        "token",
    )
    .await;
    // With only public patterns, any token is refused (no key).
    let url = auth_relay(None, &[], &["demo/**"]).await;
    assert_refused(
        &url,
        &with_token("/demo", &token),
        None,
        "token without a key",
    )
    .await;
    assert_admitted(&url, "/demo", Some(Role::Subscriber), "public only").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_literal_public_pattern_is_refused_at_startup() {
    starling_net::tls::install_default_provider();
    let result = starling_relay::Relay::bind(starling_relay::RelayConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        auth: starling_relay::AuthConfig {
            public_subscribe: patterns(&["demo"]),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    assert!(result.is_err());
}

/// A WebSocket upgrade request for `target`; the response status.
async fn upgrade_status(url: &Url, target: &str) -> u16 {
    http_support::upgrade_head(url, target).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_upgrades_are_refused_with_401_before_upgrading() {
    let key = key();
    let url = auth_relay(Some(vec![key.clone()]), &[], &["demo/**"]).await;
    let token = key.sign(&claims("room", &["**"], &["**"])).unwrap();
    assert_eq!(
        upgrade_status(&url, &with_token("/room", &token)).await,
        101
    );
    assert_eq!(upgrade_status(&url, "/demo").await, 101);
    assert_eq!(upgrade_status(&url, "/room").await, 401);
    assert_eq!(
        upgrade_status(&url, &with_token("/other", &token)).await,
        401
    );
    let mut expired = claims("room", &["**"], &["**"]);
    expired.expires = Some(SystemTime::now() - Duration::from_secs(10));
    let expired = sign_raw(&key, serde_json::to_value(&expired).unwrap());
    assert_eq!(
        upgrade_status(&url, &with_token("/room", &expired)).await,
        401
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webtransport_carries_the_token_in_the_connect_url() {
    let key = key();
    let url = auth_relay(Some(vec![key.clone()]), &[], &[]).await;
    let token = key.sign(&claims("room", &[], &["**"])).unwrap();
    let port = url.port().unwrap();
    let version = starling_proto::Version::Lite06;
    let client = starling_net::Client::new(
        starling_net::ClientConfig::default()
            .with_alpns(&[version.alpn()])
            .with_tls(starling_net::TlsVerify::Disabled),
    )
    .unwrap();
    let dial = |target: String| {
        let client = client.clone();
        async move {
            let url = Url::parse(&format!("https://127.0.0.1:{port}{target}")).unwrap();
            let transport = within(client.connect(&url)).await.unwrap().transport;
            let setup = starling_session::ClientSetup {
                role: Some(Role::Subscriber),
                ..Default::default()
            };
            within(starling_session::Session::connect(
                transport,
                version,
                setup,
                SessionConfig::new(random_hop()),
            ))
            .await
        }
    };
    let session = dial(with_token("/room", &token)).await.expect("admitted");
    let closed = tokio::time::timeout(Duration::from_millis(300), session.closed()).await;
    assert!(closed.is_err(), "closed: {closed:?}");
    let err = match dial("/room".into()).await {
        Err(err) => err,
        Ok(session) => within(session.closed()).await,
    };
    assert_eq!(
        peer_code(&err),
        Some(SessionCode::Unauthorized.to_code()),
        "{err:?}"
    );
}

/// A session over QMux (`ws://` or `tcp://`) to `url`, sending the client's SETUP Path.
async fn qmux_session(
    url: &str,
) -> Result<starling_session::Session<starling_net::qmux::QmuxTransport>, String> {
    let version = starling_proto::Version::Lite06;
    let url = Url::parse(url).unwrap();
    let connected = within(starling_net::qmux::connect(
        &url,
        &[version.alpn()],
        &starling_net::TlsVerify::Disabled,
    ))
    .await
    .map_err(|err| err.to_string())?;
    let setup = starling_session::ClientSetup {
        path: connected.setup_path.clone(),
        role: Some(Role::Subscriber),
        ..Default::default()
    };
    within(starling_session::Session::connect(
        connected.transport,
        version,
        setup,
        SessionConfig::new(random_hop()),
    ))
    .await
    .map_err(|err| format!("{err:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qmux_over_tcp_and_websocket_carries_the_token() {
    let key = key();
    let (relay, url) = common::bind_relay(starling_relay::RelayConfig {
        listen_tcp: Some("127.0.0.1:0".parse().unwrap()),
        auth: starling_relay::AuthConfig {
            keys: Some(starling_auth::KeySet::new(vec![key.clone()]).into()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let tcp = relay.tcp_addr().unwrap();
    tokio::spawn(relay.run());
    let port = url.port().unwrap();
    let token = key.sign(&claims("room", &[], &["**"])).unwrap();

    for base in [format!("tcp://{tcp}"), format!("ws://127.0.0.1:{port}")] {
        let session = qmux_session(&format!("{base}{}", with_token("/room", &token)))
            .await
            .unwrap_or_else(|err| panic!("{base}: {err}"));
        let closed = tokio::time::timeout(Duration::from_millis(300), session.closed()).await;
        assert!(closed.is_err(), "{base}: closed: {closed:?}");
    }
    // TCP: the SETUP Path carries no token, so the session is closed with UNAUTHORIZED.
    let err = match qmux_session(&format!("tcp://{tcp}/room")).await {
        Err(err) => err,
        Ok(session) => format!("{:?}", within(session.closed()).await),
    };
    assert!(err.contains("code: 2"), "tcp: {err}");
    // WebSocket: refused with 401 before the upgrade.
    let err = qmux_session(&format!("ws://127.0.0.1:{port}/other?jwt={token}"))
        .await
        .err()
        .expect("refused");
    assert!(err.contains("401"), "ws: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_removed_from_its_directory_stops_sessions_within_the_max_age() {
    let dir = tempfile::tempdir().unwrap();
    let key = key();
    let key_file = dir.path().join(format!("{}.jwk", key.kid().unwrap()));
    key.write_file(&key_file).unwrap();
    let max_age = Duration::from_secs(3);
    let (relay, url) = common::bind_relay(RelayConfig {
        auth: AuthConfig {
            keys: Some(KeySource::Dir(dir.path().to_path_buf())),
            max_age,
            ..AuthConfig::default()
        },
        ..Default::default()
    })
    .await;
    tokio::spawn(relay.run());
    let target = with_token("/room", &key.sign(&claims("room", &[], &["**"])).unwrap());
    let subscriber = || {
        connect(
            &url,
            &target,
            Some(Role::Subscriber),
            SessionConfig::new(random_hop()),
        )
    };
    let live = subscriber().await.expect("admitted");

    std::fs::remove_file(&key_file).unwrap();
    let revoked = std::time::Instant::now();
    // Inside the window the credential's cached decision still admits it…
    let inside = subscriber().await.expect("admitted inside the max age");
    assert!(
        revoked.elapsed() < max_age,
        "the window passed before the check"
    );
    // …and once it is re-checked against the directory, every session holding it closes.
    assert_closed_within(&[&live, &inside], revoked, max_age).await;
    assert_refused(&url, &target, Some(Role::Subscriber), "after the window").await;

    // A key added to the directory verifies without a restart.
    let added = auth_support::key();
    added
        .write_file(dir.path().join(format!("{}.jwk", added.kid().unwrap())))
        .unwrap();
    let token = added.sign(&claims("room", &[], &["**"])).unwrap();
    assert_admitted(
        &url,
        &with_token("/room", &token),
        Some(Role::Subscriber),
        "a key added later",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_requests_are_admitted_by_their_jwt() {
    let key = key();
    let (relay, url) = common::bind_relay(RelayConfig {
        auth: AuthConfig {
            keys: Some(starling_auth::KeySet::new(vec![key.clone()]).into()),
            ..AuthConfig::default()
        },
        ..Default::default()
    })
    .await;
    let relay_origin = relay.origin().clone();
    tokio::spawn(relay.run());
    let port = url.port().unwrap();

    // A publisher announces `room/alice` and `room/bob`.
    let origin = Origin::new();
    let mut held = Vec::new();
    for name in ["alice", "bob"] {
        let broadcast = BroadcastProducer::new(Limits::default());
        let route = origin
            .publish(
                Path::new(name).unwrap(),
                broadcast.consume(),
                Route::local(),
            )
            .unwrap();
        held.push((broadcast, route));
    }
    let mut config = SessionConfig::new(random_hop());
    config.publish = Some(origin.clone());
    let publish = key.sign(&claims("room", &["**"], &[])).unwrap();
    let _publisher = connect(
        &url,
        &with_token("/room", &publish),
        Some(Role::Publisher),
        config,
    )
    .await
    .unwrap();
    let interest = relay_origin.interest(Path::new("room").unwrap()).unwrap();
    let mut changed = Vec::new();
    while relay_origin
        .announced(&Path::new("room").unwrap(), None)
        .len()
        < 2
    {
        within(interest.changed(&mut changed)).await;
    }

    let everything = key.sign(&claims("room", &[], &["**"])).unwrap();
    let alice = key.sign(&claims("room", &[], &["alice"])).unwrap();
    let operator = key.sign(&claims("", &[], &["**"])).unwrap();
    let listing = |token: &str| format!("/announced/room?jwt={token}");
    assert_eq!(http_status(port, "/announced/room").await, 401, "no token");
    // A `?` encoded in the path stays in the path: the request's own token still counts.
    assert_eq!(
        http_get(port, &format!("/announced/room/alice%3Fx?jwt={everything}")).await,
        (200, String::new())
    );
    assert_eq!(
        http_get(port, &listing(&everything)).await,
        (200, "alice\nbob".to_string())
    );
    // Only what the grant may subscribe to is listed.
    assert_eq!(
        http_get(port, &listing(&alice)).await,
        (200, "alice".to_string())
    );
    assert_eq!(
        http_status(port, &listing(&publish)).await,
        401,
        "publish only"
    );
    assert_eq!(
        http_status(port, &format!("/announced/other?jwt={everything}")).await,
        401,
        "outside the root"
    );
    assert_eq!(
        http_status(port, &format!("/fetch/room/bob/chat?jwt={alice}")).await,
        401,
        "a broadcast outside the grant"
    );
    // The status endpoints need an operator's grant.
    for path in ["/", "/status.json", "/events"] {
        assert_eq!(http_status(port, path).await, 401, "{path} without a token");
        assert_eq!(
            http_status(port, &format!("{path}?jwt={everything}")).await,
            401,
            "{path} with a room token"
        );
    }
    for path in ["/", "/status.json"] {
        assert_eq!(
            http_status(port, &format!("{path}?jwt={operator}")).await,
            200,
            "{path} with an operator token"
        );
    }
}
