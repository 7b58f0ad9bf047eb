//! The relay advertises PROBE over QUIC and answers a probe stream with its RTT estimate.

use bytes::{Bytes, BytesMut};
use starling_net::{Client, ClientConfig, TlsVerify};
use starling_proto::{decode_message, ProbeLevel, Role, Version};
use starling_relay::{Relay, RelayConfig};
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use starling_transport::{RecvStream, SendStream, Transport};
use url::Url;

const STEP: std::time::Duration = std::time::Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_reports_rtt_on_a_probe_stream() {
    starling_net::tls::install_default_provider();
    let relay = Relay::bind(RelayConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let url = Url::parse(&format!(
        "moqt://127.0.0.1:{}/",
        relay.local_addr().unwrap().port()
    ))
    .unwrap();
    tokio::spawn(relay.run());
    let client = Client::new(
        ClientConfig::default()
            .with_alpns(&[Version::Lite06.alpn()])
            .with_tls(TlsVerify::Disabled),
    )
    .unwrap();
    let connected = client.connect(&url).await.unwrap();
    let transport = connected.transport.clone();
    let session = Session::connect(
        connected.transport,
        Version::Lite06,
        ClientSetup {
            role: Some(Role::Subscriber),
            ..Default::default()
        },
        SessionConfig::new(random_hop()),
    )
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
        let chunk = tokio::time::timeout(STEP, recv.read(1024))
            .await
            .unwrap()
            .unwrap()
            .expect("a report before FIN");
        buf.extend_from_slice(&chunk);
    };
    assert!(report.rtt_ms >= 1, "{report:?}");
    assert_eq!(report.bitrate, 0, "no send-rate estimate yet");
}
