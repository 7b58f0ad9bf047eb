//! The relay advertises PROBE over QUIC and answers a probe stream with its RTT estimate.

use bytes::{Bytes, BytesMut};
use starling_proto::{decode_message, ProbeLevel, Role, Version};
use starling_relay::RelayConfig;
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use starling_transport::{RecvStream, SendStream, Transport};

mod common;

use common::{bind_relay, dial, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_reports_rtt_on_a_probe_stream() {
    let (relay, url) = bind_relay(RelayConfig::default()).await;
    tokio::spawn(relay.run());
    let transport = dial(&url, Version::Lite06).await;
    let session = within(Session::connect(
        transport.clone(),
        Version::Lite06,
        ClientSetup {
            role: Some(Role::Subscriber),
            ..Default::default()
        },
        SessionConfig::new(random_hop()),
    ))
    .await
    .unwrap();
    assert_eq!(session.peer().probe, ProbeLevel::Report);

    let (mut send, mut recv) = transport.open_bi().await.unwrap();
    send.write(Bytes::from_static(&[0x04])).await.unwrap();
    let mut buf = BytesMut::new();
    let report = loop {
        if let Some(report) =
            decode_message::<starling_proto::Probe>(&mut buf, Version::Lite06).unwrap()
        {
            break report;
        }
        let chunk = within(recv.read(1024))
            .await
            .unwrap()
            .expect("a report before FIN");
        buf.extend_from_slice(&chunk);
    };
    assert!(report.rtt_ms >= 1, "{report:?}");
    assert_eq!(report.bitrate, 0, "no send-rate estimate yet");
}
