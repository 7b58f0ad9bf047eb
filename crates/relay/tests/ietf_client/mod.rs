//! A raw IETF client for relay tests: SETUP by hand, then requests as bytes where the draft
//! sends them (the control stream on 14-16, a stream each from 17). Each test binary uses
//! part of it.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use starling_proto::ietf::{ClientSetup, Control, Draft, Setup, SetupOptions};
use starling_transport::{RecvStream, SendStream, Transport};

use crate::common::{quic_client_alpn, within};
use crate::witness::closed_code;

/// A session on `draft` whose SETUP is sent; requests go to the returned send stream (the
/// control stream on 14-16, a fresh request stream from 17).
pub struct Client {
    pub transport: starling_net::QuicTransport,
    pub control: Option<(
        <starling_net::QuicTransport as Transport>::Send,
        <starling_net::QuicTransport as Transport>::Recv,
    )>,
    pub draft: Draft,
    /// 14-16: what was read on the control stream past the SERVER_SETUP.
    pub pending: BytesMut,
    /// 17 on: the receive sides of the request streams opened so far, newest last.
    pub streams: Vec<<starling_net::QuicTransport as Transport>::Recv>,
}

impl Client {
    pub async fn connect(url: &url::Url, draft: Draft) -> Self {
        Self::connect_with(url, draft, SetupOptions::default()).await
    }

    /// Like `connect`, with these SETUP options; on 14-16 the SERVER_SETUP is not awaited
    /// (the relay may close instead).
    pub async fn connect_with(url: &url::Url, draft: Draft, options: SetupOptions) -> Self {
        let transport = within(quic_client_alpn(draft.alpn()).connect(url))
            .await
            .unwrap()
            .transport;
        let mut setup = BytesMut::new();
        if draft.has_control_stream() {
            let versions = if draft.has_inline_fields() {
                vec![draft.code()]
            } else {
                Vec::new()
            };
            Control::ClientSetup(ClientSetup { versions, options })
                .encode(draft, &mut setup)
                .unwrap();
            let (mut send, recv) = transport.open_bi().await.unwrap();
            send.write(setup.freeze()).await.unwrap();
            Client {
                transport,
                control: Some((send, recv)),
                draft,
                pending: BytesMut::new(),
                streams: Vec::new(),
            }
        } else {
            Setup { options }.encode(draft, &mut setup).unwrap();
            let mut send = transport.open_uni().await.unwrap();
            send.write(setup.freeze()).await.unwrap();
            std::mem::forget(send);
            Client {
                transport,
                control: None,
                draft,
                pending: BytesMut::new(),
                streams: Vec::new(),
            }
        }
    }

    /// Wait for the relay's SERVER_SETUP (14-16) or SETUP stream (17 on): the session was
    /// admitted.
    pub async fn server_setup(&mut self) {
        match &mut self.control {
            Some((_, recv)) => loop {
                if let Some((msg, used)) = Control::peek(&self.pending, self.draft).unwrap() {
                    assert!(matches!(msg, Control::ServerSetup(_)), "{msg:?} first");
                    let _ = self.pending.split_to(used);
                    return;
                }
                let chunk = within(recv.read(4096))
                    .await
                    .unwrap()
                    .expect("SERVER_SETUP");
                self.pending.extend_from_slice(&chunk);
            },
            None => {
                within(self.transport.accept_uni()).await.unwrap();
            }
        }
    }

    /// Send one request's bytes where this draft sends requests.
    pub async fn request(&mut self, bytes: Bytes) {
        match &mut self.control {
            Some((send, _)) => send.write(bytes).await.unwrap(),
            None => {
                let (mut send, recv) = self.transport.open_bi().await.unwrap();
                send.write(bytes).await.unwrap();
                std::mem::forget(send);
                self.streams.push(recv);
            }
        }
    }

    pub async fn closes_with(mut self, bytes: Bytes, code: u32, case: &str) {
        self.server_setup().await;
        self.request(bytes).await;
        assert_eq!(
            closed_code(&self.transport).await,
            code,
            "{case} on {}",
            self.draft.name()
        );
    }
}
