//! Starting a session: the client's `Session::connect*` and the server's `Accepting` (read the
//! client's SETUP, let the caller decide, answer), for every lite version and the IETF drafts.

use starling_proto::{
    legacy, ProbeLevel, Protocol, Role, SessionCode, Setup, StreamCode, UniType, Version,
};
use starling_transport::{RecvStream, SendStream, Transport, TransportError};

use crate::budget::RecvBudget;
use crate::config::SessionConfig;
use crate::dispatch::SessionStream;
use crate::error::Error;
use crate::rank::Rank;
use crate::reader::Reader;
use crate::session::Session;
use crate::shared::PeerSetup;
use crate::violation::Violation;
use crate::writer::Writer;

/// What a client says in its SETUP beyond its hop.
#[derive(Clone, Debug, Default)]
pub struct ClientSetup {
    /// Request target for URI-less transports (`/path?jwt=…`).
    pub path: Option<String>,
    pub role: Option<Role>,
    pub cost: Option<u64>,
}

/// A server-side session whose client SETUP has arrived, waiting for the caller's decision.
pub struct Accepting<T: Transport> {
    transport: T,
    version: Version,
    setup: PeerSetup,
    /// lite-01/02: the legacy SETUP stream, kept open as the session stream, and what was
    /// read past the SETUP on it.
    session_stream: Option<SessionStream<T>>,
    /// An IETF draft's handshake so far.
    ietf: Option<crate::ietf::Handshake<T>>,
}

impl<T: Transport> Accepting<T> {
    /// Read the client's SETUP (docs/wire.md §3.2): it must come first, within the handshake timeout.
    pub async fn new(
        transport: T,
        version: Version,
        timeout: std::time::Duration,
    ) -> Result<Self, Error> {
        check_version(version)?;
        if version.negotiates_in_band() {
            return Err(Error::ProtocolViolation(Violation::InBandVersion));
        }
        if !version.has_setup_stream() {
            // lite-03/04: the ALPN was all; nothing to read.
            return Ok(Accepting {
                transport,
                version,
                setup: PeerSetup::assigned(),
                session_stream: None,
                ietf: None,
            });
        }
        let read = async {
            loop {
                let stream = transport.accept_uni().await?;
                let mut reader =
                    Reader::new(stream, version, &RecvBudget::new(64 << 10), Rank::Control);
                match reader.varint().await? {
                    Some(code) if code == UniType::Setup.code() => {
                        let setup = reader
                            .message::<Setup>(64 << 10)
                            .await?
                            .ok_or(Error::Decode(starling_proto::DecodeError::Truncated))?;
                        return Ok::<_, Error>(setup);
                    }
                    _ => reader.stop(StreamCode::Internal.to_code()),
                }
            }
        };
        let setup = handshake(&transport, timeout, read).await?;
        Ok(Accepting {
            transport,
            version,
            setup,
            session_stream: None,
            ietf: None,
        })
    }

    /// An IETF draft's handshake (docs/wire-ietf.md §3): read the client's CLIENT_SETUP
    /// (14-16) or SETUP stream (17 on) within `timeout`.
    pub async fn ietf(
        transport: T,
        draft: starling_proto::ietf::Draft,
        timeout: std::time::Duration,
    ) -> Result<Self, Error> {
        let handshake = crate::ietf::accept(&transport, draft, timeout).await?;
        Ok(Accepting {
            transport,
            version: Version::Lite06,
            setup: handshake.peer(),
            session_stream: None,
            ietf: Some(handshake),
        })
    }

    /// The legacy in-band negotiation (ALPN `moql`, or no protocol): read CLIENT_SETUP on the
    /// first bidi stream within `timeout`, choose the first version of the client's list among
    /// `served` that is negotiated in band (lite-02, lite-01), answer SERVER_SETUP and keep the
    /// stream as the session stream. No common version closes the session with
    /// VERSION_NEGOTIATION_FAILED; a malformed SETUP with PROTOCOL_VIOLATION.
    pub async fn legacy(
        transport: T,
        served: &[Version],
        timeout: std::time::Duration,
    ) -> Result<Self, Error> {
        let exchange = async {
            let (send, mut recv) = transport.accept_bi().await?;
            let (offer, rest) = read_legacy_setup(&mut recv, legacy::decode_client_setup).await?;
            let Some(version) = offer.choose(served) else {
                // Closed before the stream goes, so the client reads the reason, not a reset.
                transport.close(
                    SessionCode::VersionNegotiationFailed.to_code(),
                    "no common version",
                );
                return Err(Error::Version);
            };
            let mut out = bytes::BytesMut::new();
            legacy::encode_server_setup(
                &legacy::ServerSetup {
                    version: version.code(),
                    params: legacy::LegacyParams::default(),
                },
                &mut out,
            )?;
            let mut send = send;
            send.write(out.freeze()).await?;
            Ok::<_, Error>((version, send, recv, rest))
        };
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout("setup")),
        };
        match result {
            Ok((version, send, recv, rest)) => Ok(Accepting {
                transport,
                version,
                setup: PeerSetup::assigned(),
                session_stream: Some((send, recv, rest)),
                ietf: None,
            }),
            Err(err) => {
                transport.close(err.session_code().to_code(), "bad setup");
                Err(err)
            }
        }
    }

    pub fn setup(&self) -> &PeerSetup {
        &self.setup
    }

    /// The protocol the session speaks.
    pub fn protocol(&self) -> Protocol {
        match &self.ietf {
            Some(handshake) => Protocol::Ietf(handshake.draft),
            None => Protocol::Lite(self.version),
        }
    }

    /// Refuse the session with a session code.
    pub fn reject(self, code: SessionCode, reason: &str) {
        self.transport.close(code.to_code(), reason);
    }

    /// Send our SETUP (05+; the drafts' SERVER_SETUP or SETUP) and start serving.
    pub async fn start(self, config: SessionConfig) -> Result<Session<T>, Error> {
        if let Some(handshake) = self.ietf {
            let window = config.limits.ietf_request_window();
            let started =
                crate::ietf::start(&self.transport, handshake, config.hop, window).await?;
            return Ok(Session::run(
                self.transport,
                self.version,
                config,
                self.setup,
                None,
                Some(started),
            ));
        }
        if self.version.has_setup_stream() {
            let mut setup = Setup::new();
            setup.set_hop(Some(config.hop))?;
            advertise_probe(&self.transport, &mut setup);
            send_setup(&self.transport, self.version, &setup).await?;
        }
        Ok(Session::run(
            self.transport,
            self.version,
            config,
            self.setup,
            self.session_stream,
            None,
        ))
    }
}

/// Wait for the peer's SETUP within `timeout`; a bad or missing one closes the session with
/// its code (PROTOCOL_VIOLATION, CONTROL_TIMEOUT).
async fn handshake<T: Transport>(
    transport: &T,
    timeout: std::time::Duration,
    read: impl std::future::Future<Output = Result<Setup, Error>>,
) -> Result<PeerSetup, Error> {
    let result = match tokio::time::timeout(timeout, read).await {
        Ok(setup) => setup.and_then(|setup| PeerSetup::from_setup(&setup)),
        Err(_) => Err(Error::Timeout("setup")),
    };
    if let Err(err) = &result {
        transport.close(err.session_code().to_code(), "bad setup");
    }
    result
}

/// Read one legacy SETUP (`decode`) from `recv`: the message, and whatever followed it in the
/// same reads (SESSION_INFO, say), for the session stream to go on from.
async fn read_legacy_setup<R: RecvStream, M>(
    recv: &mut R,
    decode: fn(&mut bytes::BytesMut) -> Result<Option<M>, starling_proto::DecodeError>,
) -> Result<(M, bytes::BytesMut), Error> {
    let mut buf = bytes::BytesMut::new();
    loop {
        if let Some(setup) = decode(&mut buf)? {
            return Ok((setup, buf));
        }
        if buf.len() > 3 + legacy::MAX_SETUP_BODY {
            return Err(Error::ProtocolViolation(Violation::SetupTooLarge));
        }
        let chunk = recv
            .read(64 << 10)
            .await?
            .ok_or(Error::Decode(starling_proto::DecodeError::Truncated))?;
        buf.extend_from_slice(&chunk);
    }
}

/// How long a client whose legacy SETUP stream was reset waits for the session's close (and
/// its reason) to follow.
const CLOSE_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// We report PROBEs when the transport measures an RTT (docs/wire.md §4.1 Probe), whether
/// or not it has a sample yet.
fn advertise_probe<T: Transport>(transport: &T, setup: &mut Setup) {
    if transport.measures_rtt() {
        setup.set_probe(ProbeLevel::Report);
    }
}

fn check_version(version: Version) -> Result<(), Error> {
    if version.is_implemented() {
        Ok(())
    } else {
        Err(Error::Decode(starling_proto::DecodeError::Unsupported))
    }
}

async fn send_setup<T: Transport>(
    transport: &T,
    version: Version,
    setup: &Setup,
) -> Result<(), Error> {
    let stream = transport.open_uni().await?;
    let mut writer = Writer::new(stream, version);
    writer.queue_varint(UniType::Setup.code())?;
    writer.queue(setup)?;
    writer.flush().await?;
    writer.finish()
}

impl<T: Transport> Session<T> {
    /// Client side: send our SETUP, wait for the server's, start serving.
    pub async fn connect(
        transport: T,
        version: Version,
        client: ClientSetup,
        config: SessionConfig,
    ) -> Result<Self, Error> {
        check_version(version)?;
        if version.negotiates_in_band() {
            return Err(Error::ProtocolViolation(Violation::InBandVersion));
        }
        if !version.has_setup_stream() {
            // lite-03/04: the ALPN was all.
            return Ok(Session::run(
                transport,
                version,
                config,
                PeerSetup::assigned(),
                None,
                None,
            ));
        }
        let mut setup = Setup::new();
        setup.set_hop(Some(config.hop))?;
        setup.set_role(client.role);
        setup.set_path(client.path.as_deref().filter(|p| !p.is_empty()));
        if let Some(cost) = client.cost {
            setup.set_cost(Some(cost));
        }
        advertise_probe(&transport, &mut setup);
        send_setup(&transport, version, &setup).await?;
        let timeout = config.limits.handshake_timeout;
        let read = async {
            let stream = transport.accept_uni().await?;
            let mut reader =
                Reader::new(stream, version, &RecvBudget::new(64 << 10), Rank::Control);
            match reader.varint().await? {
                Some(code) if code == UniType::Setup.code() => reader
                    .message::<Setup>(64 << 10)
                    .await?
                    .ok_or(Error::Decode(starling_proto::DecodeError::Truncated)),
                _ => Err(Error::ProtocolViolation(Violation::ServerStreamNotSetup)),
            }
        };
        let server = handshake(&transport, timeout, read).await?;
        Ok(Session::run(transport, version, config, server, None, None))
    }

    /// Client side of an IETF draft: our SETUP (and on 14-16 the server's SERVER_SETUP),
    /// then serving (docs/wire-ietf.md §3.2, §3.3).
    pub async fn connect_ietf(
        transport: T,
        draft: starling_proto::ietf::Draft,
        client: ClientSetup,
        config: SessionConfig,
    ) -> Result<Self, Error> {
        let started = crate::ietf::connect(
            &transport,
            draft,
            client.path.as_deref(),
            client.cost,
            config.hop,
            config.limits.ietf_request_window(),
            config.limits.handshake_timeout,
        )
        .await?;
        let peer = started
            .state
            .peer()
            .map(|options| crate::ietf::peer_of(&options))
            .unwrap_or_else(PeerSetup::assigned);
        Ok(Session::run(
            transport,
            Version::Lite06,
            config,
            peer,
            None,
            Some(started),
        ))
    }

    /// Client side, by the protocol the transport agreed: a version's own ALPN names it (SETUP
    /// follows from lite-05); `moql`, or no protocol (`""`), runs the legacy negotiation
    /// offering those of `versions` that are chosen in band.
    pub async fn connect_negotiated(
        transport: T,
        protocol: &str,
        versions: &[Version],
        client: ClientSetup,
        config: SessionConfig,
    ) -> Result<Self, Error> {
        if protocol.is_empty() || protocol == starling_proto::LEGACY_ALPN {
            return Self::connect_legacy(transport, versions, config).await;
        }
        if let Some(draft) = starling_proto::ietf::Draft::from_alpn(protocol) {
            return Self::connect_ietf(transport, draft, client, config).await;
        }
        let version = Version::from_alpn(protocol).ok_or(Error::Version)?;
        Self::connect(transport, version, client, config).await
    }

    /// Client side of the legacy in-band negotiation (ALPN `moql`, or no protocol): offer
    /// `versions` (those negotiated in band, in this order) in CLIENT_SETUP on the first bidi
    /// stream, read SERVER_SETUP, and start on the version chosen, the stream kept as the
    /// session stream.
    pub async fn connect_legacy(
        transport: T,
        versions: &[Version],
        config: SessionConfig,
    ) -> Result<Self, Error> {
        let offered: Vec<Version> = versions
            .iter()
            .copied()
            .filter(|v| v.negotiates_in_band() && v.is_implemented())
            .collect();
        if offered.is_empty() {
            return Err(Error::Version);
        }
        let timeout = config.limits.handshake_timeout;
        let exchange = async {
            let (mut send, mut recv) = transport.open_bi().await?;
            let mut out = bytes::BytesMut::new();
            legacy::encode_client_setup(
                &legacy::ClientSetup::offering(&offered, "starling"),
                &mut out,
            )?;
            send.write(out.freeze()).await?;
            let (answer, rest) = read_legacy_setup(&mut recv, legacy::decode_server_setup).await?;
            let version = offered
                .iter()
                .copied()
                .find(|v| v.code() == answer.version)
                .ok_or(Error::Version)?;
            Ok::<_, Error>((version, send, recv, rest))
        };
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout("setup")),
        };
        match result {
            Ok((version, send, recv, rest)) => Ok(Session::run(
                transport,
                version,
                config,
                PeerSetup::assigned(),
                Some((send, recv, rest)),
                None,
            )),
            Err(Error::Transport(TransportError::Reset(_))) => {
                // A server refusing closes the session, which may reach us after the reset of
                // the SETUP stream: the close and its reason are what happened.
                let closed = tokio::time::timeout(CLOSE_SETTLE, transport.closed()).await;
                let err = match closed {
                    Ok(closed @ TransportError::ClosedByPeer { .. }) => Error::Transport(closed),
                    _ => Error::ProtocolViolation(Violation::SetupStreamReset),
                };
                transport.close(err.session_code().to_code(), "bad setup");
                Err(err)
            }
            Err(err) => {
                transport.close(err.session_code().to_code(), "bad setup");
                Err(err)
            }
        }
    }
}
