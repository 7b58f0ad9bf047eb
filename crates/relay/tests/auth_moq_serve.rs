//! `--auth-url` against the reference auth server, `moq auth serve` (moq-cli 0.14.10), with
//! tokens signed by `moq auth sign`: admitted inside the grant, refused outside it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use starling_proto::Role;
use starling_relay::{AuthConfig, RelayConfig};
use url::Url;

mod auth_support;
mod common;

use auth_support::*;

/// The reference binary; a missing one fails the test rather than skipping it.
fn moq() -> PathBuf {
    let path = std::env::var_os("STARLING_MOQ_CLI")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").expect("HOME is set");
            PathBuf::from(home).join(".cache/starling/moq-cli-0.14.10/bin/moq")
        });
    assert!(
        path.is_file(),
        "the reference moq CLI is missing at {}: run scripts/install-peers.sh (or set STARLING_MOQ_CLI)",
        path.display()
    );
    path
}

fn moq_output(args: &[&str]) -> String {
    let output = Command::new(moq()).args(args).output().expect("moq runs");
    assert!(
        output.status.success(),
        "moq {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

/// `moq auth generate` an ES256 key into `path`.
fn generate(path: &Path) {
    moq_output(&[
        "auth",
        "generate",
        "--algorithm",
        "ES256",
        "--out",
        path.to_str().unwrap(),
    ]);
}

/// `moq auth serve` on a free loopback port, killed on drop.
struct ReferenceServer(Child);

impl Drop for ReferenceServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn serve(key: &Path) -> (ReferenceServer, Url) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(moq())
        .args(["auth", "serve", "--listen", &listen, "--key"])
        .arg(key)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moq auth serve starts");
    let server = ReferenceServer(child);
    // Ready once it accepts connections.
    common::within(async {
        while tokio::net::TcpStream::connect(&listen).await.is_err() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    (server, Url::parse(&format!("http://{listen}/")).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moq_auth_serve_decides_for_starling() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key.jwk");
    generate(&key);
    let (_server, auth_url) = serve(&key).await;
    let (relay, quic) = common::bind_relay(RelayConfig {
        auth: AuthConfig {
            url: Some(auth_url),
            ..AuthConfig::default()
        },
        ..Default::default()
    })
    .await;
    tokio::spawn(relay.run());

    let sign = |root: &str, publish: Option<&str>, subscribe: Option<&str>| {
        let mut args = vec![
            "auth",
            "sign",
            "--key",
            key.to_str().unwrap(),
            "--root",
            root,
        ];
        if let Some(publish) = publish {
            args.extend(["--publish", publish]);
        }
        if let Some(subscribe) = subscribe {
            args.extend(["--subscribe", subscribe]);
        }
        moq_output(&args)
    };
    let publisher = sign("room", Some("alice/**"), Some("*/chat"));
    let viewer = sign("room", Some("bob/**"), Some("**"));

    // Inside the grant: media flows from the publisher to the viewer.
    let (publisher_session, viewer_session) = carry_one_group(
        &quic,
        &with_token("/room", &publisher),
        &with_token("/room", &viewer),
    )
    .await;
    drop((publisher_session, viewer_session));

    // Outside it: another root, a sibling of the grant, a role the grant lacks, no token.
    assert_refused(
        &quic,
        &with_token("/other", &publisher),
        Some(Role::Publisher),
        "another root",
    )
    .await;
    assert_refused(
        &quic,
        &with_token("/room/carol", &publisher),
        Some(Role::Publisher),
        "a sibling of the grant",
    )
    .await;
    let subscribe_only = sign("room", None, Some("**"));
    assert_refused(
        &quic,
        &with_token("/room/alice", &subscribe_only),
        Some(Role::Publisher),
        "publishing with a subscribe-only grant",
    )
    .await;
    assert_refused(&quic, "/room", Some(Role::Subscriber), "no token").await;
    // A token another key signed.
    let stranger = dir.path().join("stranger.jwk");
    generate(&stranger);
    let forged = moq_output(&[
        "auth",
        "sign",
        "--key",
        stranger.to_str().unwrap(),
        "--root",
        "room",
        "--subscribe",
        "**",
    ]);
    assert_refused(
        &quic,
        &with_token("/room", &forged),
        Some(Role::Subscriber),
        "another key",
    )
    .await;
}
