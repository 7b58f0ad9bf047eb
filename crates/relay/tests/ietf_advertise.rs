//! A peer that does not declare MoQ Solicit (a third-party client) hears the relay's
//! broadcasts unasked: a PUBLISH_NAMESPACE per broadcast, on the control stream (14-16) or a
//! request stream of its own (17 on).

mod common;
mod ietf_client;
mod witness;

use bytes::BytesMut;
use starling_proto::ietf::{Control, Draft, SetupOptions};
use starling_proto::Path;
use starling_relay::RelayConfig;
use starling_transport::{RecvStream, Transport};

use common::{bind_relay, within};
use ietf_client::Client;
use witness::witness;

/// The next PUBLISH_NAMESPACE the relay sends `client`, skipping its other requests.
async fn next_advertisement(client: &mut Client) -> Path {
    let draft = client.draft;
    if let Some((_, recv)) = &mut client.control {
        // 14-16: messages on the control stream.
        let mut buf = std::mem::take(&mut client.pending);
        loop {
            while let Some((msg, used)) = Control::peek(&buf, draft).unwrap() {
                let _ = buf.split_to(used);
                if let Control::PublishNamespace(msg) = msg {
                    client.pending = buf;
                    return msg.namespace;
                }
            }
            let chunk = within(recv.read(4096)).await.unwrap().expect("a message");
            buf.extend_from_slice(&chunk);
        }
    }
    // 17 on: each request on a stream of its own, its first message saying which.
    loop {
        let (_send, mut recv) = within(client.transport.accept_bi()).await.unwrap();
        let mut buf = BytesMut::new();
        let first = loop {
            if let Some((msg, _)) = Control::peek(&buf, draft).unwrap() {
                break msg;
            }
            let chunk = within(recv.read(4096)).await.unwrap().expect("a message");
            buf.extend_from_slice(&chunk);
        };
        if let Control::PublishNamespace(msg) = first {
            return msg.namespace;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_does_not_solicit_hears_every_broadcast_unasked() {
    let (relay, url) = bind_relay(RelayConfig::default()).await;
    tokio::spawn(relay.run());
    let witness = witness(&url).await;
    for draft in [Draft::D14, Draft::D16, Draft::D17, Draft::D22] {
        let mut client = Client::connect_with(&url, draft, SetupOptions::default()).await;
        client.server_setup().await;
        assert_eq!(
            next_advertisement(&mut client).await,
            Path::new("good").unwrap(),
            "{}",
            draft.name()
        );
    }
    witness.finish().await;
}
