//! Helpers for the HTTP tests: a raw HTTP/1.1 client over `TcpStream`, an SSE reader, and an
//! in-process publisher of broadcasts through the relay.

#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::Bytes;
use starling_model::{
    BroadcastProducer, Frame, GroupProducer, Limits, Origin, Route, RouteHandle, TrackInfo,
    TrackProducer,
};
use starling_net::QuicTransport;
use starling_proto::{Path, Role, Version};
use starling_session::{random_hop, Session, SessionConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use url::Url;

use crate::common::{session, within};

/// One HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Headers,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("utf-8 body")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("json body")
    }
}

/// `GET target` with extra header lines; reads the whole response (`Connection: close`).
pub async fn get_with(addr: SocketAddr, target: &str, extra: &[(&str, &str)]) -> Response {
    let mut stream = within(TcpStream::connect(addr)).await.unwrap();
    let mut request = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in extra {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    within(stream.read_to_end(&mut raw)).await.unwrap();
    parse(&raw)
}

pub async fn get(addr: SocketAddr, target: &str) -> Response {
    get_with(addr, target, &[]).await
}

/// The value of one Prometheus sample line (`name{labels} value`), if present.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(series) && line[series.len()..].starts_with(' '))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

type Headers = Vec<(String, String)>;

/// The body's offset, the status and the headers, once the head is complete.
fn split_head(raw: &[u8]) -> Option<(usize, u16, Headers)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).expect("ascii head");
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Some((end + 4, status, headers))
}

fn parse(raw: &[u8]) -> Response {
    let (start, status, headers) = split_head(raw).expect("a complete response head");
    let mut response = Response {
        status,
        headers,
        body: Vec::new(),
    };
    let rest = &raw[start..];
    response.body = if response
        .header("transfer-encoding")
        .is_some_and(|te| te.eq_ignore_ascii_case("chunked"))
    {
        let mut decoder = Chunked::default();
        decoder.feed(rest);
        assert!(decoder.done, "chunked body ended cleanly");
        decoder.out
    } else {
        rest.to_vec()
    };
    response
}

/// An incremental `Transfer-Encoding: chunked` decoder.
#[derive(Default)]
struct Chunked {
    pending: Vec<u8>,
    out: Vec<u8>,
    done: bool,
}

impl Chunked {
    fn feed(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        loop {
            let Some(line_end) = self.pending.windows(2).position(|w| w == b"\r\n") else {
                return;
            };
            let size_text = std::str::from_utf8(&self.pending[..line_end]).unwrap();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
                .expect("chunk size");
            if size == 0 {
                self.done = true;
                return;
            }
            let needed = line_end + 2 + size + 2;
            if self.pending.len() < needed {
                return;
            }
            self.out
                .extend_from_slice(&self.pending[line_end + 2..line_end + 2 + size]);
            self.pending.drain(..needed);
        }
    }
}

/// A `GET /events` stream, read event by event.
pub struct EventStream {
    stream: TcpStream,
    head: Option<(u16, Headers)>,
    raw: Vec<u8>,
    body: Chunked,
}

impl EventStream {
    pub async fn open(addr: SocketAddr, target: &str) -> EventStream {
        let mut stream = within(TcpStream::connect(addr)).await.unwrap();
        let request =
            format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        EventStream {
            stream,
            head: None,
            raw: Vec::new(),
            body: Chunked::default(),
        }
    }

    pub fn status(&self) -> Option<u16> {
        self.head.as_ref().map(|(s, _)| *s)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.as_ref().and_then(|(_, headers)| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        })
    }

    /// The next event's `(event name, data)`, skipping keep-alive comments.
    pub async fn next(&mut self) -> (String, String) {
        loop {
            if let Some(end) = self.body.out.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.body.out.drain(..end + 2).collect();
                let text = String::from_utf8(block).unwrap();
                let mut name = String::new();
                let mut data = Vec::new();
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                    }
                }
                if !data.is_empty() {
                    return (name, data.join("\n"));
                }
                continue;
            }
            let mut buf = [0u8; 16 * 1024];
            let n = within(self.stream.read(&mut buf)).await.unwrap();
            assert!(n > 0, "event stream ended");
            if self.head.is_none() {
                self.raw.extend_from_slice(&buf[..n]);
                if let Some((start, status, headers)) = split_head(&self.raw) {
                    self.head = Some((status, headers));
                    let rest = self.raw.split_off(start);
                    self.body.feed(&rest);
                }
            } else {
                self.body.feed(&buf[..n]);
            }
        }
    }
}

/// Broadcasts published into the relay by one in-process publisher session.
pub struct Publisher {
    pub origin: Origin,
    pub session: Session<QuicTransport>,
    routes: Vec<RouteHandle>,
    broadcasts: Vec<BroadcastProducer>,
}

impl Publisher {
    pub async fn connect(url: &Url, version: Version) -> Publisher {
        let origin = Origin::new();
        let mut config = SessionConfig::new(random_hop());
        config.publish = Some(origin.clone());
        let session = session(url, version, Role::Publisher, config).await;
        Publisher {
            origin,
            session,
            routes: Vec::new(),
            broadcasts: Vec::new(),
        }
    }

    /// Announce `path`; returns the index to add tracks with.
    pub fn broadcast(&mut self, path: &str) -> usize {
        let broadcast = BroadcastProducer::new(Limits::default());
        self.routes.push(
            self.origin
                .publish(
                    Path::new(path).unwrap(),
                    broadcast.consume(),
                    Route::local(),
                )
                .unwrap(),
        );
        self.broadcasts.push(broadcast);
        self.broadcasts.len() - 1
    }

    pub fn track(&self, broadcast: usize, name: &str, info: TrackInfo) -> TrackProducer {
        self.broadcasts[broadcast].create_track(name, info)
    }
}

/// Write one whole group of `frames` (timestamps all `timestamp`).
pub fn write_group(track: &TrackProducer, sequence: u64, timestamp: u64, frames: &[&str]) {
    let mut group: GroupProducer = track.create_group(sequence).unwrap();
    for frame in frames {
        group
            .write_frame(Frame {
                timestamp,
                payload: Bytes::copy_from_slice(frame.as_bytes()),
            })
            .unwrap();
    }
    group.finish();
}

/// Wait until the relay's origin has a route at each of `paths`.
pub async fn routed(origin: &Origin, paths: &[&str]) {
    let interest = origin.interest(Path::empty()).unwrap();
    let mut changed = Vec::new();
    loop {
        if paths
            .iter()
            .all(|p| origin.consume(&Path::new(p).unwrap(), None).is_some())
        {
            return;
        }
        within(interest.changed(&mut changed)).await;
    }
}

/// Wait until `origin` holds `count` announce interests.
pub async fn interests_reach(origin: &Origin, count: usize) {
    within(async {
        while origin.interest_count() < count {
            tokio::task::yield_now().await;
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    })
    .await
}

/// A WebSocket upgrade request (qmux-01.moq-lite-06) for `target`: the response status and
/// head.
pub async fn upgrade_head(url: &Url, target: &str) -> (u16, String) {
    let addr = format!("127.0.0.1:{}", url.port().unwrap());
    let mut stream = within(TcpStream::connect(&addr)).await.unwrap();
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Protocol: qmux-01.moq-lite-06\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = within(stream.read(&mut buf)).await.unwrap();
        assert!(n > 0, "connection closed before a response head");
        raw.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&raw).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head)
}
