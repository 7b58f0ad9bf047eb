//! `community`: a chat community on a cold relay. A warm publisher holds every channel of
//! `c/<id>` (open and members-only) and posts on each at a steady rate; then members
//! (QUIC and WebSocket) burst in within a window, each asking for its channels with their
//! recent history and staying for live messages, while HTTP agents poll the relay's
//! `/fetch` and `/announced`. Optionally, a share of the members is removed mid-run (their
//! signing key deleted), and the relay must close their sessions within its auth max age.
//!
//! [`layout`] decides who reads what, [`access`] signs the tokens, [`posting`] publishes,
//! [`history`] accounts each subscription, [`member`] and [`agent`] are the clients.

mod agent;
pub mod history;
pub mod layout;
mod member;
pub mod metrics;
pub mod posting;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use futures::FutureExt;

use starling_auth::Algorithm;
use starling_proto::SessionCode;
use url::Url;

use crate::access::{self, Credentials};
use crate::burst::AgentKind;
use crate::clock::Clock;
use crate::connect::{with_scheme, ConnectArgs, Dialer};
use crate::error::LoadError;
use crate::frame::HEADER_LEN;
use crate::histogram::Histogram;
use crate::progress::Progress;
use crate::publisher::connect_publisher;
use crate::recorder::Recorder;
use crate::report::CommunityReport;
use crate::run::{interruptible, unix_ms, RunOptions, Stop};
use crate::summary::{KindSummary, Summary};
use crate::usage::UsageProbes;
use layout::{Layout, Removal};
use posting::Channels;

#[derive(Args, Clone, Debug)]
pub struct CommunityArgs {
    /// Relay URL for the publisher and the QUIC members: https:// (WebTransport), moqt:// or
    /// moql:// (raw QUIC). The community's root is appended to its path.
    #[arg(long)]
    pub url: Url,
    /// URL for the WebSocket members [default: ws:// on the URL's host, port and path].
    #[arg(long)]
    pub ws_url: Option<Url>,
    /// Base URL of the relay's HTTP API [default: http:// on the URL's host and port].
    #[arg(long)]
    pub http_url: Option<Url>,
    /// The community's id: its channels live under `c/<id>`.
    #[arg(long, default_value = "1")]
    pub community: String,
    /// Open channels (granted to every member by one pattern).
    #[arg(long, default_value_t = 2000)]
    pub open_channels: usize,
    /// Members-only channels (granted per member by name).
    #[arg(long, default_value_t = 2000)]
    pub member_channels: usize,
    /// Members bursting in.
    #[arg(long, default_value_t = 1000)]
    pub members: usize,
    /// Open channels each member reads.
    #[arg(long, default_value_t = 2)]
    pub open_per_member: usize,
    /// Members-only channels each member reads.
    #[arg(long, default_value_t = 2)]
    pub member_per_member: usize,
    /// Share of QUIC members.
    #[arg(long, default_value_t = 0)]
    pub quic_weight: u32,
    /// Share of WebSocket members.
    #[arg(long, default_value_t = 1)]
    pub ws_weight: u32,
    /// HTTP agents polling `/fetch` and `/announced`.
    #[arg(long, default_value_t = 0)]
    pub agents: usize,
    /// Each agent's request interval, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub agent_interval_ms: u64,
    /// Every client starts within this window, evenly spread.
    #[arg(long, default_value_t = 2.0)]
    pub burst_secs: f64,
    /// How long the run goes on after the burst window.
    #[arg(long, default_value_t = 10.0)]
    pub live_secs: f64,
    /// Each channel posts one message per this many milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub message_interval_ms: u64,
    /// Bytes per message (at least the 20-byte header).
    #[arg(long, default_value_t = 300)]
    pub message_size: usize,
    /// Messages of history a member reads per channel on joining; the tracks' max age (the
    /// relay's cache age) covers two more than this at the posting rate.
    #[arg(long, default_value_t = 5)]
    pub history: u64,
    /// Per-member deadline for connecting and each channel's first message.
    #[arg(long, default_value_t = 10.0)]
    pub timeout_secs: f64,
    /// Sign tokens and write their verifying keys here (`{kid}.jwk`): start the relay with
    /// `--auth-key-dir DIR`, or its auth server with `moq auth serve --key-dir DIR`. Without
    /// it, clients present no token (an open relay).
    #[arg(long)]
    pub key_dir: Option<PathBuf>,
    /// The tokens' signing algorithm.
    #[arg(long, default_value = "ES256")]
    pub token_algorithm: String,
    /// Members signed by the removable key, whose key is deleted mid-run (needs --key-dir).
    #[arg(long, default_value_t = 0)]
    pub remove_members: usize,
    /// When the removable key is deleted, in seconds after the burst window.
    #[arg(long, default_value_t = 3.0)]
    pub remove_after_secs: f64,
    /// The relay's Prometheus endpoint, scraped before and after the burst for its access
    /// decisions (`starling_auth_*` series).
    #[arg(long)]
    pub metrics_url: Option<Url>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

impl CommunityArgs {
    /// Defaults for everything but the URL.
    pub fn new(url: Url) -> Self {
        CommunityArgs {
            url,
            ws_url: None,
            http_url: None,
            community: "1".into(),
            open_channels: 2000,
            member_channels: 2000,
            members: 1000,
            open_per_member: 2,
            member_per_member: 2,
            quic_weight: 0,
            ws_weight: 1,
            agents: 0,
            agent_interval_ms: 1000,
            burst_secs: 2.0,
            live_secs: 10.0,
            message_interval_ms: 5000,
            message_size: 300,
            history: 5,
            timeout_secs: 10.0,
            key_dir: None,
            token_algorithm: "ES256".into(),
            remove_members: 0,
            remove_after_secs: 3.0,
            metrics_url: None,
            connect: ConnectArgs::default(),
        }
    }

    pub fn layout(&self) -> Layout {
        Layout {
            open_channels: self.open_channels,
            member_channels: self.member_channels,
            open_per_member: self.open_per_member,
            member_per_member: self.member_per_member,
        }
    }

    /// The members' transports, in start order: the weights interleaved.
    pub fn mix(&self) -> Vec<AgentKind> {
        [
            (AgentKind::Quic, self.quic_weight),
            (AgentKind::WebSocket, self.ws_weight),
        ]
        .into_iter()
        .flat_map(|(kind, weight)| std::iter::repeat_n(kind, weight as usize))
        .collect()
    }

    /// The community's root path (relative to the URL's path).
    pub fn root(&self) -> String {
        let base = self.url.path().trim_matches('/');
        if base.is_empty() {
            format!("c/{}", self.community)
        } else {
            format!("{base}/c/{}", self.community)
        }
    }

    fn validate(&self) -> Result<(), LoadError> {
        let fail = |m: &str| Err(LoadError::Config(m.to_string()));
        if self.mix().is_empty() && self.members > 0 {
            return fail("at least one of --quic-weight, --ws-weight must be positive");
        }
        if self.open_channels + self.member_channels == 0 {
            return fail("the community needs at least one channel");
        }
        if self.message_size < HEADER_LEN {
            return fail("--message-size must be at least 20 (the frame header)");
        }
        if self.message_interval_ms == 0 || self.agent_interval_ms == 0 {
            return fail("intervals must be positive");
        }
        if self.remove_members > 0 && self.key_dir.is_none() {
            return fail("--remove-members needs --key-dir (removal deletes a signing key)");
        }
        for secs in [
            self.burst_secs,
            self.live_secs,
            self.timeout_secs,
            self.remove_after_secs,
        ] {
            if !secs.is_finite() || secs < 0.0 {
                return fail("durations must be finite and not negative");
            }
        }
        self.algorithm().map(|_| ())
    }

    fn algorithm(&self) -> Result<Algorithm, LoadError> {
        self.token_algorithm.parse().map_err(|_| {
            LoadError::Config(format!(
                "unknown --token-algorithm {}",
                self.token_algorithm
            ))
        })
    }

    fn interval(&self) -> Duration {
        Duration::from_millis(self.message_interval_ms)
    }
}

/// What every client task shares.
pub(crate) struct Plan {
    /// The QUIC and WebSocket URLs, the community's root in their paths.
    urls: [Url; 2],
    http_base: Url,
    root: String,
    layout: Layout,
    mix: Vec<AgentKind>,
    channels: Arc<Channels>,
    credentials: Option<Credentials>,
    /// Member `i`'s token (empty without credentials).
    member_tokens: Vec<String>,
    removal: Removal,
    dialer: Arc<Dialer>,
    http: reqwest::Client,
    agent_interval: Duration,
    /// By [`AgentKind`]: QUIC members, WebSocket members, HTTP agents.
    recorders: [Recorder; 3],
    clock: Clock,
    timeout: Duration,
    /// Messages of history owed per channel.
    history: u64,
    /// How far back a member's subscription reaches (its max age).
    reach: Duration,
    stop: Stop,
    history_latency: Histogram,
    /// Subscriptions owed some history, and those whose history arrived in full.
    history_owed: AtomicU64,
    history_complete: AtomicU64,
    /// Messages older than a subscription's history window.
    history_older: AtomicU64,
    http_fetch: Histogram,
    http_announced: Histogram,
    /// When the removable key was deleted (run clock ns; 0: not yet).
    removed_at_ns: AtomicU64,
    removal_latency: Histogram,
    removed_closed: AtomicU64,
    /// Removed members that dialed after the removal and were refused.
    removed_refused: AtomicU64,
    started: AtomicU64,
    /// Clean refusals by the relay's admission (each followed by a retry), members admitted
    /// after at least one, and members still refused when the run ended.
    refusals: AtomicU64,
    admitted_after_refusal: AtomicU64,
    never_admitted: AtomicU64,
    /// Agents' API requests refused cleanly (503 with Retry-After), each followed by a wait.
    http_refusals: AtomicU64,
    /// The run clock when the first member started dialing and when the last was admitted.
    first_dial_ns: AtomicU64,
    last_admitted_ns: AtomicU64,
}

impl Plan {
    /// Member `i`'s URL over `kind`, with its token.
    fn member_url(&self, i: usize, kind: AgentKind) -> Url {
        let token = self.member_tokens.get(i).map(String::as_str);
        access::with_token(self.urls[kind.index()].clone(), token)
    }
}

/// `url` with `root` as its path.
fn rooted(url: &Url, root: &str) -> Url {
    let mut url = url.clone();
    url.set_path(&format!("/{root}"));
    url
}

/// Spawn a client that starts at `at` (unless the run stops first).
fn start_at<F: std::future::Future<Output = ()> + Send + 'static>(
    at: tokio::time::Instant,
    plan: Arc<Plan>,
    client: impl FnOnce(Arc<Plan>) -> F + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep_until(at) => {}
            _ = plan.stop.stopped() => return,
        }
        Recorder::bump(&plan.started, 1);
        client(plan).await;
    })
}

/// Run the community; `interrupt` (Ctrl-C) ends it early with a report.
pub async fn run(
    args: &CommunityArgs,
    options: &RunOptions,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Summary, LoadError> {
    args.validate()?;
    interruptible(interrupt, |stop| run_until(args, options, stop)).await
}

async fn run_until(
    args: &CommunityArgs,
    options: &RunOptions,
    stop: Stop,
) -> Result<Summary, LoadError> {
    let started_unix_ms = unix_ms();
    let clock = Clock::new();
    let layout = args.layout();
    let root = args.root();
    let credentials = match &args.key_dir {
        Some(dir) => Some(Credentials::create(dir, &root, args.algorithm()?)?),
        None => None,
    };
    let token = |make: &dyn Fn(&Credentials) -> Result<String, access::AccessError>| {
        credentials.as_ref().map(make).transpose()
    };
    let publisher_token = token(&|c| c.publisher())?;
    let agent_token = token(&|c| c.agent())?;
    let removal = Removal::new(args.members, args.remove_members);
    // Members arrive holding their tokens, as real clients do (an identity service issued
    // them earlier): signed here, before anything is timed, so a burst of members costs the
    // load generator no signing while the relay is measured.
    let signing = Instant::now();
    let member_tokens = match &credentials {
        Some(credentials) => (0..args.members)
            .map(|i| credentials.member(&layout.subscribe_patterns(i), removal.is_removed(i)))
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let signed_in = signing.elapsed();

    let interval = args.interval();
    // The cache keeps two more messages than the history; members reach back one more.
    let max_age = interval * (args.history as u32 + 2);
    let reach = interval * (args.history as u32 + 1);
    let channels = Channels::new(layout, max_age)?;
    let dialer = Arc::new(Dialer::new(&args.connect)?);
    let quic = rooted(&args.url, &root);
    let ws = match &args.ws_url {
        Some(url) => rooted(url, &root),
        None => with_scheme(&quic, "ws").ok_or_else(|| {
            LoadError::Config("cannot derive a WebSocket URL; pass --ws-url".into())
        })?,
    };
    let http_base = match &args.http_url {
        Some(url) => url.clone(),
        None => {
            let mut url = with_scheme(&args.url, "http").ok_or_else(|| {
                LoadError::Config("cannot derive the HTTP URL; pass --http-url".into())
            })?;
            url.set_path("/");
            url.set_query(None);
            url
        }
    };

    // The warm publisher: connected, every channel holding its history before the burst.
    let publisher_url = access::with_token(quic.clone(), publisher_token.as_deref());
    let connecting = Instant::now();
    let publisher = connect_publisher(&dialer, &publisher_url, channels.origin(), false).await?;
    let publisher_connect = connecting.elapsed();
    let warm_interval = interval.min(Duration::from_millis(100));
    channels
        .post(
            &clock,
            clock.now_ns(),
            warm_interval,
            Some(args.history),
            args.message_size,
            stop.stopped(),
        )
        .await?;

    let plan = Arc::new(Plan {
        urls: [quic, ws],
        http_base,
        root,
        layout,
        mix: args.mix(),
        channels: channels.clone(),
        credentials,
        member_tokens,
        removal,
        dialer: dialer.clone(),
        http: agent::client(args.agents)?,
        agent_interval: Duration::from_millis(args.agent_interval_ms),
        recorders: Default::default(),
        clock,
        timeout: Duration::from_secs_f64(args.timeout_secs),
        history: args.history,
        reach,
        stop: stop.clone(),
        history_latency: Histogram::new(),
        history_owed: AtomicU64::new(0),
        history_complete: AtomicU64::new(0),
        history_older: AtomicU64::new(0),
        http_fetch: Histogram::new(),
        http_announced: Histogram::new(),
        removed_at_ns: AtomicU64::new(0),
        removal_latency: Histogram::new(),
        removed_closed: AtomicU64::new(0),
        removed_refused: AtomicU64::new(0),
        started: AtomicU64::new(0),
        refusals: AtomicU64::new(0),
        admitted_after_refusal: AtomicU64::new(0),
        never_admitted: AtomicU64::new(0),
        http_refusals: AtomicU64::new(0),
        first_dial_ns: AtomicU64::new(u64::MAX),
        last_admitted_ns: AtomicU64::new(0),
    });

    let scrape_before = match &args.metrics_url {
        Some(url) => metrics::scrape(&plan.http, url).await.ok(),
        None => None,
    };
    let baseline_rss: Vec<u64> = options
        .relay_pids
        .iter()
        .map(|&pid| crate::proc::read_memory(pid).map_or(0, |m| m.rss_bytes))
        .collect();
    let probes = UsageProbes::start(&options.relay_pids);
    // The load generator shares the machine: its own use says which side saturated.
    let own = UsageProbes::start(&[std::process::id()]);
    let window = Instant::now();
    let progress = {
        let plan = plan.clone();
        let clients = args.members + args.agents;
        Progress::start(options.progress, move || {
            let errors: u64 = plan.recorders.iter().map(|r| r.errors.total()).sum();
            let connected: u64 = plan
                .recorders
                .iter()
                .map(|r| Recorder::load(&r.connected))
                .sum();
            format!(
                "community {:.1} s  started {}/{clients}  connected {connected}  history {}/{}  errors {errors}",
                window.elapsed().as_secs_f64(),
                Recorder::load(&plan.started),
                Recorder::load(&plan.history_complete),
                Recorder::load(&plan.history_owed),
            )
        })
    };

    // Steady posting from the end of the warm-up until the run stops.
    let posting_done = Stop::new();
    let posting = {
        let plan = plan.clone();
        let done = posting_done.clone();
        let size = args.message_size;
        async move {
            plan.channels
                .post(
                    &plan.clock,
                    plan.clock.now_ns(),
                    interval,
                    None,
                    size,
                    done.stopped(),
                )
                .await
        }
    };

    let burst = Duration::from_secs_f64(args.burst_secs);
    let burst_start = tokio::time::Instant::now();
    let offset = |i: usize, n: usize| burst.mul_f64(i as f64 / n.max(1) as f64);
    let mut handles = Vec::with_capacity(args.members + args.agents);
    for i in 0..args.members {
        let at = burst_start + offset(i, args.members);
        handles.push(start_at(at, plan.clone(), move |plan| async move {
            member::member(i, &plan).await
        }));
    }
    for j in 0..args.agents {
        let token = agent_token.clone();
        let at = burst_start + offset(j, args.agents);
        handles.push(start_at(at, plan.clone(), move |plan| async move {
            agent::agent(j, &plan, token.as_deref()).await
        }));
    }
    let removal = {
        let plan = plan.clone();
        let at = burst_start + burst + Duration::from_secs_f64(args.remove_after_secs);
        let wanted = args.remove_members > 0;
        async move {
            if !wanted {
                return Ok(());
            }
            tokio::select! {
                _ = tokio::time::sleep_until(at) => {}
                _ = plan.stop.stopped() => return Ok(()),
            }
            let removed = plan.credentials.as_ref().map(|c| c.remove_members());
            plan.removed_at_ns
                .store(plan.clock.now_ns(), Ordering::Release);
            removed.transpose().map(|_| ())
        }
    };
    let end = burst_start + burst + Duration::from_secs_f64(args.live_secs);
    let clients = async {
        tokio::select! {
            _ = tokio::time::sleep_until(end) => stop.stop(),
            _ = stop.stopped() => {}
        }
        let outcomes = futures::future::join_all(handles).await;
        posting_done.stop();
        outcomes
    };
    let (posted, outcomes, removed) = tokio::join!(posting, clients, removal);
    let elapsed = window.elapsed().as_secs_f64();
    let scrape_after = match &args.metrics_url {
        Some(url) => metrics::scrape(&plan.http, url).await.ok(),
        None => None,
    };
    progress.finish().await;
    let (relays, relay_failures) = probes.finish();
    let (own, _) = own.finish();
    let posted = posted?;

    if publisher.closed().now_or_never().is_some() {
        plan.recorders[0].errors.count("publisher_session_closed");
    }
    publisher.close(SessionCode::NoError, "done");
    dialer.close().await;
    for outcome in outcomes {
        if outcome.is_err() {
            plan.recorders[0].errors.count("client_task_failed");
        }
    }
    if let Err(err) = removed {
        plan.recorders[0].errors.count("remove_members");
        tracing::warn!(%err, "removing members failed");
    }

    let recorders: Vec<&Recorder> = plan.recorders.iter().collect();
    let mut summary = Summary::new("community", started_unix_ms, &recorders);
    summary.elapsed_secs = elapsed;
    summary.add_distribution("history", plan.history_latency.snapshot());
    summary.add_distribution("http_fetch", plan.http_fetch.snapshot());
    summary.add_distribution("http_announced", plan.http_announced.snapshot());
    summary.add_distribution("removal", plan.removal_latency.snapshot());
    let history_owed = Recorder::load(&plan.history_owed);
    let history_complete = Recorder::load(&plan.history_complete);
    if history_complete < history_owed {
        summary
            .errors
            .insert("history_incomplete".into(), history_owed - history_complete);
    }
    for kind in AgentKind::ALL {
        let recorder = &plan.recorders[kind.index()];
        if Recorder::load(&recorder.attempted) > 0 {
            summary
                .by_kind
                .insert(kind.name().to_string(), KindSummary::of(recorder));
        }
    }
    let clients = (args.members + args.agents).max(1) as u64;
    let rss_per_client = relays.first().map(|relay| {
        let baseline = baseline_rss.first().copied().unwrap_or(0);
        relay.max_sampled_rss_bytes.saturating_sub(baseline) / clients
    });
    let access_per_second = match (scrape_before, scrape_after) {
        (Some(before), Some(after)) => metrics::rates(&before, &after, elapsed),
        _ => Default::default(),
    };
    summary.community = Some(CommunityReport {
        members: args.members,
        agents: args.agents,
        channels: layout.channel_count(),
        history_owed,
        history_complete,
        history_older: Recorder::load(&plan.history_older),
        removed: plan.removal.count(),
        removed_closed: Recorder::load(&plan.removed_closed),
        removed_refused: Recorder::load(&plan.removed_refused),
        refusals: Recorder::load(&plan.refusals),
        admitted_after_refusal: Recorder::load(&plan.admitted_after_refusal),
        never_admitted: Recorder::load(&plan.never_admitted),
        http_refusals: Recorder::load(&plan.http_refusals),
        admission_span_secs: {
            let first = Recorder::load(&plan.first_dial_ns);
            let last = Recorder::load(&plan.last_admitted_ns);
            (first != u64::MAX && last >= first).then(|| (last - first) as f64 / 1e9)
        },
        relay_cores_mean: relays.first().map(|r| r.cpu_percent / 100.0),
        relay_cores_peak: relays.first().map(|r| r.peak_cpu_percent / 100.0),
        relay_rss_per_client_bytes: rss_per_client,
        load_cores_mean: own.first().map(|u| u.cpu_percent / 100.0),
        load_cores_peak: own.first().map(|u| u.peak_cpu_percent / 100.0),
        access_per_second,
    });
    summary.relays = relays;
    summary.notes = relay_failures;
    summary.notes.push(format!(
        "publisher connected in {:.3} ms; {posted} posts after the warm-up of {} per channel",
        publisher_connect.as_secs_f64() * 1e3,
        args.history
    ));
    if !plan.member_tokens.is_empty() {
        summary.notes.push(format!(
            "{} member tokens signed in {:.0} ms before the burst",
            plan.member_tokens.len(),
            signed_in.as_secs_f64() * 1e3
        ));
    }
    summary.config = serde_json::json!({
        "url": args.url.as_str(),
        "ws_url": plan.urls[1].as_str(),
        "http_url": plan.http_base.as_str(),
        "community": args.community,
        "open_channels": args.open_channels,
        "member_channels": args.member_channels,
        "members": args.members,
        "open_per_member": args.open_per_member,
        "member_per_member": args.member_per_member,
        "weights": {"quic": args.quic_weight, "websocket": args.ws_weight},
        "agents": args.agents,
        "agent_interval_ms": args.agent_interval_ms,
        "burst_secs": args.burst_secs,
        "live_secs": args.live_secs,
        "message_interval_ms": args.message_interval_ms,
        "message_size": args.message_size,
        "history": args.history,
        "timeout_secs": args.timeout_secs,
        "auth": args.key_dir.is_some(),
        "token_algorithm": args.token_algorithm,
        "remove_members": args.remove_members,
        "remove_after_secs": args.remove_after_secs,
    });
    Ok(summary)
}
