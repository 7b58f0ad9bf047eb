//! IETF drafts, malformed input over real sockets, on every draft: trailing bytes after a
//! request, a request id of the client's wrong parity, a request id past the MAX_REQUEST_ID
//! granted (14-16), an unknown message parameter (16 on; skipped on 14 and 15), and a control
//! message longer than the relay accepts. Each closes the offending session with the drafts'
//! code (PROTOCOL_VIOLATION 0x3, INVALID_REQUEST_ID 0x4, TOO_MANY_REQUESTS 0x7), while a
//! witness on the same relay keeps receiving every frame.

mod common;
mod ietf_client;
mod witness;

use bytes::{Bytes, BytesMut};
use starling_proto::framing::write_frame;
use starling_proto::ietf::fields::{write_name, write_namespace, write_request_id};
use starling_proto::ietf::params::ParamWriter;
use starling_proto::ietf::subscribe::Subscribe;
use starling_proto::ietf::{Control, Draft};
use starling_proto::{varint, Path, SessionCode};
use starling_relay::RelayConfig;
use starling_session::SessionLimits;
use starling_transport::RecvStream;

use common::{bind_relay, within};
use ietf_client::Client;
use witness::{witness, PROTOCOL_VIOLATION};

const INVALID_REQUEST_ID: u32 = SessionCode::InvalidRequestId.to_code();
const TOO_MANY_REQUESTS: u32 = SessionCode::TooManyRequests.to_code();

/// The relay's control-message limit in these tests: smaller than a 16-bit length can say.
const MAX_CONTROL: usize = 1024;

/// A SUBSCRIBE for `good/seq` with request id `id`.
fn subscribe(draft: Draft, id: u64) -> BytesMut {
    let mut out = BytesMut::new();
    Control::Subscribe(Subscribe {
        request_id: id,
        namespace: Path::new("good").unwrap(),
        track: "seq".to_string(),
        ..Subscribe::default()
    })
    .encode(draft, &mut out)
    .unwrap();
    out
}

/// `frame` (a whole control message) with `more` appended to its body.
fn with_trailing(draft: Draft, frame: &[u8], more: &[u8]) -> Bytes {
    let flavor = starling_proto::coding::Wire::flavor(draft);
    let (kind, n) = varint::peek_as(flavor, frame).unwrap().unwrap();
    let mut body = frame[n + 2..].to_vec();
    body.extend_from_slice(more);
    let mut out = BytesMut::new();
    write_frame(kind, &body, draft, u16::MAX as usize, &mut out).unwrap();
    out.freeze()
}

/// A SUBSCRIBE (15 on) whose parameters hold `key`, which no draft defines.
fn subscribe_with_unknown(draft: Draft, id: u64, key: u64) -> Bytes {
    let mut body = Vec::new();
    write_request_id(&mut body, id, draft).unwrap();
    write_namespace(&mut body, &Path::new("good").unwrap(), draft).unwrap();
    write_name(&mut body, "seq", draft).unwrap();
    let mut params = ParamWriter::new(draft);
    params.varint(key, 1).unwrap();
    params.finish(&mut body).unwrap();
    let mut out = BytesMut::new();
    write_frame(0x03, &body, draft, u16::MAX as usize, &mut out).unwrap();
    out.freeze()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_close_the_session_with_the_drafts_codes() {
    let mut config = RelayConfig::default();
    config.session_limits.max_control_message = MAX_CONTROL;
    let (relay, url) = bind_relay(config).await;
    tokio::spawn(relay.run());
    let witness = witness(&url).await;
    let window = SessionLimits::default().ietf_request_window() as u64;

    for &draft in Draft::ALL {
        let trailing = with_trailing(draft, &subscribe(draft, 0), &[0]);
        Client::connect(&url, draft)
            .await
            .closes_with(trailing, PROTOCOL_VIOLATION, "trailing bytes")
            .await;

        let odd = subscribe(draft, 1).freeze();
        Client::connect(&url, draft)
            .await
            .closes_with(odd, INVALID_REQUEST_ID, "a server's request id")
            .await;

        if draft.has_control_stream() {
            let past = subscribe(draft, 2 * window).freeze();
            Client::connect(&url, draft)
                .await
                .closes_with(past, TOO_MANY_REQUESTS, "past MAX_REQUEST_ID")
                .await;
        }

        if !draft.skips_unknown_parameters() {
            let unknown = subscribe_with_unknown(draft, 0, 0x3E);
            Client::connect(&url, draft)
                .await
                .closes_with(unknown, PROTOCOL_VIOLATION, "an unknown parameter")
                .await;
        }

        let oversized = with_trailing(draft, &subscribe(draft, 0), &vec![0; 2 * MAX_CONTROL]);
        Client::connect(&url, draft)
            .await
            .closes_with(oversized, PROTOCOL_VIOLATION, "an oversized message")
            .await;
    }

    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// Drafts 14 and 15 skip an unknown parameter: the request is served (here refused for a
/// missing track) and the session lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drafts_14_and_15_skip_unknown_parameters() {
    let (relay, url) = bind_relay(RelayConfig::default()).await;
    tokio::spawn(relay.run());
    let draft = Draft::D15;
    let mut client = Client::connect(&url, draft).await;
    client.server_setup().await;
    client.request(subscribe_with_unknown(draft, 0, 0x3E)).await;
    // The relay's own requests (its SUBSCRIBE_NAMESPACE) may come first on the control stream.
    let mut buf = std::mem::take(&mut client.pending);
    let (_, recv) = client.control.as_mut().unwrap();
    loop {
        while let Some((msg, used)) = Control::peek(&buf, draft).unwrap() {
            let _ = buf.split_to(used);
            if let Control::RequestError { error, .. } = msg {
                assert_eq!(error.request_id, 0, "refused the SUBSCRIBE");
                return;
            }
        }
        let chunk = within(recv.read(4096))
            .await
            .unwrap()
            .expect("the session lives on");
        buf.extend_from_slice(&chunk);
    }
}
