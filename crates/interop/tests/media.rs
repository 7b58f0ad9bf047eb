//! Real media through Starling (issue 26): ffmpeg encodes a test pattern with audio (H.264 and
//! AAC), moq-cli 0.14.10 imports it into the relay as MPEG-TS or fragmented MP4 at real time,
//! and a second moq-cli exports it back out. The video and audio frames decoded from the
//! export must be the input's, frame for frame (ffmpeg's `framemd5`), from the export's first
//! keyframe to the input's last frame: a frame the relay drops, corrupts or reorders fails the
//! case, and so does a tail it cuts. Where moq-cli itself loses its last frames at the end of
//! its input (IETF, and WebSocket at times), the input runs two seconds longer and the export
//! must hold the first four whole ([`Tail`]).
//!
//! Every case runs over WebTransport and over WebSocket (QMux), on moq-lite-06, moq-lite-07-wip
//! and IETF draft 22, each against its own in-process relay; and through two hops: two
//! Starling relays of one cluster, and Starling with moq-relay 0.17.10 as the other hop.
//! ffmpeg comes from Debian (`scripts/test.sh` installs it); moq-cli from
//! `scripts/install-peers.sh`. And RTMP in (what OBS pushes), HLS out, read by ffprobe.
//!
//! Checked once to fail (2026-12-07): with a relay dropping every 100th frame it writes, every
//! MPEG-TS case fails; moq-cli carries fMP4 a fragment (a second of video) per frame, a dozen
//! frames in a case, so there every 5th dropped (cases one at a time) fails every fMP4 case.

mod common;
mod media_compare;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use common::{free_port, Binding, Case, MoqRelay, StarlingRelay};
use starling_net::TlsVerify;
use starling_proto::{ietf::Draft, Protocol, Version};
use starling_relay::cluster::PeerEntry;
use starling_relay::ClusterConfig;
use tokio::process::Command;

use media_compare::{compare, Media, GOP};

/// Seconds of input: four groups of pictures at 25 fps.
const SECONDS: u32 = 4;
/// How long the import may take beyond the input's own duration, and the export after it.
const GRACE: Duration = Duration::from_secs(20);

/// The moq-cli 0.14.10 binary: `$STARLING_MOQ_CLI`, else the install-peers.sh location.
fn moq_cli() -> PathBuf {
    if let Some(path) = std::env::var_os("STARLING_MOQ_CLI").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    let path = PathBuf::from(home).join(".cache/starling/moq-cli-0.14.10/bin/moq");
    assert!(
        path.is_file(),
        "moq-cli 0.14.10 not found at {}: run scripts/install-peers.sh (or set STARLING_MOQ_CLI)",
        path.display()
    );
    path
}

/// The container moq-cli carries.
#[derive(Clone, Copy, Debug)]
enum Container {
    Ts,
    Fmp4,
    /// What an RTMP push carries.
    Flv,
}

impl Container {
    /// moq-cli's name for it (`import <format>`, `export <format>`).
    fn format(self) -> &'static str {
        match self {
            Container::Ts => "ts",
            Container::Fmp4 => "fmp4",
            Container::Flv => "flv",
        }
    }

    /// ffmpeg's muxer arguments for it.
    fn muxer(self) -> &'static [&'static str] {
        match self {
            Container::Ts => &["-f", "mpegts"],
            Container::Flv => &["-f", "flv"],
            Container::Fmp4 => &[
                "-f",
                "mp4",
                "-movflags",
                "frag_keyframe+empty_moov+default_base_moof",
            ],
        }
    }
}

/// How moq-cli reaches the relay.
#[derive(Clone, Copy, Debug)]
enum Transport {
    WebTransport,
    WebSocket,
}

/// A scratch directory for one case, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "starling-media-{}-{name}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("STARLING_MEDIA_KEEP").is_some() {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run a command to its end within `limit`; its stdout, or an error with its stderr.
async fn output(command: &mut Command, limit: Duration) -> anyhow::Result<Vec<u8>> {
    let out = tokio::time::timeout(limit, command.kill_on_drop(true).output())
        .await
        .context("timed out")??;
    ensure!(
        out.status.success(),
        "exited with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out.stdout)
}

/// Encode `seconds` of the test pattern with a tone: H.264 (a keyframe every `GOP` frames, no
/// B-frames) and AAC, in `container`.
async fn encode(container: Container, seconds: u32, to: &Path) -> anyhow::Result<()> {
    output(
        Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-y"])
            .args(["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25"])
            .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"])
            .args(["-t", &seconds.to_string()])
            .args(["-c:v", "libx264", "-preset", "ultrafast", "-g"])
            .arg(GOP.to_string())
            .args(["-bf", "0", "-pix_fmt", "yuv420p", "-c:a", "aac"])
            .args(container.muxer())
            .arg(to),
        Duration::from_secs(60),
    )
    .await
    .context("ffmpeg encoding the test pattern")?;
    Ok(())
}

/// The MD5 of every frame of `file`'s `media` (see [`Media::codec`]), in order.
async fn decoded_frames(file: &Path, media: Media) -> anyhow::Result<Vec<String>> {
    let out = output(
        Command::new("ffmpeg")
            .args(["-hide_banner", "-loglevel", "error", "-i"])
            .arg(file)
            .args(["-map", media.map()])
            .args(media.codec())
            .args(["-f", "framemd5", "-"]),
        Duration::from_secs(60),
    )
    .await
    .with_context(|| format!("ffmpeg decoding {}", file.display()))?;
    Ok(String::from_utf8(out)?
        .lines()
        .filter(|line| !line.starts_with('#'))
        // stream, dts, pts, duration, size, hash, then any side data's count and hash.
        .filter_map(|line| line.split(',').nth(5))
        .map(|hash| hash.trim().to_string())
        .collect())
}

/// How much of the input's end a case's export must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tail {
    /// Every frame to the input's last.
    Whole,
    /// The input runs [`TAIL_MARGIN`] seconds past [`SECONDS`], and the export must hold every
    /// frame of the first [`SECONDS`]; what follows may lose whole groups and be cut short,
    /// as long as what the export holds is still the input's, in order (see [`compare`]).
    /// For the cases where moq-cli 0.14.10 loses
    /// its own last frames at the end of its input, through any relay (docs/spec-notes.md,
    /// "moq-cli at the end of its input"): on IETF its session closes at once without
    /// draining (moq-net 0.3.18 tracks what it owes on lite only), and over WebSocket its
    /// QMux sender at times holds its last group streams past its 1 s close drain while the
    /// relay has credit to spare. moq-relay 0.17.10 loses the same tails, and on its own
    /// cuts a tail when moq-cli unannounces before its last groups: every path through it
    /// takes the margin.
    Margin,
}

/// Seconds the input runs past [`SECONDS`] in a [`Tail::Margin`] case: two groups of pictures.
const TAIL_MARGIN: u32 = 2;

impl Tail {
    fn of(protocol: Protocol, transport: Transport, hops: Hops) -> Self {
        match (protocol, transport, hops) {
            // moq-relay 0.17.10 ends a broadcast's subscriptions when its publisher
            // unannounces, which moq-cli does right before its last groups go out.
            (_, _, Hops::MoqRelayThenStarling | Hops::StarlingThenMoqRelay) => Tail::Margin,
            (Protocol::Lite(_), Transport::WebTransport, _) => Tail::Whole,
            _ => Tail::Margin,
        }
    }

    /// Seconds of input.
    fn seconds(self) -> u32 {
        match self {
            Tail::Whole => SECONDS,
            Tail::Margin => SECONDS + TAIL_MARGIN,
        }
    }

    /// The input frame (exclusive) the export must reach, of `frames` in all.
    fn through(self, frames: usize) -> usize {
        frames * SECONDS as usize / self.seconds() as usize
    }
}

/// The connect arguments of a moq-cli run against the relay on `port` of 127.0.0.1.
fn connect_args(port: u16, protocol: Protocol, transport: Transport) -> Vec<String> {
    let url = match transport {
        // An http URL: moq-cli fetches the certificate's fingerprint from the relay's HTTP
        // listener, then dials WebTransport.
        Transport::WebTransport => format!("http://127.0.0.1:{port}/"),
        Transport::WebSocket => format!("ws://127.0.0.1:{port}/"),
    };
    vec![
        "--connect".into(),
        url,
        "--connect-version".into(),
        protocol.name().into(),
    ]
}

/// The relays between the import and the export.
#[derive(Clone, Copy, Debug)]
enum Hops {
    /// One Starling relay.
    Starling,
    /// Import at one Starling relay, export at a second that dials it as a cluster peer.
    TwoStarling,
    /// Import at moq-relay 0.17.10, export at a Starling relay that dials it as a peer.
    MoqRelayThenStarling,
    /// Import at Starling, export at moq-relay 0.17.10, which dials Starling as a peer.
    StarlingThenMoqRelay,
}

/// The relays of one case, running: where the import and the export connect.
struct Relays {
    import_port: u16,
    export_port: u16,
    _starling: Vec<StarlingRelay>,
    _moq: Option<MoqRelay>,
}

/// The versions every Starling relay of these tests serves.
fn starling_versions() -> Vec<Protocol> {
    vec![
        Protocol::Lite(Version::Lite07Wip),
        Protocol::Lite(Version::Lite06),
        Protocol::Ietf(Draft::D22),
    ]
}

impl Relays {
    async fn start(hops: Hops, protocol: Protocol) -> anyhow::Result<Self> {
        // Cluster peers link over WebTransport, in the case's version.
        let case = Case::new(protocol, Binding::WebTransport);
        let (starling, moq) = match hops {
            Hops::Starling => {
                let relay = StarlingRelay::start(starling_versions()).await?;
                (vec![relay], None)
            }
            Hops::TwoStarling => {
                let origin = StarlingRelay::start_with(starling_versions(), |config| {
                    config.cluster.id = Some(1001);
                })
                .await?;
                let edge = dialing(origin.url(case), &origin.fingerprint, 1002).await?;
                (vec![origin, edge], None)
            }
            Hops::MoqRelayThenStarling => {
                let moq =
                    MoqRelay::start_with(protocol, &["--cluster-id".into(), "2001".into()]).await?;
                let edge = dialing(moq.url(case), &moq.fingerprint, 1001).await?;
                (vec![edge], Some(moq))
            }
            Hops::StarlingThenMoqRelay => {
                let origin = StarlingRelay::start_with(starling_versions(), |config| {
                    config.cluster.id = Some(1001);
                })
                .await?;
                let moq = MoqRelay::start_with(
                    protocol,
                    &[
                        "--cluster-id".into(),
                        "2001".into(),
                        "--cluster-connect".into(),
                        origin.url(case).to_string(),
                        "--connect-tls-fingerprint".into(),
                        origin.fingerprint.clone(),
                    ],
                )
                .await?;
                (vec![origin], Some(moq))
            }
        };
        let first = starling[0].addr.port();
        let (import_port, export_port) = match (hops, &moq) {
            (Hops::Starling, _) => (first, first),
            (Hops::TwoStarling, _) => (first, starling[1].addr.port()),
            (Hops::MoqRelayThenStarling, Some(moq)) => (moq.port, first),
            (Hops::StarlingThenMoqRelay, Some(moq)) => (first, moq.port),
            _ => unreachable!("moq-relay runs on the paths through it"),
        };
        Ok(Relays {
            import_port,
            export_port,
            _starling: starling,
            _moq: moq,
        })
    }
}

/// A Starling relay that dials `peer` (certificate pinned) as its cluster peer.
async fn dialing(peer: url::Url, fingerprint: &str, id: u64) -> anyhow::Result<StarlingRelay> {
    let pin = starling_net::tls::parse_fingerprint(fingerprint).context("the peer's pin")?;
    let peer = PeerEntry::parse(peer.as_str())?;
    StarlingRelay::start_with(starling_versions(), |config| {
        config.cluster = ClusterConfig {
            id: Some(id),
            connect: vec![peer],
            connect_tls: TlsVerify::PinnedSha256(vec![pin]),
            ..ClusterConfig::default()
        };
    })
    .await
}

async fn carry(protocol: Protocol, container: Container, transport: Transport, hops: Hops) {
    common::init_tracing();
    if let Err(err) = try_carry(protocol, container, transport, hops).await {
        panic!(
            "{} {:?} over {transport:?} through {hops:?}: {err:#}",
            protocol.name(),
            container
        );
    }
}

async fn try_carry(
    protocol: Protocol,
    container: Container,
    transport: Transport,
    hops: Hops,
) -> anyhow::Result<()> {
    let scratch = Scratch::new(container.format());
    let input = scratch.path("in");
    let exported = scratch.path("out");
    let tail = Tail::of(protocol, transport, hops);
    encode(container, tail.seconds(), &input).await?;
    let relays = Relays::start(hops, protocol).await?;
    let broadcast = "media/test";

    // The export first, so it is there for the first group.
    let mut export = Command::new(moq_cli())
        .args(connect_args(relays.export_port, protocol, transport))
        .args(["export", "--broadcast", broadcast, container.format()])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&exported)?)
        .stderr(std::fs::File::create(scratch.path("export.log"))?)
        .kill_on_drop(true)
        .spawn()
        .context("spawning moq export")?;

    // ffmpeg paces the input at real time into moq-cli's import, as a live encoder would.
    let pipeline = format!(
        "ffmpeg -hide_banner -loglevel error -re -i '{}' -c copy {} - | '{}' {} import \
         --broadcast {broadcast} {} 2>'{}'",
        input.display(),
        container.muxer().join(" "),
        moq_cli().display(),
        connect_args(relays.import_port, protocol, transport).join(" "),
        container.format(),
        scratch.path("import.log").display(),
    );
    output(
        Command::new("sh").args(["-c", &pipeline]),
        Duration::from_secs(tail.seconds().into()) + GRACE,
    )
    .await
    .context("the import")?;

    // The export ends with the broadcast; a cut-short export is caught by the comparison.
    match tokio::time::timeout(GRACE, export.wait()).await {
        Ok(status) => {
            let status = status?;
            if !status.success() {
                tracing::info!(%status, "moq export exited unsuccessfully");
            }
        }
        Err(_) => {
            export.start_kill()?;
            let _ = export.wait().await;
            bail!(
                "the export did not end after the import; its log:\n{}",
                std::fs::read_to_string(scratch.path("export.log")).unwrap_or_default()
            );
        }
    }
    drop(relays);

    let log = || {
        let read = |name| std::fs::read_to_string(scratch.path(name)).unwrap_or_default();
        format!(
            "{}\nimport log:\n{}",
            read("export.log"),
            read("import.log")
        )
    };
    for media in [Media::Video, Media::Audio] {
        let want = decoded_frames(&input, media).await?;
        if let Media::Video = media {
            ensure!(
                want.len() == tail.seconds() as usize * 25,
                "the input decoded to {} video frames",
                want.len()
            );
        }
        let got = decoded_frames(&exported, media)
            .await
            .with_context(|| format!("export log:\n{}", log()))?;
        compare(media, &want, &got, tail.through(want.len()))
            .with_context(|| format!("export log:\n{}", log()))?;
    }
    Ok(())
}

macro_rules! cases {
    ($($(#[$attr:meta])* $name:ident: $protocol:expr, $container:ident, $transport:ident, $path:ident;)*) => {$(
        $(#[$attr])*
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            carry($protocol.into(), Container::$container, Transport::$transport, Hops::$path).await;
        }
    )*};
}

cases! {
    ts_lite06_webtransport: Version::Lite06, Ts, WebTransport, Starling;
    ts_lite06_websocket: Version::Lite06, Ts, WebSocket, Starling;
    ts_lite07_webtransport: Version::Lite07Wip, Ts, WebTransport, Starling;
    ts_lite07_websocket: Version::Lite07Wip, Ts, WebSocket, Starling;
    ts_ietf22_webtransport: Draft::D22, Ts, WebTransport, Starling;
    ts_ietf22_websocket: Draft::D22, Ts, WebSocket, Starling;
    fmp4_lite06_webtransport: Version::Lite06, Fmp4, WebTransport, Starling;
    fmp4_lite06_websocket: Version::Lite06, Fmp4, WebSocket, Starling;
    fmp4_lite07_webtransport: Version::Lite07Wip, Fmp4, WebTransport, Starling;
    fmp4_lite07_websocket: Version::Lite07Wip, Fmp4, WebSocket, Starling;
    fmp4_ietf22_webtransport: Draft::D22, Fmp4, WebTransport, Starling;
    fmp4_ietf22_websocket: Draft::D22, Fmp4, WebSocket, Starling;
    ts_lite06_two_starling: Version::Lite06, Ts, WebTransport, TwoStarling;
    fmp4_lite07_two_starling: Version::Lite07Wip, Fmp4, WebTransport, TwoStarling;
    ts_lite06_moq_relay_then_starling: Version::Lite06, Ts, WebTransport, MoqRelayThenStarling;
    ts_lite06_starling_then_moq_relay: Version::Lite06, Ts, WebTransport, StarlingThenMoqRelay;
}

/// RTMP ingest as OBS does it, HLS out: ffmpeg pushes FLV over RTMP to `moq import rtmp
/// --listen`, which publishes into Starling; `moq export hls` serves the broadcast from the
/// relay, and ffprobe reads the playlist's segments: H.264 at the input's size and AAC.
/// moq-cli's HLS server fetches each segment's groups from the relay (moq-lite FETCH) without
/// subscribing to the tracks: the relay asks the source for what it does not hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rtmp_in_hls_out() {
    if let Err(err) = try_rtmp_in_hls_out().await {
        panic!("RTMP in, HLS out: {err:#}");
    }
}

async fn try_rtmp_in_hls_out() -> anyhow::Result<()> {
    let scratch = Scratch::new("rtmp");
    // Longer than the test reads: the push never ends under it.
    let input = scratch.path("in.flv");
    encode(Container::Flv, 60, &input).await?;
    let relays = Relays::start(Hops::Starling, Version::Lite06.into()).await?;
    let connect = connect_args(
        relays.import_port,
        Version::Lite06.into(),
        Transport::WebTransport,
    );
    // moq-cli's RTMP and HLS listeners.
    let (rtmp, hls) = (free_port()?, free_port()?);
    let broadcast = "live";
    let spawn = |args: Vec<String>, log: &str| -> anyhow::Result<tokio::process::Child> {
        Command::new(moq_cli())
            .args(&connect)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(scratch.path(log))?)
            .kill_on_drop(true)
            .spawn()
            .context("spawning moq-cli")
    };
    let _import = spawn(
        vec![
            "import".into(),
            "--broadcast".into(),
            broadcast.into(),
            "rtmp".into(),
            "--listen".into(),
            format!("127.0.0.1:{rtmp}"),
        ],
        "import.log",
    )?;
    let _export = spawn(
        vec![
            "export".into(),
            "--broadcast".into(),
            broadcast.into(),
            "hls".into(),
            "--listen".into(),
            format!("127.0.0.1:{hls}"),
        ],
        "export.log",
    )?;
    let logs = || {
        ["import.log", "export.log", "push.log"]
            .map(|log| {
                format!(
                    "{log}:\n{}",
                    std::fs::read_to_string(scratch.path(log)).unwrap_or_default()
                )
            })
            .join("\n")
    };
    // The RTMP listener is up once it accepts a connection.
    let up = async {
        while tokio::net::TcpStream::connect(("127.0.0.1", rtmp))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(GRACE, up)
        .await
        .with_context(|| format!("the RTMP listener never came up; {}", logs()))?;

    // Pushed at real time, as an encoder would.
    let mut push = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-re", "-i"])
        .arg(&input)
        .args(["-c", "copy", "-f", "flv"])
        .arg(format!("rtmp://127.0.0.1:{rtmp}/live/key"))
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(scratch.path("push.log"))?)
        .kill_on_drop(true)
        .spawn()
        .context("spawning ffmpeg's RTMP push")?;

    // ffprobe reads the playlist's current window, segments included, until it reads a
    // second of video.
    let playlist = format!("http://127.0.0.1:{hls}/{broadcast}/master.m3u8");
    let last = std::sync::Mutex::new(String::new());
    let probe = async {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let probed = output(
                Command::new("ffprobe")
                    // Two seconds of a live playlist: it would be read to its end.
                    .args(["-v", "error", "-count_packets", "-read_intervals", "%+2"])
                    .args([
                        "-show_entries",
                        "stream=codec_name,width,height,nb_read_packets",
                    ])
                    .args(["-of", "compact"])
                    .arg(&playlist),
                Duration::from_secs(20),
            )
            .await;
            *last.lock().unwrap() = format!("{probed:?}");
            if let Ok(out) = probed {
                let text = String::from_utf8_lossy(&out).into_owned();
                let video = text.lines().find(|l| l.contains("codec_name=h264"));
                let frames = video
                    .and_then(|l| l.rsplit("nb_read_packets=").next())
                    .and_then(|n| n.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                if frames >= 25 {
                    return text;
                }
            }
        }
    };
    let probed = tokio::time::timeout(GRACE * 2, probe)
        .await
        .with_context(|| {
            format!(
                "ffprobe never read a second of video (last: {}); {}",
                last.lock().unwrap(),
                logs()
            )
        })?;
    push.start_kill()?;
    ensure!(
        probed.contains("codec_name=h264|width=320|height=240"),
        "no 320x240 H.264 rendition: {probed}"
    );
    ensure!(
        probed.contains("codec_name=aac"),
        "no AAC rendition: {probed}"
    );
    drop(relays);
    Ok(())
}
