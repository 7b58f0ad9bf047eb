//! The HTTP target (`http_request`): a request target (path and query) the relay's TCP port
//! reads, through the relay's own router ([`starling_relay::HttpApi`]) over an origin with
//! known broadcasts, and through the admission's reading of it
//! ([`starling_relay::SessionFacts`], which the API and the WebSocket upgrade gate use for
//! the path and `?jwt=`).
//!
//! The first byte picks the relay: open (HTTP root empty), rooted at `room`, or with
//! authentication on (one HS256 key, `public/**` readable by anyone); the rest is the request
//! target, `GET` as hyper parses it. Checked for every target that parses:
//!
//! - the admission's facts: the path is the target's path with one leading `/`, the query is
//!   the target's (none when empty), `jwt` is the last non-empty `jwt` parameter, written
//!   back and read again they are the same facts, and a presented token is read back;
//! - the answer is one of moq-relay's statuses for the route (never 500, 502 or 503);
//!   `/health` and `/certificate.sha256` answer their fixed bodies;
//! - on the open and rooted relays the answer is exactly what the route's rules give for the
//!   percent-decoded path and the query: `/announced/{prefix}` lists the live, non-hidden
//!   broadcasts under the prefix (narrowed to the root), relative to it, sorted, or 400 for
//!   a path that is not one, 401 outside the root; `/fetch/{broadcast}/{track}?group=`
//!   answers the group's frames for a live broadcast's track, 404 for a missing track or
//!   group, 504 (once the deadline passes) for a broadcast that is not live, 400 for no
//!   broadcast, a bad path or a bad `group`, 401 outside the root;
//! - with authentication on, a fetched body is one of the groups the origin holds, and every
//!   listed path is a live, non-hidden broadcast under the named prefix;
//! - every path the relay parses is a normalized path: parsed again it is the same, within
//!   the length bound;
//! - the request leaves the origin as it was (its broadcasts and interests).
//!
//! As for the session targets, the runtime, the origin and the routers are built once per
//! thread, and time is paused, so a fetch waiting for its deadline takes no real time.

use std::cell::RefCell;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Uri};
use bytes::Bytes;
use starling_auth::{Claims, Key, KeySet, Pattern, Patterns};
use starling_model::{
    BroadcastProducer, Frame, Limits, Origin, Route, RouteHandle, TrackInfo, TrackProducer,
};
use starling_proto::Path;
use starling_relay::{
    AuthConfig, Authority, HttpApi, HttpConfig, SessionFacts, SessionRegistry, TransportKind,
};
use tower_service::Service;

use crate::harness::{with_relay, Slot};

/// The certificate pin the routers serve.
const FINGERPRINT: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
/// The one key of the relay with authentication on (the `auth` target's seed key).
const KEY: &str =
    r#"{"kty":"oct","alg":"HS256","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA","kid":"a"}"#;
/// The broadcasts the origin holds; those with [`TRACK`] hold [`GROUPS`].
const BROADCASTS: &[&str] = &[
    "room/alice",
    "room/bob",
    "room/.secret",
    "roomy/carol",
    ".hidden/x",
    "public/demo",
];
const WITH_TRACK: &[&str] = &["room/alice", "public/demo"];
const TRACK: &str = "video";
/// Each group's frames, by sequence; the last is the latest.
const GROUPS: &[&[&str]] = &[&["zero"], &["one-a", "one-b"], &["two-a", "two-b", "two-c"]];
/// The root of the rooted relay.
const ROOT: &str = "room";
/// The fetch deadline, in paused time.
const FETCH_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one request may take, in paused time.
const STEP: Duration = Duration::from_secs(10);

thread_local! {
    static HARNESS: Slot<Relay> = const { RefCell::new(None) };
}

/// Which relay a request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Open,
    Rooted,
    Auth,
}

pub fn http_request(data: &[u8]) -> bool {
    answer(data).is_some()
}

/// The status and body the input's request got, once checked; `None` when the input is no
/// request target.
fn answer(data: &[u8]) -> Option<(u16, Vec<u8>)> {
    let (&pick, target) = data.split_first()?;
    let mode = [Mode::Open, Mode::Rooted, Mode::Auth][pick as usize % 3];
    // As hyper reads a request line's target: origin-form, `/path?query`.
    let uri = Uri::try_from(target).ok()?;
    if uri.scheme().is_some() || !uri.path().starts_with('/') {
        return None;
    }
    check_facts(&uri);
    let answer = with_relay(&HARNESS, Relay::start, |runtime, relay| {
        runtime.block_on(relay.request(mode, &uri))
    });
    Some(answer)
}

/// The admission's reading of the target: path, query and token.
fn check_facts(uri: &Uri) {
    let target = uri
        .path_and_query()
        .expect("an origin-form target")
        .as_str();
    let facts = SessionFacts::new(TransportKind::Http, target);
    assert_eq!(
        facts.path,
        format!("/{}", uri.path().trim_start_matches('/')),
        "{target:?}"
    );
    let query = uri.query().filter(|query| !query.is_empty());
    assert_eq!(facts.query.as_deref(), query, "{target:?}");
    let jwt = query.and_then(|query| {
        url::form_urlencoded::parse(query.as_bytes())
            .filter(|(name, value)| name == "jwt" && !value.is_empty())
            .map(|(_, value)| value.into_owned())
            .last()
    });
    assert_eq!(facts.jwt(), jwt, "{target:?}");
    // Written back as a target and read again: the same facts.
    let again = match &facts.query {
        Some(query) => format!("{}?{query}", facts.path),
        None => facts.path.clone(),
    };
    assert_eq!(SessionFacts::new(TransportKind::Http, &again), facts);
    // A token presented beside the query is read back, unless the query carries one.
    let mut presented = facts.clone();
    presented.present_token("t0k+en/=");
    match jwt {
        Some(jwt) => assert_eq!(presented.jwt(), Some(jwt)),
        None => {
            assert_eq!(presented.jwt().as_deref(), Some("t0k+en/="));
            if let Some(query) = &facts.query {
                assert!(presented
                    .query
                    .as_deref()
                    .unwrap()
                    .starts_with(query.as_str()));
            }
        }
    }
}

/// A path the relay would parse: parsed again it is itself, within the bound.
fn parse_path(text: &str) -> Option<Path> {
    let path = Path::new(text).ok()?;
    assert!(path.as_str().len() <= starling_proto::limits::MAX_PATH_BYTES);
    assert!(!path.as_str().starts_with('/') && !path.as_str().ends_with('/'));
    assert!(!path.as_str().contains("//"));
    assert_eq!(Path::new(path.as_str()).as_ref(), Ok(&path));
    Some(path)
}

fn is_hidden(path: &Path) -> bool {
    path.segments().any(|segment| segment.starts_with('.'))
}

fn group_body(sequence: usize) -> Vec<u8> {
    GROUPS[sequence].concat().into_bytes()
}

/// The origin and the three routers over it.
struct Relay {
    origin: Origin,
    open: axum::Router,
    rooted: axum::Router,
    auth: axum::Router,
    /// What the origin holds between requests: its broadcasts and interests.
    baseline: (usize, usize),
    _published: Vec<(BroadcastProducer, RouteHandle, Option<TrackProducer>)>,
}

impl Relay {
    async fn start() -> Relay {
        let origin = Origin::new();
        let mut published = Vec::new();
        for name in BROADCASTS {
            let broadcast = BroadcastProducer::new(Limits::default());
            let track = WITH_TRACK.contains(name).then(|| {
                let track = broadcast.create_track(TRACK, TrackInfo::default());
                for (sequence, frames) in GROUPS.iter().enumerate() {
                    let mut group = track.create_group(sequence as u64).unwrap();
                    for frame in *frames {
                        group
                            .write_frame(Frame {
                                timestamp: sequence as u64,
                                payload: Bytes::from_static(frame.as_bytes()),
                            })
                            .unwrap();
                    }
                    group.finish();
                }
                track
            });
            let route = origin
                .publish(
                    Path::new(name).unwrap(),
                    broadcast.consume(),
                    Route::local(),
                )
                .unwrap();
            published.push((broadcast, route, track));
        }
        let config = |root: &str| HttpConfig {
            root: Path::new(root).unwrap(),
            fetch_timeout: FETCH_TIMEOUT,
            ..HttpConfig::default()
        };
        let api = |root: &str| {
            HttpApi::new(
                origin.clone(),
                SessionRegistry::new(),
                FINGERPRINT,
                config(root),
            )
        };
        let authority = Authority::new(&AuthConfig {
            keys: Some(KeySet::new(vec![key()]).into()),
            public_subscribe: ["public/**".parse::<Pattern>().unwrap()]
                .into_iter()
                .collect(),
            ..AuthConfig::default()
        })
        .expect("a valid auth config");
        Relay {
            open: api("").router(),
            rooted: api(ROOT).router(),
            auth: api("").with_authority(authority).router(),
            baseline: (origin.len(), origin.interest_count()),
            origin,
            _published: published,
        }
    }

    async fn request(&mut self, mode: Mode, uri: &Uri) -> (u16, Vec<u8>) {
        let router = match mode {
            Mode::Open => &mut self.open,
            Mode::Rooted => &mut self.rooted,
            Mode::Auth => &mut self.auth,
        };
        let request = Request::get(uri.clone()).body(Body::empty()).unwrap();
        let response = tokio::time::timeout(STEP, router.call(request))
            .await
            .unwrap_or_else(|_| panic!("{uri}: no answer in {STEP:?}"))
            .unwrap_or_else(|never| match never {});
        let status = response.status();
        // The status stream never ends: its head is the answer.
        let body = if uri.path() == "/events" {
            Vec::new()
        } else {
            tokio::time::timeout(STEP, axum::body::to_bytes(response.into_body(), 1 << 20))
                .await
                .unwrap_or_else(|_| panic!("{uri}: no whole body in {STEP:?}"))
                .map(|bytes| bytes.to_vec())
                .unwrap_or_else(|err| panic!("{uri}: the body fails: {err}"))
        };
        let status = status.as_u16();
        check_answer(mode, uri, status, &body);
        assert_eq!(
            (self.origin.len(), self.origin.interest_count()),
            self.baseline,
            "{uri}: the request left the origin changed"
        );
        (status, body)
    }
}

/// The key of the relay with authentication on.
pub(crate) fn key() -> Key {
    Key::parse(KEY).expect("a valid key")
}

/// A token for the relay with authentication on: subscribe to everything under `root`.
pub(crate) fn token(root: &str) -> String {
    let claims = Claims {
        root: root.into(),
        subscribe: ["**".parse::<Pattern>().unwrap()]
            .into_iter()
            .collect::<Patterns>(),
        ..Claims::default()
    };
    key().sign(&claims).expect("the key signs")
}

/// What a route answers: checked against the route's rules.
fn check_answer(mode: Mode, uri: &Uri, status: u16, body: &[u8]) {
    assert!(
        matches!(status, 200 | 400 | 401 | 404 | 504),
        "{uri} ({mode:?}): status {status}"
    );
    let path = uri.path();
    match path {
        "/health" => assert_eq!((status, body), (200, &b"ok\n"[..]), "{uri}"),
        "/certificate.sha256" => {
            assert_eq!((status, body), (200, FINGERPRINT.as_bytes()), "{uri}")
        }
        "/" | "/status.json" | "/events" => match mode {
            Mode::Auth => assert!(matches!(status, 200 | 401), "{uri}: {status}"),
            _ => assert_eq!(status, 200, "{uri}"),
        },
        "/announced" => check_announced(mode, uri, Some(""), status, body),
        _ => {
            if let Some(rest) = path.strip_prefix("/announced/").filter(|r| !r.is_empty()) {
                let decoded = percent_encoding::percent_decode_str(rest)
                    .decode_utf8()
                    .ok();
                check_announced(mode, uri, decoded.as_deref(), status, body);
            } else if let Some(rest) = path.strip_prefix("/fetch/").filter(|r| !r.is_empty()) {
                let decoded = percent_encoding::percent_decode_str(rest)
                    .decode_utf8()
                    .ok();
                check_fetch(mode, uri, decoded.as_deref(), status, body);
            } else if !matches!(path, "/announced/" | "/fetch/") {
                assert_eq!(status, 404, "{uri}: no such route");
            }
        }
    }
}

/// `/announced[/{prefix}]`, `prefix` percent-decoded (`None`: not UTF-8).
fn check_announced(mode: Mode, uri: &Uri, prefix: Option<&str>, status: u16, body: &[u8]) {
    let Some(prefix) = prefix else {
        assert_eq!(status, 400, "{uri}: a path that is not UTF-8");
        return;
    };
    let Ok(text) = std::str::from_utf8(body) else {
        panic!("{uri}: a listing that is not UTF-8");
    };
    if mode == Mode::Auth {
        assert!(matches!(status, 200 | 400 | 401), "{uri}: {status}");
        if status == 200 {
            let base = parse_path(prefix).expect("a listed prefix is a path");
            for line in text.split('\n').filter(|_| !text.is_empty()) {
                let relative = Path::new(line).unwrap();
                assert!(!is_hidden(&relative), "{uri}: lists hidden {line:?}");
                let full = base.join(&relative).unwrap();
                assert!(BROADCASTS.contains(&full.as_str()), "{uri}: lists {full}");
            }
        }
        return;
    }
    let Some(base) = parse_path(prefix) else {
        assert_eq!(status, 400, "{uri}: not a path");
        return;
    };
    let root = Path::new(if mode == Mode::Rooted { ROOT } else { "" }).unwrap();
    let search = if base.has_prefix(&root) {
        base.clone()
    } else if root.has_prefix(&base) {
        root
    } else {
        assert_eq!(status, 401, "{uri}: outside the root");
        return;
    };
    let mut expected: Vec<Path> = BROADCASTS
        .iter()
        .map(|b| Path::new(b).unwrap())
        .filter(|b| b.has_prefix(&search))
        .filter_map(|b| b.strip_prefix(&base))
        .filter(|relative| !is_hidden(relative))
        .collect();
    expected.sort();
    let expected: Vec<&str> = expected.iter().map(Path::as_str).collect();
    // The body as written: a broadcast at the prefix itself is an empty line.
    assert_eq!(
        (status, body),
        (200, expected.join("\n").as_bytes()),
        "{uri} ({mode:?})"
    );
}

/// `/fetch/{path}`, `path` percent-decoded (`None`: not UTF-8).
fn check_fetch(mode: Mode, uri: &Uri, path: Option<&str>, status: u16, body: &[u8]) {
    let groups: Vec<String> = url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .filter(|(name, _)| name == "group")
        .map(|(_, value)| value.into_owned())
        .collect();
    // The query as axum's `Query` reads it: one `group`, a sequence or `latest`.
    let group = match groups.as_slice() {
        [] => Some(None),
        [one] if one == "latest" => Some(None),
        [one] => one.parse::<u64>().ok().map(Some),
        _ => None,
    };
    let (Some(path), Some(group)) = (path, group) else {
        assert_eq!(status, 400, "{uri}: a path or query the extractors refuse");
        return;
    };
    let Some((broadcast, track)) = path.rsplit_once('/') else {
        assert_eq!(status, 400, "{uri}: no broadcast");
        return;
    };
    if mode == Mode::Auth {
        assert!(
            matches!(status, 200 | 400 | 401 | 404 | 504),
            "{uri}: {status}"
        );
        if status == 200 {
            assert!(
                (0..GROUPS.len()).any(|sequence| body == group_body(sequence)),
                "{uri}: a body no group holds: {body:?}"
            );
        }
        return;
    }
    let Some(broadcast) = parse_path(broadcast) else {
        assert_eq!(status, 400, "{uri}: not a path");
        return;
    };
    let root = Path::new(if mode == Mode::Rooted { ROOT } else { "" }).unwrap();
    let expected: (u16, Vec<u8>) = if !broadcast.has_prefix(&root) {
        (401, Vec::new())
    } else if !BROADCASTS.contains(&broadcast.as_str()) {
        (504, Vec::new())
    } else if track.len() > Limits::default().max_track_name_bytes {
        (400, Vec::new())
    } else if track != TRACK || !WITH_TRACK.contains(&broadcast.as_str()) {
        (404, Vec::new())
    } else {
        match group {
            None => (200, group_body(GROUPS.len() - 1)),
            Some(sequence) => match usize::try_from(sequence) {
                Ok(sequence) if sequence < GROUPS.len() => (200, group_body(sequence)),
                _ => (404, Vec::new()),
            },
        }
    };
    assert_eq!((status, body.to_vec()), expected, "{uri} ({mode:?})");
}

/// Request targets for every route and every relay, behind the byte that picks the relay.
pub(crate) fn seeds() -> Vec<Vec<u8>> {
    let member = token("room");
    let operator = token("");
    let mut targets: Vec<(u8, String)> = Vec::new();
    for target in [
        "/health",
        "/certificate.sha256",
        "/",
        "/status.json",
        "/announced",
        "/announced/room",
        "/announced/room/alice",
        "/announced/.hidden",
        "/announced/r%6Fom//",
        "/fetch/room/alice/video",
        "/fetch/room/alice/video?group=1",
        "/fetch/room/alice/video?group=latest&jwt=abc",
        "/fetch/room/alice/video?group=soon",
        "/fetch/room/alice/video?group=0&group=2",
        "/fetch/room/alice/video?group=7",
        "/fetch/room/alice/audio",
        "/fetch/room%2Falice/video",
        "/fetch/nobody/video",
        "/fetch/video",
        "/nothing",
    ] {
        targets.push((0, target.to_string()));
    }
    for target in ["/announced", "/announced/room", "/fetch/roomy/carol/video"] {
        targets.push((1, target.to_string()));
    }
    for target in [
        format!("/fetch/room/alice/video?jwt={member}"),
        format!("/announced/room?jwt={member}"),
        format!("/status.json?jwt={operator}"),
        "/fetch/public/demo/video?group=1".to_string(),
        "/fetch/room/alice/video".to_string(),
    ] {
        targets.push((2, target));
    }
    targets
        .into_iter()
        .map(|(pick, target)| {
            let mut input = vec![pick];
            input.extend_from_slice(target.as_bytes());
            input
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(pick: u8, target: &str) -> (u16, Vec<u8>) {
        let mut input = vec![pick];
        input.extend_from_slice(target.as_bytes());
        answer(&input).expect("a request target")
    }

    #[test]
    fn the_relay_with_auth_serves_a_members_token_and_refuses_none() {
        let member = token("room");
        assert_eq!(
            get(2, &format!("/fetch/room/alice/video?group=1&jwt={member}")),
            (200, b"one-aone-b".to_vec())
        );
        assert_eq!(get(2, "/fetch/room/alice/video").0, 401);
        assert_eq!(get(2, "/fetch/public/demo/video").0, 200);
        assert_eq!(
            get(2, &format!("/announced/room?jwt={member}")),
            (200, b"alice\nbob".to_vec())
        );
        assert_eq!(get(2, &format!("/status.json?jwt={}", token(""))).0, 200);
        assert_eq!(get(2, "/status.json").0, 401);
    }

    #[test]
    fn the_open_relays_answer_by_the_rules() {
        assert_eq!(get(0, "/fetch/room/alice/video").0, 200);
        assert_eq!(get(0, "/fetch/nobody/video").0, 504);
        assert_eq!(get(1, "/fetch/roomy/carol/video").0, 401);
        assert_eq!(
            get(1, "/announced"),
            (200, b"room/alice\nroom/bob".to_vec())
        );
        assert!(answer(b"\x00not a target").is_none());
    }
}
