//! Starling peers for the interop cases: in-process, on Starling's library crates.

use super::*;

fn pin(fingerprint: &str) -> anyhow::Result<TlsVerify> {
    let pin = starling_net::tls::parse_fingerprint(fingerprint)
        .with_context(|| format!("bad certificate fingerprint {fingerprint:?}"))?;
    Ok(TlsVerify::PinnedSha256(vec![pin]))
}

/// Dial `url` offering only `case.version`, pinning the relay's certificate, and start a session.
pub async fn starling_connect(
    case: Case,
    url: &Url,
    fingerprint: &str,
    role: Role,
    config: SessionConfig,
) -> anyhow::Result<(Client, Session<QuicTransport>)> {
    let client = Client::new(
        ClientConfig::default()
            .with_alpns(&[case.version.alpn()])
            .with_tls(pin(fingerprint)?),
    )?;
    let connected = admitted(
        "Starling client connect",
        || client.connect(url),
        starling_net::ClientError::refusal,
    )
    .await?
    .with_context(|| format!("Starling client connecting to {url}"))?;
    let session = start_session(
        case,
        connected.transport,
        &connected.protocol,
        connected.setup_path.clone(),
        role,
        config,
    )
    .await?;
    Ok((client, session))
}

/// Start a Starling session in `role` over a transport that agreed on `protocol`, which must
/// be `case`'s; the session must run `case`'s version.
pub async fn start_session<T: starling_transport::Transport>(
    case: Case,
    transport: T,
    protocol: &str,
    setup_path: Option<String>,
    role: Role,
    mut config: SessionConfig,
) -> anyhow::Result<Session<T>> {
    ensure!(
        protocol == case.version.alpn(),
        "negotiated {protocol:?}, expected {}",
        case.version.alpn()
    );
    if config.hop == 0 {
        config.hop = random_hop();
    }
    let setup = ClientSetup {
        path: setup_path,
        role: Some(role),
        cost: None,
    };
    let session = step(
        "Starling SETUP exchange",
        Session::connect_negotiated(
            transport,
            protocol,
            &Protocol::lite(&[case.version]),
            setup,
            config,
        ),
    )
    .await?
    .context("Starling MoQ handshake")?;
    ensure!(
        session.protocol() == case.version,
        "session runs {}",
        session.protocol()
    );
    Ok(session)
}

/// A Starling publisher session serving broadcast [`BROADCAST`] with track [`TRACK`].
pub struct StarlingPublisher {
    pub client: Client,
    pub session: Session<QuicTransport>,
    pub track: TrackProducer,
    _published: Published,
}

/// [`BROADCAST`] with its [`TRACK`] in a local origin, ready for a publisher session.
pub struct Published {
    pub origin: Origin,
    _broadcast: BroadcastProducer,
    _route: RouteHandle,
}

impl Published {
    /// The broadcast, its track (written by the caller) and a session config publishing it.
    pub fn new() -> anyhow::Result<(Published, TrackProducer, SessionConfig)> {
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new(Limits::default());
        let info = TrackInfo {
            max_age_ms: MAX_AGE.as_millis() as u64,
            ..TrackInfo::default()
        };
        let track = broadcast.create_track(TRACK, info);
        let route = origin.publish(Path::new(BROADCAST)?, broadcast.consume(), Route::local())?;
        let mut config = SessionConfig::new(0);
        config.publish = Some(origin.clone());
        Ok((
            Published {
                origin,
                _broadcast: broadcast,
                _route: route,
            },
            track,
            config,
        ))
    }
}

impl StarlingPublisher {
    pub async fn connect(case: Case, url: &Url, fingerprint: &str) -> anyhow::Result<Self> {
        let (published, track, config) = Published::new()?;
        let (client, session) =
            starling_connect(case, url, fingerprint, Role::Publisher, config).await?;
        Ok(StarlingPublisher {
            client,
            session,
            track,
            _published: published,
        })
    }

    /// Write the sync group then the plan's data groups, paced by the subscribers' progress.
    pub async fn publish(
        &self,
        plan: &Plan,
        pacing: Pacing,
        gate: &mut Gate,
    ) -> anyhow::Result<()> {
        publish_while_open(&self.session, &self.track, plan, pacing, gate, "Starling").await
    }

    pub fn close(&self) {
        self.session.close(SessionCode::NoError, "done");
    }
}

/// Connect a Starling subscriber, wait for [`BROADCAST`] to be announced, subscribe to [`TRACK`]
/// and read the sync group then `plan.groups` data groups, reporting each group to `progress`.
pub async fn starling_subscribe(
    case: Case,
    url: Url,
    fingerprint: String,
    plan: Plan,
    progress: ProgressTx,
) -> anyhow::Result<Received> {
    let origin = Origin::new();
    let mut config = SessionConfig::new(0);
    config.consume = Some(origin.clone());
    let (_client, session) =
        starling_connect(case, &url, &fingerprint, Role::Subscriber, config).await?;
    read_while_open(session, &origin, &plan, &progress, "Starling").await
}

/// Write the plan on `track` while `session` (`who`'s publisher) stays open.
pub async fn publish_while_open<T: Transport>(
    session: &Session<T>,
    track: &TrackProducer,
    plan: &Plan,
    pacing: Pacing,
    gate: &mut Gate,
    who: &str,
) -> anyhow::Result<()> {
    tokio::select! {
        err = session.closed() => bail!("{who} publisher session closed: {err}"),
        result = write_plan(track, plan, pacing, gate) => result,
    }
}

/// Read the plan from what `session` (`who`'s subscriber) announces into `origin`, then
/// close the session.
pub async fn read_while_open<T: Transport>(
    session: Session<T>,
    origin: &Origin,
    plan: &Plan,
    progress: &ProgressTx,
    who: &str,
) -> anyhow::Result<Received> {
    let result = tokio::select! {
        err = session.closed() => Err(anyhow!("{who} subscriber session closed: {err}")),
        result = starling_read(origin, plan, progress) => result,
    };
    session.close(SessionCode::NoError, "done");
    result
}

async fn starling_read(
    origin: &Origin,
    plan: &Plan,
    progress: &ProgressTx,
) -> anyhow::Result<Received> {
    let path = Path::new(BROADCAST)?;
    let interest = origin.interest(path.clone())?;
    let broadcast = step("the broadcast announcement (Starling subscriber)", async {
        let mut changed = Vec::new();
        loop {
            if let Some(broadcast) = origin.consume(&path, None) {
                return broadcast;
            }
            interest.changed(&mut changed).await;
            changed.clear();
        }
    })
    .await?;
    let mut track = broadcast
        .subscribe_track(TRACK, StartAt::default())
        .map_err(|code| anyhow!("subscribe refused: {code:?}"))?;
    // Timestamps are in the track's timescale (a moq-relay serving IETF declares microseconds).
    let timescale = step("the track info", track.info())
        .await?
        .map_err(|code| anyhow!("track info refused: {code:?}"))?
        .timescale;

    let mut received = Received::default();
    let mut first = true;
    while (received.groups.len() as u64) < plan.groups {
        let what = if first {
            "the sync group"
        } else {
            "the next group"
        };
        let mut group = match step(what, track.next_group())
            .await
            .with_context(|| received.summary())?
        {
            Ok(Some(group)) => group,
            Ok(None) => bail!("track ended after {} data groups", received.groups.len()),
            Err(code) => bail!("track failed with {code:?}"),
        };
        let sequence = group.sequence();
        if first {
            check_sync_first(sequence)?;
        }
        let mut frames = Vec::new();
        let mut error = None;
        loop {
            match step("the next frame", group.next_frame()).await? {
                Ok(Some(frame)) => frames.push(RecvFrame {
                    timestamp_ms: (frame.timestamp as u128 * 1000 / timescale as u128) as u64,
                    payload: frame.payload,
                }),
                Ok(None) => break,
                Err(code) => {
                    error = Some(format!("{code:?}"));
                    break;
                }
            }
        }
        // Reported once the group ended (FIN or error), so the next group is written only
        // after this one is complete here: groups never overlap in flight.
        progress.send_replace(Some(sequence));
        if first {
            first = false;
            ensure!(
                error.is_none() && frames.len() == 1 && frames[0].payload == SYNC,
                "sync group arrived as {frames:?} / {error:?}"
            );
            continue;
        }
        received.groups.push(RecvGroup {
            sequence,
            frames,
            error,
        });
    }
    Ok(received)
}
