//! One HTTP agent: polling the relay's HTTP API the way a bot or a preview service would,
//! alternating `GET /fetch/c/<id>/open/<n>/chat?group=latest` (the latest message of an
//! open channel, a different one each time) and `GET /announced/c/<id>/` (the community's
//! live channels), one request per interval over a kept-alive connection.
//!
//! Each request is timed to the end of its body. A fetched body must open with a message's
//! frame header; an announced listing must name at least one channel. A request the relay
//! refuses cleanly (503 with Retry-After) is counted as a refusal, not an error, and the
//! agent waits what the relay asked, with jitter, before its next request.

use std::time::Duration;

use url::Url;

use super::layout::{Channel, TRACK};
use super::Plan;
use crate::access::with_token;
use crate::burst::AgentKind;
use crate::http_fetch::{fetch_latest, fetch_url, FetchError};
use crate::recorder::Recorder;

/// Run agent `j` from its start to the end of the run.
pub(super) async fn agent(j: usize, plan: &Plan, token: Option<&str>) {
    let recorder = &plan.recorders[AgentKind::Http.index()];
    Recorder::bump(&recorder.attempted, 1);
    let mut every = tokio::time::interval(plan.agent_interval);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut round = 0usize;
    let mut connected = false;
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = plan.stop.stopped() => break,
        }
        let outcome = if round.is_multiple_of(2) {
            let open = plan.layout.open_channels.max(1);
            let channel = Channel::open((j + round / 2 * 7919) % open);
            fetch(plan, recorder, channel, token).await
        } else {
            listing(plan, recorder, token).await
        };
        round += 1;
        match outcome {
            Outcome::Answered if !connected => {
                connected = true;
                Recorder::bump(&recorder.connected, 1);
            }
            Outcome::Refused(wait) => {
                Recorder::bump(&plan.http_refusals, 1);
                let wait = super::member::jittered(wait, j, round as u32);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => every.reset(),
                    _ = plan.stop.stopped() => break,
                }
            }
            _ => {}
        }
    }
}

/// How one request went.
enum Outcome {
    Answered,
    /// 503 with Retry-After: come back after this.
    Refused(Duration),
    /// Failed (counted) or the run stopped.
    Failed,
}

/// Await one request within the deadline: its answer, or how it did not come (a failure
/// counted, a refusal, the run stopped).
async fn request<T>(
    plan: &Plan,
    recorder: &Recorder,
    answer: impl std::future::Future<Output = Result<T, FetchError>>,
) -> Result<T, Outcome> {
    let answered = tokio::select! {
        answered = tokio::time::timeout(plan.timeout, answer) => answered,
        _ = plan.stop.stopped() => return Err(Outcome::Failed),
    };
    match answered {
        Err(_) => recorder.errors.count("http_timeout"),
        Ok(Err(FetchError::Refused(wait))) => return Err(Outcome::Refused(wait)),
        Ok(Err(err)) => recorder.errors.count(&err.kind()),
        Ok(Ok(answer)) => return Ok(answer),
    }
    Err(Outcome::Failed)
}

async fn fetch(plan: &Plan, recorder: &Recorder, channel: Channel, token: Option<&str>) -> Outcome {
    let broadcast = format!("{}/{}", plan.root, channel.path());
    let mut url = fetch_url(&plan.http_base, &broadcast, TRACK);
    url.query_pairs_mut().append_pair("group", "latest");
    let url = with_token(url, token);
    let fetched = match request(plan, recorder, fetch_latest(&plan.http, &url)).await {
        Ok(fetched) => fetched,
        Err(outcome) => return outcome,
    };
    plan.http_fetch.record(fetched.body_ns);
    Recorder::bump(&recorder.bytes, fetched.bytes as u64);
    if let Err(err) = fetched.first {
        recorder.errors.count(err.kind());
    }
    Outcome::Answered
}

async fn listing(plan: &Plan, recorder: &Recorder, token: Option<&str>) -> Outcome {
    let mut url = plan.http_base.clone();
    url.set_path(&format!("/announced/{}/", plan.root));
    let url = with_token(url, token);
    let started = std::time::Instant::now();
    match request(plan, recorder, list(&plan.http, &url)).await {
        Err(outcome) => outcome,
        Ok(0) => {
            recorder.errors.count("announced_empty");
            Outcome::Failed
        }
        Ok(_) => {
            plan.http_announced.record(elapsed_ns(started));
            Outcome::Answered
        }
    }
}

fn elapsed_ns(since: std::time::Instant) -> u64 {
    since.elapsed().as_nanos() as u64
}

/// GET a newline-separated listing; returns its line count.
async fn list(client: &reqwest::Client, url: &Url) -> Result<usize, FetchError> {
    let response = client.get(url.clone()).send().await?;
    if !response.status().is_success() {
        return Err(FetchError::from_response(&response));
    }
    let body = response.bytes().await?;
    Ok(body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count())
}

/// The HTTP client every agent shares, keeping one idle connection per agent.
pub(super) fn client(agents: usize) -> Result<reqwest::Client, FetchError> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(agents.max(1))
        .pool_idle_timeout(Duration::from_secs(30))
        .build()?)
}
