//! The community scenario end to end against an in-process relay that verifies tokens from
//! the run's key directory: members over QUIC and WebSocket with their history and live
//! messages, members-only channels granted by name, HTTP agents, and members removed mid-run
//! whose sessions the relay must close.

mod common;

use common::{connect_args, start_relay_with, within};
use starling_loadgen::community::{self, CommunityArgs};
use starling_loadgen::RunOptions;
use starling_relay::{AuthConfig, KeySource, RelayConfig};

fn options() -> RunOptions {
    RunOptions {
        relay_pids: vec![std::process::id()],
        progress: false,
    }
}

/// A relay verifying tokens against `dir`, and a small community's arguments for it.
async fn community_on_a_relay(dir: &std::path::Path) -> CommunityArgs {
    let url = start_relay_with(RelayConfig {
        auth: AuthConfig {
            keys: Some(KeySource::Dir(dir.to_path_buf())),
            ..AuthConfig::default()
        },
        ..Default::default()
    })
    .await;
    CommunityArgs {
        open_channels: 6,
        member_channels: 6,
        members: 12,
        quic_weight: 1,
        ws_weight: 1,
        burst_secs: 0.3,
        live_secs: 2.5,
        message_interval_ms: 200,
        history: 3,
        key_dir: Some(dir.to_path_buf()),
        connect: connect_args(),
        ..CommunityArgs::new(url)
    }
}

/// Run `args` to its end; it must count no error.
async fn run_without_errors(args: &CommunityArgs) -> starling_loadgen::Summary {
    let summary = within(
        "the community run",
        community::run(args, &options(), std::future::pending()),
    )
    .await
    .unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    summary
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_get_their_history_and_live_messages_and_removed_members_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let args = CommunityArgs {
        open_per_member: 2,
        member_per_member: 2,
        remove_members: 3,
        remove_after_secs: 0.3,
        ..community_on_a_relay(dir.path()).await
    };
    let summary = run_without_errors(&args).await;
    assert_eq!(summary.connections.connected, 12);
    for kind in ["quic", "websocket"] {
        assert_eq!(summary.by_kind[kind].connections.connected, 6, "{kind}");
    }
    let report = summary.community.as_ref().unwrap();
    // Every member asked for 4 channels after the warm-up: each owed its last 3 messages.
    assert_eq!(report.history_owed, 12 * 4);
    assert_eq!(report.history_complete, 12 * 4);
    assert_eq!(summary.latency["history"].count, 12 * 4);
    assert_eq!(summary.latency["first_frame"].count, 12 * 4);
    assert!(summary.latency["delivery"].count > 0, "no live message");
    // The removed members' sessions were closed, each timed from the removal.
    assert_eq!((report.removed, report.removed_closed), (3, 3));
    assert_eq!(summary.latency["removal"].count, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_poll_open_channels_while_members_read_members_only_ones() {
    let dir = tempfile::tempdir().unwrap();
    let args = CommunityArgs {
        open_per_member: 0,
        member_per_member: 2,
        agents: 2,
        agent_interval_ms: 100,
        ..community_on_a_relay(dir.path()).await
    };
    let summary = run_without_errors(&args).await;
    assert_eq!(summary.by_kind["http"].connections.connected, 2);
    assert!(summary.latency["http_fetch"].count > 0);
    assert!(summary.latency["http_announced"].count > 0);
    let report = summary.community.as_ref().unwrap();
    assert_eq!(report.history_complete, 12 * 2);
}
