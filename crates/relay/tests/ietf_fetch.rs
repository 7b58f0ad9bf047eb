//! An IETF FETCH is served from the relay's cache: a lite publisher's group, cached because a
//! lite subscriber read it, fetched whole by a raw IETF client (standalone before draft 20,
//! an Absolute filter with an end from 20): FETCH_OK with the group's end (exclusive before
//! 20, inclusive from 20), then one FETCH_HEADER stream with every object in order.

mod common;
mod ietf_client;
mod witness;

use bytes::{Bytes, BytesMut};
use starling_model::{BroadcastProducer, Frame, Limits, Origin, Route, StartAt};
use starling_proto::ietf::fetch::{Fetch, FetchKind};
use starling_proto::ietf::fetch_stream::{peek_header, FetchEntry};
use starling_proto::ietf::filter::{EndLocation, Location};
use starling_proto::ietf::{Control, Draft, Filter};
use starling_proto::{Path, Role, TrackInfo, Version};
use starling_relay::RelayConfig;
use starling_session::{random_hop, SessionConfig};
use starling_transport::{RecvStream, Transport};

use common::{bind_relay, session, subscribed_broadcast, within};
use ietf_client::Client;

const FRAMES: [&str; 3] = ["one", "", "three"];

fn fetch(draft: Draft, group: u64) -> Bytes {
    let namespace = Path::new("cached").unwrap();
    let kind = if draft.has_fill() {
        FetchKind::Filtered {
            namespace,
            track: "t".into(),
            filter: Filter::Absolute {
                start: Location { group, object: 0 },
                end: Some(EndLocation {
                    group,
                    object: None,
                }),
            },
        }
    } else {
        FetchKind::Standalone {
            namespace,
            track: "t".into(),
            start: Location { group, object: 0 },
            end: Location { group, object: 0 },
        }
    };
    let mut out = BytesMut::new();
    Control::Fetch(Fetch {
        request_id: 0,
        priority: 128,
        group_order: Default::default(),
        kind,
        range_filters: false,
        fill_timeout: None,
    })
    .encode(draft, &mut out)
    .unwrap();
    out.freeze()
}

/// Read `client`'s next control message on the request (the control stream, or the request's
/// own stream `recv`), skipping the relay's own requests on the control stream.
async fn answer<R: RecvStream>(draft: Draft, buf: &mut BytesMut, recv: &mut R) -> Control {
    loop {
        while let Some((msg, used)) = Control::peek(buf, draft).unwrap() {
            let _ = buf.split_to(used);
            if matches!(msg, Control::FetchOk(_) | Control::RequestError { .. }) {
                return msg;
            }
        }
        let chunk = within(recv.read(4096)).await.unwrap().expect("an answer");
        buf.extend_from_slice(&chunk);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_group_is_fetched_whole() {
    let (relay, url) = bind_relay(RelayConfig::default()).await;
    tokio::spawn(relay.run());
    // A lite publisher with one finished group of three frames (one empty).
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new(Limits::default());
    let track = broadcast.create_track("t", TrackInfo::default());
    let _route = origin
        .publish(
            Path::new("cached").unwrap(),
            broadcast.consume(),
            Route::local(),
        )
        .unwrap();
    let mut config = SessionConfig::new(random_hop());
    config.publish = Some(origin);
    let _publisher = session(&url, Version::Lite06, Role::Publisher, config).await;
    // A lite reader brings the group into the relay's cache.
    let (_reader, cached) = subscribed_broadcast(&url, "cached").await;
    let mut reading = cached.subscribe_track("t", StartAt::default()).unwrap();
    let mut group = track.append_group().unwrap();
    for (i, frame) in FRAMES.iter().enumerate() {
        group
            .write_frame(Frame {
                timestamp: i as u64,
                payload: Bytes::from_static(frame.as_bytes()),
            })
            .unwrap();
    }
    group.finish();
    let mut read = within(reading.next_group()).await.unwrap().unwrap();
    let sequence = read.sequence();
    while within(read.next_frame()).await.unwrap().is_some() {}

    for draft in [Draft::D14, Draft::D16, Draft::D19, Draft::D20, Draft::D22] {
        let mut client = Client::connect(&url, draft).await;
        client.server_setup().await;
        client.request(fetch(draft, sequence)).await;
        let msg = match &mut client.control {
            Some((_, recv)) => {
                let mut buf = std::mem::take(&mut client.pending);
                answer(draft, &mut buf, recv).await
            }
            None => {
                let mut recv = client.streams.pop().expect("the request's stream");
                answer(draft, &mut BytesMut::new(), &mut recv).await
            }
        };
        let Control::FetchOk(ok) = msg else {
            panic!("{}: answered {msg:?}", draft.name());
        };
        // Exclusive before 20, inclusive from 20.
        let last = FRAMES.len() as u64 - 1;
        let end = if draft.has_fill() { last } else { last + 1 };
        assert_eq!(
            (ok.end.group, ok.end.object),
            (sequence, end),
            "{}",
            draft.name()
        );

        let mut stream = within(client.transport.accept_uni()).await.unwrap();
        let mut buf = BytesMut::new();
        let mut payloads = Vec::new();
        let mut header = false;
        loop {
            if !header {
                if let Some((_, used)) = peek_header(&buf, draft).unwrap() {
                    let _ = buf.split_to(used);
                    header = true;
                    continue;
                }
            } else if let Some((FetchEntry::Object(object), used)) =
                FetchEntry::peek(&buf, draft, 1 << 20).unwrap()
            {
                let end = used + object.length as usize;
                if buf.len() >= end {
                    payloads.push(String::from_utf8(buf[used..end].to_vec()).unwrap());
                    let _ = buf.split_to(end);
                    continue;
                }
            }
            let read = within(stream.read(4096)).await;
            match read.unwrap_or_else(|err| panic!("{}: {err:?} after {payloads:?}", draft.name()))
            {
                Some(chunk) => buf.extend_from_slice(&chunk),
                None => break,
            }
        }
        assert_eq!(payloads, FRAMES, "{}", draft.name());
    }
}
