//! moq-dev peers for the interop cases: moq-net 0.3.18 and moq-tokio 0.19.31, in-process.

use super::*;

/// A moq-tokio client offering only `case`'s version and pinning `fingerprint`, dialing once.
pub fn moq_client(case: Case, fingerprint: &str) -> anyhow::Result<moq_tokio::Client> {
    let mut config = moq_tokio::connect::Config::default();
    config.version = vec![case.moq_version()];
    config.tls.fingerprint = vec![fingerprint.to_string()];
    config.once = Some(true);
    let client = config
        .init(Default::default())
        .context("building the moq-tokio client")?;
    Ok(client.with_reconnect(false))
}

async fn moq_established(
    case: Case,
    client: moq_tokio::Client,
    url: Url,
) -> anyhow::Result<moq_tokio::Connection> {
    let connection = step(
        "moq-tokio connect",
        client.connect(url.clone()).established(),
    )
    .await?
    .with_context(|| format!("moq-tokio connecting to {url}"))?;
    let version = connection.version();
    ensure!(
        version == Some(case.moq_version()),
        "moq-tokio negotiated {version:?}, expected {}",
        case.version
    );
    Ok(connection)
}

/// A moq-dev publisher session serving broadcast [`BROADCAST`] with track [`TRACK`].
pub struct MoqPublisher {
    pub connection: moq_tokio::Connection,
    pub track: moq_net::track::Producer,
    broadcast: moq_net::broadcast::Producer,
    _origin: moq_net::origin::Producer,
}

impl MoqPublisher {
    pub async fn connect(case: Case, url: Url, fingerprint: &str) -> anyhow::Result<Self> {
        let origin = moq_tokio::origin::spawn();
        let broadcast = origin
            .create_broadcast(BROADCAST)
            .context("create broadcast")?;
        let info = moq_net::track::Info::default().with_max_age(MAX_AGE);
        let track = broadcast
            .create_track(TRACK, info)
            .context("create track")?;
        broadcast
            .announce(Default::default())
            .context("announce broadcast")?;
        let client = moq_client(case, fingerprint)?.with_publisher(&origin);
        let connection = moq_established(case, client, url).await?;
        Ok(MoqPublisher {
            connection,
            track,
            broadcast,
            _origin: origin,
        })
    }

    /// Wait until someone subscribed, then write the sync group and the plan's data groups,
    /// paced by the subscribers' progress.
    pub async fn publish(
        &self,
        plan: &Plan,
        pacing: Pacing,
        gate: &mut Gate,
    ) -> anyhow::Result<()> {
        tokio::select! {
            res = self.connection.closed() => bail!("moq-dev publisher connection closed: {res:?}"),
            result = async {
                step("the relay's subscription to the moq-dev publisher", self.track.used())
                    .await?
                    .context("track used")?;
                let mut sync = self.track.create_group(0u64.into())?;
                sync.write_frame(moq_net::Timestamp::from_millis(0)?, Bytes::from_static(SYNC))?;
                sync.finish()?;
                gate.all_reached(0).await.context("sync group")?;
                for g in 1..=plan.groups {
                    let mut group = self.track.create_group(g.into())?;
                    for i in 0..plan.sizes.len() {
                        group.write_frame(
                            moq_net::Timestamp::from_millis(plan.timestamp_ms(g, i))?,
                            plan.payload(g, i),
                        )?;
                    }
                    group.finish()?;
                    if pacing == Pacing::Lockstep {
                        gate.all_reached(g).await?;
                    }
                }
                Ok(())
            } => result,
        }
    }

    pub fn close(&self) {
        self.broadcast.close();
    }
}

/// A moq-dev subscriber's session and its subscription to [`TRACK`] of [`BROADCAST`].
pub struct MoqSubscription {
    pub connection: moq_tokio::Connection,
    pub track: moq_net::track::Subscriber,
    _origin: moq_net::origin::Producer,
}

impl MoqSubscription {
    /// Connect, wait for [`BROADCAST`] to be announced and subscribe to [`TRACK`].
    pub async fn connect(case: Case, url: Url, fingerprint: &str) -> anyhow::Result<Self> {
        let origin = moq_tokio::origin::spawn();
        let consumer = origin.consume();
        let mut announced = consumer.announced();
        let client = moq_client(case, fingerprint)?.with_subscriber(origin.clone());
        let connection = moq_established(case, client, url).await?;
        let track = tokio::select! {
            res = connection.closed() => Err(anyhow!("moq-dev subscriber connection closed: {res:?}")),
            result = async {
                step("the broadcast announcement (moq-dev subscriber)", async {
                    loop {
                        let update = announced.next().await.context("origin closed")?;
                        if update.prefix.as_str() == BROADCAST && update.kind.is_active() {
                            return Ok::<_, anyhow::Error>(());
                        }
                    }
                })
                .await??;
                let broadcast = step("request_broadcast", consumer.request_broadcast(BROADCAST))
                    .await?
                    .context("request broadcast")?;
                let subscription = moq_net::track::Subscription::default().with_max_age(MAX_AGE);
                step("subscribe", broadcast.track(TRACK)?.subscribe(subscription))
                    .await?
                    .context("subscribe")
            } => result,
        }?;
        Ok(MoqSubscription {
            connection,
            track,
            _origin: origin,
        })
    }
}

/// Connect a moq-dev subscriber, wait for [`BROADCAST`] to be announced, subscribe to [`TRACK`]
/// and read the sync group then `plan.groups` data groups, reporting each group to `progress`.
pub async fn moq_subscribe(
    case: Case,
    url: Url,
    fingerprint: String,
    plan: Plan,
    progress: ProgressTx,
) -> anyhow::Result<Received> {
    let subscription = MoqSubscription::connect(case, url, &fingerprint).await?;
    let MoqSubscription {
        connection,
        track,
        _origin,
    } = subscription;
    let result = tokio::select! {
        res = connection.closed() => Err(anyhow!("moq-dev subscriber connection closed: {res:?}")),
        result = moq_read(track, &plan, &progress) => result,
    };
    drop(connection);
    result
}

async fn moq_read(
    mut track: moq_net::track::Subscriber,
    plan: &Plan,
    progress: &ProgressTx,
) -> anyhow::Result<Received> {
    let mut received = Received::default();
    let mut first = true;
    while (received.groups.len() as u64) < plan.groups {
        let what = if first {
            "the sync group"
        } else {
            "the next group"
        };
        let mut group = match step(what, track.recv_group())
            .await
            .with_context(|| received.summary())?
        {
            Ok(Some(group)) => group,
            Ok(None) => bail!("track ended after {} data groups", received.groups.len()),
            Err(err) => bail!("track failed: {err}"),
        };
        let sequence = group.sequence;
        if first {
            check_sync_first(sequence)?;
        }
        let mut frames = Vec::new();
        let mut error = None;
        loop {
            match step("the next frame", group.read_frame()).await? {
                Ok(Some(frame)) => frames.push(RecvFrame {
                    timestamp_ms: frame.timestamp.as_millis() as u64,
                    payload: frame.payload,
                }),
                Ok(None) => break,
                Err(err) => {
                    error = Some(err.to_string());
                    break;
                }
            }
        }
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
