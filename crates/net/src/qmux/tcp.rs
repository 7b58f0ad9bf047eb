//! Accepting QMux over plain TCP: qmux-01 records, the moq ALPN negotiated in-band through
//! `application_protocols` with the server's preference winning (docs/wire.md §1.5).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use starling_qmux::{Config, Framing, Side, WireVersion};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;

use super::carrier::ByteCarrier;
use super::server::{QmuxAccepted, QmuxBinding};
use crate::admission::Admission;
use crate::window::ReceiveWindows;

/// How long a TCP client has to send its transport parameters.
pub const TCP_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// moq-tokio's TCP wire version.
const TCP_WIRE: WireVersion = WireVersion::Qmux01;
const ACCEPT_BACKLOG: usize = 64;

/// A plaintext QMux TCP listener. There is no TLS: bind it to loopback or a trusted network.
pub struct QmuxTcpListener {
    local: SocketAddr,
    accepted: Mutex<mpsc::Receiver<QmuxAccepted>>,
    task: JoinHandle<()>,
}

impl QmuxTcpListener {
    /// Listen on `addr`, serving these moq ALPNs (most preferred first); connections the
    /// admission gate refuses are closed at once; `windows` replaces moq-tokio's.
    pub async fn bind<S: AsRef<str>>(
        addr: SocketAddr,
        alpns: &[S],
        admission: Option<Arc<Admission>>,
        windows: Option<ReceiveWindows>,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Self::from_listener(listener, alpns, admission, windows))
    }

    /// Serve on an already bound listener.
    pub fn from_listener<S: AsRef<str>>(
        listener: TcpListener,
        alpns: &[S],
        admission: Option<Arc<Admission>>,
        windows: Option<ReceiveWindows>,
    ) -> Self {
        let local = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let alpns: Arc<Vec<String>> =
            Arc::new(alpns.iter().map(|a| a.as_ref().to_owned()).collect());
        let (tx, rx) = mpsc::channel(ACCEPT_BACKLOG);
        let task = tokio::spawn(accept_loop(listener, alpns, admission, windows, tx));
        Self {
            local,
            accepted: Mutex::new(rx),
            task,
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next established session (transport parameters exchanged); `None` once the
    /// listener failed.
    pub async fn accept(&self) -> Option<QmuxAccepted> {
        self.accepted.lock().await.recv().await
    }
}

impl Drop for QmuxTcpListener {
    fn drop(&mut self) {
        // Sessions already handed out stay up; only accepting stops.
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    alpns: Arc<Vec<String>>,
    admission: Option<Arc<Admission>>,
    windows: Option<ReceiveWindows>,
    tx: mpsc::Sender<QmuxAccepted>,
) {
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::debug!(%err, "TCP accept failed");
                    continue;
                }
            },
            _ = tx.closed() => return,
        };
        let ticket = match &admission {
            Some(gate) => match gate.admit(remote.ip().to_canonical(), Instant::now()) {
                Ok(ticket) => Some(ticket),
                Err(refusal) => {
                    tracing::debug!(%remote, reason = refusal.as_str(), "QMux TCP connection refused");
                    continue; // dropping the stream closes it
                }
            },
            None => None,
        };
        let _ = stream.set_nodelay(true);
        let alpns = alpns.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut config = Config::moq_tokio(TCP_WIRE, Framing::ByteStream, Side::Server)
                .with_application_protocols(&alpns);
            if let Some(windows) = windows {
                windows.apply_qmux(&mut config);
            }
            let transport = super::start(config, ByteCarrier::new(stream), None);
            match tokio::time::timeout(TCP_HANDSHAKE_TIMEOUT, transport.established()).await {
                Ok(Ok(())) => {
                    let accepted = QmuxAccepted {
                        protocol: transport.protocol(),
                        transport,
                        binding: QmuxBinding::Tcp,
                        wire: TCP_WIRE,
                        path: None,
                        remote: Some(SocketAddr::new(remote.ip().to_canonical(), remote.port())),
                        server_name: None,
                        ticket,
                    };
                    let _ = tx.send(accepted).await;
                }
                Ok(Err(err)) => tracing::debug!(%remote, %err, "QMux TCP handshake failed"),
                Err(_) => tracing::debug!(%remote, "QMux TCP handshake timed out"),
            }
        });
    }
}
