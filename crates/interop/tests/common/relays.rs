//! Relays for the interop cases: Starling in process, moq-relay 0.17.10 as a child process, and the ports they take.

use super::*;

/// An in-process Starling relay on 127.0.0.1, stopped on drop.
pub struct StarlingRelay {
    pub addr: SocketAddr,
    pub fingerprint: String,
    sessions: starling_relay::SessionRegistry,
    task: tokio::task::JoinHandle<()>,
}

impl StarlingRelay {
    pub async fn start<P: Into<Protocol>>(versions: Vec<P>) -> anyhow::Result<Self> {
        Self::start_with(versions, |_| {}).await
    }

    /// Like [`StarlingRelay::start`], adjusting the configuration first (cluster peers, say).
    pub async fn start_with<P: Into<Protocol>>(
        versions: Vec<P>,
        configure: impl FnOnce(&mut RelayConfig),
    ) -> anyhow::Result<Self> {
        let mut config = RelayConfig {
            bind: "127.0.0.1:0".parse()?,
            tls: TlsSource::Generate(vec!["localhost".into()]),
            versions: versions.into_iter().map(Into::into).collect(),
            ..Default::default()
        };
        configure(&mut config);
        let relay = Relay::bind(config)
            .await
            .context("binding the Starling relay")?;
        let addr = relay.local_addr()?;
        let fingerprint = relay.fingerprint().to_string();
        let sessions = relay.sessions().clone();
        let task = tokio::spawn(async move {
            if let Err(err) = relay.run().await {
                tracing::error!(%err, "Starling relay stopped");
            }
        });
        Ok(StarlingRelay {
            addr,
            fingerprint,
            sessions,
            task,
        })
    }

    pub fn url(&self, case: Case) -> Url {
        case.url(self.addr.port())
    }

    /// Wait (up to 10 s) until the relay holds at least `count` sessions: a peer's link it
    /// accepted, say, before a test publishes through it.
    pub async fn sessions_at_least(&self, count: usize) -> anyhow::Result<()> {
        tokio::time::timeout(Duration::from_secs(10), async {
            while self.sessions.len() < count {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "the Starling relay held {} sessions after 10 s, not {count}",
                self.sessions.len()
            )
        })
    }
}

impl Drop for StarlingRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The moq-relay 0.17.10 binary: `$STARLING_MOQ_RELAY`, else the install-peers.sh location.
pub fn moq_relay_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("STARLING_MOQ_RELAY").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".cache/starling/moq-relay-0.17.10/bin/moq-relay")
}

/// Where moq-relay ports are picked: below Linux's ephemeral range (32768 and up), so the
/// ports the system hands to other tests' sockets (`:0` binds) cannot take one between the
/// pick and moq-relay's bind.
const MOQ_RELAY_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A port free on 127.0.0.1 for both UDP and TCP (as moq-relay binds both on it).
pub fn free_port() -> anyhow::Result<u16> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    for _ in 0..200 {
        let port = rng.gen_range(MOQ_RELAY_PORTS);
        let Ok(_udp) = UdpSocket::bind(("127.0.0.1", port)) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no port free for both UDP and TCP on 127.0.0.1")
}

/// Whether moq-relay's log says it bound both listeners on `port` (so whatever answers there
/// is this moq-relay, not another process that took the port first).
fn moq_relay_listening(log: &std::path::Path, port: u16) -> bool {
    let raw = std::fs::read_to_string(log).unwrap_or_default();
    // The log is coloured: drop the ANSI escapes (ESC '[' … 'm') before matching.
    let mut text = String::with_capacity(raw.len());
    let mut escaped = false;
    for c in raw.chars() {
        match (escaped, c) {
            (false, '\u{1b}') => escaped = true,
            (true, 'm') => escaped = false,
            (true, _) => {}
            (false, c) => text.push(c),
        }
    }
    let addr = format!("addr=127.0.0.1:{port}");
    let bound = |kind: &str| {
        text.lines()
            .any(|line| line.contains("listening") && line.contains(&addr) && line.contains(kind))
    };
    bound("kind=\"quic\"") && bound("kind=\"http\"")
}

/// `GET /certificate.sha256` over plain HTTP/1.0; the body when the answer is 200.
async fn fetch_fingerprint(port: u16) -> Option<String> {
    // Bounded: a port that accepts and then says nothing must not hold the readiness loop.
    tokio::time::timeout(Duration::from_secs(2), fetch_fingerprint_once(port))
        .await
        .ok()
        .flatten()
}

async fn fetch_fingerprint_once(port: u16) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    stream
        .write_all(
            b"GET /certificate.sha256 HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .await
        .ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let text = String::from_utf8(response).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return None;
    }
    let body = body.trim();
    (body.len() == 64 && body.bytes().all(|b| b.is_ascii_hexdigit())).then(|| body.to_string())
}

/// moq-relay 0.17.10 as a child process on 127.0.0.1, killed on drop.
pub struct MoqRelay {
    pub port: u16,
    pub fingerprint: String,
    pub log: PathBuf,
    child: tokio::process::Child,
}

impl MoqRelay {
    /// Start moq-relay serving only `version` (raw QUIC and WebTransport on one UDP port, the
    /// HTTP listener on the same TCP port) and wait until its certificate endpoint answers.
    pub async fn start(version: Protocol) -> anyhow::Result<Self> {
        Self::start_with(version, &[]).await
    }

    /// Like [`MoqRelay::start`], with more command-line arguments (cluster flags, say).
    pub async fn start_with(version: Protocol, extra: &[String]) -> anyhow::Result<Self> {
        let binary = moq_relay_binary();
        if !binary.is_file() {
            panic!(
                "moq-relay 0.17.10 not found at {}: run scripts/install-peers.sh \
                 (or set STARLING_MOQ_RELAY to the binary)",
                binary.display()
            );
        }
        let mut last_err = None;
        for _ in 0..3 {
            match Self::try_start(&binary, version, extra).await {
                Ok(relay) => return Ok(relay),
                Err(err) => last_err = Some(err),
            }
        }
        Err(last_err.expect("at least one attempt"))
    }

    async fn try_start(
        binary: &std::path::Path,
        version: Protocol,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let addr = format!("127.0.0.1:{port}");
        let log = std::env::temp_dir().join(format!(
            "starling-interop-moq-relay-{}-{port}.log",
            std::process::id()
        ));
        let log_file = std::fs::File::create(&log)?;
        // lite-07-wip is opt-in on both sides: its cluster dials offer it only when named.
        let connect: &[&str] = if version == Protocol::Lite(Version::Lite07Wip) {
            &["--connect-version", "moq-lite-07-wip"]
        } else {
            &[]
        };
        let mut child = tokio::process::Command::new(binary)
            .args(["--listen", &addr])
            .args(["--listen-tls-generate", "localhost"])
            .args(["--listen-version", version.name()])
            .args(connect)
            .args(["--web-http-listen", &addr])
            .args(["--auth-public", "**"])
            .args(["--log-level", "info"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning {}", binary.display()))?;
        // Readiness: poll the certificate endpoint, a bounded number of times.
        for _ in 0..400 {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "moq-relay exited with {status} before it was ready; log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if !moq_relay_listening(&log, port) {
                tokio::time::sleep(Duration::from_millis(25)).await;
                continue;
            }
            if let Some(fingerprint) = fetch_fingerprint(port).await {
                return Ok(MoqRelay {
                    port,
                    fingerprint,
                    log,
                    child,
                });
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let _ = child.start_kill();
        bail!(
            "moq-relay on {addr} never served /certificate.sha256; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    }

    pub fn url(&self, case: Case) -> Url {
        case.url(self.port)
    }

    /// The relay's log so far (for failure messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for MoqRelay {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_file(&self.log);
    }
}
