//! Starling's network I/O drivers: raw QUIC and WebTransport sessions, TLS material, and the HTTP side.
//!
//! This crate moves bytes and nothing else: no moq-lite framing lives here. A session
//! is exposed as [`QuicTransport`], which implements [`starling_transport::Transport`];
//! the stream codes passed to `reset`/`stop` and the session codes passed to `close` are
//! moq-lite codes, mapped onto the wire as docs/wire.md §7.3 prescribes for each binding.

pub mod admission;
pub mod alpn;
mod any;
pub mod cid;
pub mod client;
mod codes;
mod credit;
pub mod dial;
pub mod host;
pub mod http;
pub mod http_server;
pub mod overload;
pub mod qmux;
pub mod quic;
mod quic_shared;
pub mod server;
pub mod setup;
mod stream;
pub mod tls;
mod transport;
mod verify;
mod window;

pub use admission::{Admission, AdmissionLimits, Refusal, Ticket};
pub use alpn::{Binding, DEFAULT_ALPNS, H3, MOQ_LITE_05, MOQ_LITE_06};
pub use any::{AnyRecv, AnySend, AnyTransport};
pub use client::{setup_path, Client, ClientConfig, ClientError, Connected, TlsVerify};
pub use credit::StreamLimits;
pub use dial::{DialConfig, DialError, Dialed, Dialer};
pub use http::{certificate_router, serve_http, serve_http_until};
pub use http_server::{serve_bounded, HttpCounters, HttpLimits};
pub use qmux::{QmuxAccepted, QmuxBinding, QmuxTransport};
pub use quic::QuicConfig;
pub use server::{Accepted, Server, ServerConfig, ServerError};
pub use stream::{QuicRecvStream, QuicSendStream};
pub use tls::{ClientCertificate, TlsCertificate, TlsError};
pub use transport::QuicTransport;
pub use verify::load_roots;
pub use window::ReceiveWindows;
