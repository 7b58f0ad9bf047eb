//! An IETF FETCH is served from the relay's cache: a lite publisher's group, cached because a
//! lite subscriber read it, fetched whole by a raw IETF client (standalone before draft 20,
//! an Absolute filter with an end from 20): FETCH_OK with the group's end (exclusive before
//! 20, inclusive from 20), then one FETCH_HEADER stream with every object in order.

mod common;
mod ietf_client;
mod witness;

use bytes::{Bytes, BytesMut};
use starling_proto::ietf::fetch::{Fetch, FetchKind};
use starling_proto::ietf::fetch_stream::{peek_header, FetchEntry};
use starling_proto::ietf::filter::{EndLocation, Location};
use starling_proto::ietf::{Control, Draft, Filter};
use starling_proto::{Path, TrackInfo};
use starling_relay::RelayConfig;
use starling_transport::{RecvStream, Transport};

use common::{bind_relay, within, CachedTrack};
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
    // A lite publisher's group of three frames (one empty), cached at the relay.
    let mut cached = CachedTrack::start(&url, TrackInfo::default()).await;
    let sequence = 0;
    cached.publish(sequence, &FRAMES).await;

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
