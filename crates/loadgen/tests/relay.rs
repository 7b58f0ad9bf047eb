//! End to end against an in-process relay on loopback: a failed group is counted and skipped
//! while the subscription goes on, and tiny fanout, burst and dash runs deliver everything.

mod common;

use bytes::Bytes;
use common::{connect_args, start_relay, within};
use starling_loadgen::burst::{self, BurstArgs};
use starling_loadgen::clock::Clock;
use starling_loadgen::connect::Dialer;
use starling_loadgen::countdown::Countdown;
use starling_loadgen::dash::{self, DashArgs};
use starling_loadgen::fanout::{self, FanoutArgs};
use starling_loadgen::frame::FrameHeader;
use starling_loadgen::publisher::{connect_publisher, track_name, Publication};
use starling_loadgen::reader::{read_track, ReadContext, TrackRead};
use starling_loadgen::recorder::Recorder;
use starling_loadgen::run::announced;
use starling_loadgen::RunOptions;
use starling_model::{Frame, Origin, StartAt, TrackInfo};
use starling_proto::{Path, Role, SessionCode, StreamCode};
use starling_session::SessionConfig;
use tokio::sync::watch;
use url::Url;

fn options() -> RunOptions {
    RunOptions {
        relay_pids: vec![std::process::id()],
        progress: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_group_and_an_undecodable_group_are_counted_and_skipped() {
    let url = start_relay().await;
    let clock = Clock::new();
    let dialer = Dialer::new(&connect_args()).unwrap();
    let path = Path::new("failing").unwrap();
    let publication = Publication::new(path.clone(), 1, TrackInfo::default(), 64, &clock).unwrap();
    let publisher = within(
        "the publisher",
        connect_publisher(&dialer, &url, publication.origin(), false),
    )
    .await
    .unwrap();

    let origin = Origin::new();
    let mut config = SessionConfig::new(0);
    config.consume = Some(origin.clone());
    config.announce_prefixes = vec![path.clone()];
    let subscriber = within(
        "the subscriber",
        dialer.connect(&url, Role::Subscriber, config),
    )
    .await
    .unwrap();
    let broadcast = within("the announcement", announced(&origin, &path))
        .await
        .unwrap();
    let track = broadcast
        .subscribe_track(&track_name(0), StartAt::default())
        .unwrap();

    let recorder = Recorder::new();
    let primed = Countdown::new(1);
    let (seen_tx, mut seen) = watch::channel(None::<u64>);
    // The highest sequence seen: groups travel on their own streams, so frame 0 may land
    // after frame 1, and a plain "latest" would hide that frame 1 arrived.
    let hook = move |header: &FrameHeader, _now: u64| {
        seen_tx.send_if_modified(|seen| {
            let higher = seen.is_none_or(|s| header.sequence > s);
            if higher {
                *seen = Some(header.sequence);
            }
            higher
        });
    };
    let ctx = ReadContext {
        clock: &clock,
        recorder: &recorder,
        ready: Some(&primed),
        on_frame: Some(&hook),
    };
    let (last_tx, last_rx) = watch::channel(None);
    let reading = read_track(
        track,
        &ctx,
        TrackRead::from_start(),
        last_rx,
        std::future::pending(),
    );

    let producer = &publication.tracks()[0];
    let publish = async {
        within("the prime frame", primed.wait()).await;
        // Timestamps in the track's timescale (ms), like the prime frame's: a group far older
        // than the newest would leave the cache at once.
        let now_ms = || clock.now_ns() / 1_000_000;
        let frame = |seq: u64| Frame {
            timestamp: now_ms(),
            payload: FrameHeader::new(seq, clock.now_ns()).frame(64).unwrap(),
        };
        // Group 1: one good frame.
        let mut g1 = producer.create_group(1).unwrap();
        g1.write_frame(frame(0)).unwrap();
        g1.finish();
        // Group 2: a frame the reader gets, then a reset mid-group.
        let mut g2 = producer.create_group(2).unwrap();
        g2.write_frame(frame(1)).unwrap();
        within("frame 1", seen.wait_for(|s| s.is_some_and(|s| s >= 1)))
            .await
            .unwrap();
        g2.abort(StreamCode::App(7));
        // Group 3: a frame that is not a load frame.
        let mut g3 = producer.create_group(3).unwrap();
        g3.write_frame(Frame {
            timestamp: now_ms(),
            payload: Bytes::from_static(b"hello"),
        })
        .unwrap();
        g3.finish();
        // Group 4: the subscription still delivers.
        let mut g4 = producer.create_group(4).unwrap();
        g4.write_frame(frame(2)).unwrap();
        g4.finish();
        last_tx.send_replace(Some(4));
        last_tx
    };
    let (read, _last_tx) = within("the reader to finish", async {
        tokio::join!(reading, publish)
    })
    .await;

    assert_eq!(read.frames.received(), 3, "frames 0, 1 and 2");
    assert!(read.frames.is_complete_through(2));
    assert!(read.groups.is_complete_through(4), "groups 0..=4 all ended");
    let errors = recorder.errors.snapshot();
    let resets: u64 = errors
        .iter()
        .filter(|(kind, _)| kind.starts_with("group_reset:"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(resets, 1, "{errors:?}");
    assert_eq!(
        errors.get("group_reset:App(7)"),
        Some(&1),
        "the publisher's code reaches the reader"
    );
    assert_eq!(errors.get("decode_short"), Some(&1), "{errors:?}");
    assert_eq!(Recorder::load(&recorder.groups_failed), 2);
    assert_eq!(Recorder::load(&recorder.groups), 5);
    assert_eq!(recorder.frames(), 3);
    assert_eq!(recorder.delivery.count(), 3);

    subscriber.close(SessionCode::NoError, "done");
    publisher.close(SessionCode::NoError, "done");
    dialer.close().await;
}

fn tiny_fanout(url: Url) -> FanoutArgs {
    FanoutArgs {
        subscribers: 2,
        tracks: 1,
        fps: 50.0,
        duration_secs: 0.5,
        group_frames: 5,
        frame_size: 256,
        drain_ms: 10_000,
        connect: connect_args(),
        ..FanoutArgs::new(url)
    }
}

async fn fanout_delivers_every_frame(url: Url) {
    let args = tiny_fanout(url);
    let frames = args.frames();
    assert_eq!(frames, 25);
    let summary = within(
        "the fanout run",
        fanout::run(&args, &options(), std::future::pending()),
    )
    .await
    .unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert_eq!(summary.connections.attempted, 2);
    assert_eq!(summary.connections.connected, 2);
    let loss = summary.frames.loss;
    assert_eq!(loss.expected, 2 * frames);
    assert_eq!(loss.received, 2 * frames);
    assert_eq!(loss.lost, 0);
    assert_eq!(loss.duplicates, 0);
    assert_eq!(summary.frames.delivered, 2 * frames);
    assert_eq!(summary.frames.bytes, 2 * frames * 256);
    assert_eq!(summary.frames.groups_failed, 0);
    assert_eq!(summary.latency["delivery"].count, 2 * frames);
    assert_eq!(summary.latency["first_frame"].count, 2);
    assert_eq!(summary.latency["connect"].count, 2);
    assert!(summary.latency["delivery"].max_ms.unwrap() < 5_000.0);
    assert_eq!(summary.relays.len(), 1);
    assert!(summary.relays[0].peak_rss_bytes > 0);
}

/// The receive-window grid's short mode (the whole grid is `scripts/window-grid.sh`): 16
/// tracks each sending a 256 KiB frame per round, all due at once (4 MiB bursts), through a
/// relay whose receive window is 1 MiB with a 128 KiB stream window. Frames go to the relay's
/// cache in pieces as they arrive, so nothing is evicted: every frame arrives, no group is
/// reset. (Read whole, the bursts would overflow the window and evict.)
async fn bursts_larger_than_the_window_deliver_every_frame(url: Url) {
    let args = FanoutArgs {
        subscribers: 1,
        tracks: 16,
        fps: 10.0,
        duration_secs: 0.3,
        group_frames: 1,
        frame_size: 256 * 1024,
        drain_ms: 30_000,
        connect: connect_args(),
        ..FanoutArgs::new(url)
    };
    let summary = within(
        "the burst run",
        fanout::run(&args, &options(), std::future::pending()),
    )
    .await
    .unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    let loss = summary.frames.loss;
    assert_eq!(loss.expected, 16 * 3);
    assert_eq!((loss.received, loss.lost), (16 * 3, 0));
    assert_eq!(summary.frames.bytes, 16 * 3 * 256 * 1024);
    assert!(summary.throughput_mib_s.is_some_and(|t| t > 0.0));
}

fn small_window_relay() -> starling_relay::RelayConfig {
    starling_relay::RelayConfig {
        receive_windows: starling_net::ReceiveWindows {
            connection: 1 << 20,
            stream: 128 << 10,
            initial: None,
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_larger_than_the_window_deliver_every_frame_over_raw_quic() {
    let url = common::start_relay_with(small_window_relay()).await;
    bursts_larger_than_the_window_deliver_every_frame(url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_larger_than_the_window_deliver_every_frame_over_websocket() {
    let url = common::start_relay_with(small_window_relay()).await;
    let ws = Url::parse(&format!("ws://127.0.0.1:{}/", url.port().unwrap())).unwrap();
    bursts_larger_than_the_window_deliver_every_frame(ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_over_raw_quic_delivers_every_frame() {
    let url = start_relay().await;
    fanout_delivers_every_frame(url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_over_websocket_delivers_every_frame() {
    let url = start_relay().await;
    let ws = Url::parse(&format!("ws://127.0.0.1:{}/", url.port().unwrap())).unwrap();
    fanout_delivers_every_frame(ws).await;
}

/// A relay chain: the publisher on one relay, the subscribers on a relay that dials it as a
/// cluster peer (`--subscriber-url`); every frame crosses both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_across_a_relay_chain_delivers_every_frame() {
    let first = start_relay().await;
    let second = common::start_relay_with(starling_relay::RelayConfig {
        cluster: starling_relay::ClusterConfig {
            id: Some(2),
            connect: vec![starling_relay::cluster::PeerEntry::parse(first.as_str()).unwrap()],
            connect_tls: starling_net::TlsVerify::Disabled,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let args = FanoutArgs {
        subscriber_url: Some(second),
        ..tiny_fanout(first)
    };
    let frames = args.frames();
    let summary = within(
        "the chained fanout run",
        fanout::run(&args, &options(), std::future::pending()),
    )
    .await
    .unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert_eq!(summary.frames.loss.received, 2 * frames);
    assert_eq!(summary.frames.loss.lost, 0);
    assert_eq!(
        summary.config["subscriber_url"].as_str(),
        args.subscriber_url.as_ref().map(Url::as_str)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_mixes_quic_websocket_and_http_clients() {
    let url = start_relay().await;
    let args = BurstArgs {
        clients: 6,
        concurrency: 3,
        fps: 50.0,
        frame_size: 100,
        connect: connect_args(),
        ..BurstArgs::new(url)
    };
    assert_eq!(args.mix().len(), 3);
    let summary = within(
        "the burst",
        burst::run(&args, &options(), std::future::pending()),
    )
    .await
    .unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert_eq!(summary.connections.attempted, 6);
    assert_eq!(summary.connections.connected, 6);
    assert_eq!(summary.latency["first_frame"].count, 6);
    for kind in ["quic", "websocket", "http"] {
        let part = &summary.by_kind[kind];
        assert_eq!(part.connections.connected, 2, "{kind}");
        assert_eq!(part.latency["first_frame"].count, 2, "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dash_completes_every_tick() {
    let url = start_relay().await;
    // Two URLs for one relay: the dash on "relay 0", one node on "relay 1".
    let args = DashArgs {
        tracks: 3,
        projects: 2,
        ticks: 4,
        tick_ms: 50,
        drain_ms: 10_000,
        connect: connect_args(),
        ..DashArgs::new(vec![url.clone(), url])
    };
    assert_eq!(args.node_count(), 1);
    let summary = within(
        "the dash run",
        dash::run(&args, &options(), std::future::pending()),
    )
    .await
    .unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    let readers = 2 * 3;
    assert_eq!(summary.ticks.len(), 4);
    for tick in &summary.ticks {
        assert_eq!(tick.expected, readers);
        assert_eq!(tick.received, readers, "tick {}", tick.tick);
        assert!(tick.completion_ms.is_some(), "tick {}", tick.tick);
    }
    assert_eq!(summary.latency["tick_completion"].count, 4);
    assert_eq!(summary.frames.loss.expected, readers * 4);
    assert_eq!(summary.frames.loss.lost, 0);
    assert_eq!(summary.latency["first_frame"].count, readers);
}
