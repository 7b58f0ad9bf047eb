//! IETF SUBSCRIBE filters served from the relay's cache (draft 22, raw client): with groups 0
//! to 3 cached, Relative 2 starts at group 2, Absolute {1, 1} at group 1's second object, Next
//! Group waits for group 4, and Unfiltered starts at the latest group, 3.

mod common;
mod ietf_client;
mod witness;

use bytes::BytesMut;
use starling_proto::ietf::filter::Location;
use starling_proto::ietf::subgroup::{ObjectHeader, SubgroupHeader};
use starling_proto::ietf::subscribe::Subscribe;
use starling_proto::ietf::{Control, Draft, Filter};
use starling_proto::{Path, TrackInfo};
use starling_relay::RelayConfig;
use starling_transport::{RecvStream, Transport};

use common::{bind_relay, within, CachedTrack};
use ietf_client::Client;

const DRAFT: Draft = Draft::D22;

/// The next subgroup stream's group and its objects' payloads.
async fn next_group(client: &Client) -> (u64, Vec<String>) {
    let mut stream = within(client.transport.accept_uni()).await.unwrap();
    let mut buf = BytesMut::new();
    let mut header: Option<SubgroupHeader> = None;
    let mut payloads = Vec::new();
    loop {
        match &header {
            None => {
                if let Some((h, used)) = SubgroupHeader::peek(&buf, DRAFT).unwrap() {
                    let _ = buf.split_to(used);
                    header = Some(h);
                    continue;
                }
            }
            Some(h) => {
                if let Some((object, used)) =
                    ObjectHeader::peek(&buf, DRAFT, h.flags.properties, 1 << 20).unwrap()
                {
                    let end = used + object.length as usize;
                    if buf.len() >= end {
                        payloads.push(String::from_utf8(buf[used..end].to_vec()).unwrap());
                        let _ = buf.split_to(end);
                        continue;
                    }
                }
            }
        }
        match within(stream.read(4096)).await.unwrap() {
            Some(chunk) => buf.extend_from_slice(&chunk),
            None => return (header.expect("a header").group, payloads),
        }
    }
}

/// The groups of the next `n` subgroup streams, sorted.
async fn groups(client: &Client, n: usize) -> Vec<u64> {
    let mut groups = Vec::new();
    for _ in 0..n {
        groups.push(next_group(client).await.0);
    }
    groups.sort();
    groups
}

/// Wait for the SUBSCRIBE_OK on the request's stream.
async fn subscribed(client: &mut Client) {
    let recv = client.streams.last_mut().expect("the request's stream");
    let mut buf = BytesMut::new();
    loop {
        if let Some((msg, _)) = Control::peek(&buf, DRAFT).unwrap() {
            assert!(matches!(msg, Control::SubscribeOk(_)), "answered {msg:?}");
            return;
        }
        let chunk = within(recv.read(4096)).await.unwrap().expect("an answer");
        buf.extend_from_slice(&chunk);
    }
}

async fn subscribe(url: &url::Url, filter: Filter) -> Client {
    let mut client = Client::connect(url, DRAFT).await;
    client.server_setup().await;
    let mut bytes = BytesMut::new();
    Control::Subscribe(Subscribe {
        request_id: 0,
        namespace: Path::new("cached").unwrap(),
        track: "t".into(),
        filter,
        ..Subscribe::default()
    })
    .encode(DRAFT, &mut bytes)
    .unwrap();
    client.request(bytes.freeze()).await;
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_filter_starts_where_it_says() {
    let (relay, url) = bind_relay(RelayConfig::default()).await;
    tokio::spawn(relay.run());
    let info = TrackInfo {
        max_age_ms: 60_000,
        ..TrackInfo::default()
    };
    // A lite publisher's groups 0 to 3, cached at the relay.
    let mut cached = CachedTrack::start(&url, info).await;
    for sequence in 0..4 {
        let (a, b) = (format!("{sequence}.0"), format!("{sequence}.1"));
        cached.publish(sequence, &[&a, &b]).await;
    }

    // Groups go newest first, each on a stream of its own: read as many as the filter reaches
    // and sort them (a filter starting too late reaches fewer, and the read times out).
    let relative = subscribe(&url, Filter::Relative(2)).await;
    assert_eq!(groups(&relative, 2).await, [2, 3], "Relative 2");

    let absolute = subscribe(
        &url,
        Filter::Absolute {
            start: Location {
                group: 1,
                object: 1,
            },
            end: None,
        },
    )
    .await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(next_group(&absolute).await);
    }
    streams.sort();
    assert_eq!(
        streams[0],
        (1, vec!["1.1".to_string()]),
        "Absolute {{1, 1}}"
    );

    let unfiltered = subscribe(&url, Filter::Unfiltered).await;
    assert_eq!(next_group(&unfiltered).await.0, 3, "Unfiltered");

    let mut next = subscribe(&url, Filter::Relative(0)).await;
    // Placed once answered: group 4 must come after that.
    subscribed(&mut next).await;
    cached.publish(4, &["4.0", "4.1"]).await;
    assert_eq!(next_group(&next).await.0, 4, "Next Group");
}
