//! Starting an IETF session (docs/wire-ietf.md §3.2-§3.4): CLIENT_SETUP and SERVER_SETUP on
//! the control stream the client opens (drafts 14-16; draft 14 with versions in them), or a
//! SETUP on a uni stream each side opens and keeps for its GOAWAY (17 on).
//!
//! Starling declares what moq-relay does: its implementation, MAX_REQUEST_ID (14-16), MoQ
//! Solicit (advertise to it only in answer to its SUBSCRIBE_NAMESPACE, which it sends for
//! every prefix it listens on), HIDDEN, and its hop id (MoQ Cluster, 17 on). A peer that
//! knows nothing of Solicit still advertises unasked, and that is accepted too.

use std::time::Duration;

use bytes::BytesMut;
use starling_proto::ietf::{
    AuthToken, ClientSetup, Control, Draft, ServerSetup, Setup, SetupOptions, TokenError,
};
use starling_transport::Transport;

use super::request::{control_writer, read_control};
use crate::budget::RecvBudget;
use crate::error::Error;
use crate::rank::Rank;
use crate::reader::Reader;
use crate::shared::ietf::Ietf;
use crate::shared::ietf::State;
use crate::shared::PeerSetup;
use crate::violation::Violation;

/// What Starling calls itself in SETUP.
const IMPLEMENTATION: &[u8] = b"starling";

/// The largest SETUP read (its length is 16 bits).
const MAX_SETUP: usize = 64 << 10;

/// A server-side handshake read so far: the client's SETUP and the stream it came on.
pub(crate) struct Handshake<T: Transport> {
    pub draft: Draft,
    pub options: SetupOptions,
    /// 14-16: the control stream's send side.
    control: Option<T::Send>,
    /// The control stream (14-16) or the client's SETUP stream (17 on), and what followed
    /// the SETUP on it.
    recv: (T::Recv, BytesMut),
}

impl<T: Transport> Handshake<T> {
    /// What the session layer keeps of the peer's SETUP.
    pub fn peer(&self) -> PeerSetup {
        let mut peer = peer_of(&self.options);
        peer.token = token_of(&self.options, self.draft).ok().flatten();
        peer
    }
}

/// The SETUP's AUTHORIZATION_TOKEN value, if it carries one: an alias before any could be
/// registered is a protocol violation, a structure that does not parse a
/// KEY_VALUE_FORMATTING_ERROR (docs/wire-ietf.md §3.4).
fn token_of(options: &SetupOptions, draft: Draft) -> Result<Option<String>, Error> {
    let Some(bytes) = &options.authorization_token else {
        return Ok(None);
    };
    match AuthToken::decode(bytes, draft) {
        Ok(token) => Ok(String::from_utf8(token.value).ok()),
        Err(TokenError::Alias) => Err(Error::ProtocolViolation(Violation::TokenAliasBeforeSetup)),
        Err(TokenError::Malformed) => Err(Error::ProtocolViolation(Violation::MalformedToken)),
    }
}

/// What a SETUP says, as the session layer keeps it: a peer with no hop id gets a random
/// one for split horizon, as on lite-03/04.
pub(crate) fn peer_of(options: &SetupOptions) -> PeerSetup {
    PeerSetup {
        hop: options
            .hop_id
            .filter(|h| *h != 0)
            .unwrap_or_else(crate::config::random_hop),
        role: None,
        path: options
            .path
            .as_ref()
            .and_then(|p| String::from_utf8(p.clone()).ok()),
        cost: options.relay_cost,
        probe: starling_proto::ProbeLevel::default(),
        token: None,
    }
}

fn handshake_budget() -> RecvBudget {
    RecvBudget::new(2 * MAX_SETUP)
}

/// Read the client's SETUP (docs/wire-ietf.md §3.2, §3.3) within `timeout`; a bad one closes
/// the session (PROTOCOL_VIOLATION; draft 14 offering no draft 14: VERSION_NEGOTIATION_FAILED).
pub(crate) async fn accept<T: Transport>(
    transport: &T,
    draft: Draft,
    timeout: Duration,
) -> Result<Handshake<T>, Error> {
    let budget = handshake_budget();
    let read = async {
        if draft.has_control_stream() {
            let (send, recv) = transport.accept_bi().await?;
            let mut reader = Reader::new(
                recv,
                starling_proto::Version::Lite06,
                &budget,
                Rank::Control,
            );
            let Some(Control::ClientSetup(setup)) =
                read_control(&mut reader, draft, MAX_SETUP).await?
            else {
                return Err(Error::ProtocolViolation(
                    Violation::ControlStreamWithoutClientSetup,
                ));
            };
            if draft.has_inline_fields() && !setup.versions.contains(&draft.code()) {
                return Err(Error::Version);
            }
            token_of(&setup.options, draft)?;
            Ok(Handshake {
                draft,
                options: setup.options,
                control: Some(send),
                recv: reader.into_parts(),
            })
        } else {
            let recv = transport.accept_uni().await?;
            let mut reader = Reader::new(
                recv,
                starling_proto::Version::Lite06,
                &budget,
                Rank::Control,
            );
            let Some(Control::Setup(setup)) = read_control(&mut reader, draft, MAX_SETUP).await?
            else {
                return Err(Error::ProtocolViolation(Violation::FirstStreamNotSetup));
            };
            token_of(&setup.options, draft)?;
            Ok(Handshake {
                draft,
                options: setup.options,
                control: None,
                recv: reader.into_parts(),
            })
        }
    };
    let result = match tokio::time::timeout(timeout, read).await {
        Ok(result) => result,
        Err(_) => Err(Error::Timeout("setup")),
    };
    if let Err(err) = &result {
        transport.close(err.session_code().to_code(), "bad setup");
    }
    result
}

/// What Starling declares: MAX_REQUEST_ID on 14-16, its hop on 17 on, SOLICIT and HIDDEN
/// everywhere.
fn our_options(draft: Draft, grant: u64, hop: u64) -> SetupOptions {
    SetupOptions {
        implementation: Some(IMPLEMENTATION.to_vec()),
        max_request_id: draft.has_control_stream().then_some(grant),
        hop_id: draft.has_cluster().then_some(hop),
        solicit: Some(1),
        hidden: Some(1),
        ..SetupOptions::default()
    }
}

/// What a started IETF session hands the session layer: its state, and the stream to go on
/// reading (the control stream, or the peer's SETUP stream for its GOAWAY).
pub(crate) struct Started<T: Transport> {
    pub state: State<T>,
    pub recv: Option<(T::Recv, BytesMut)>,
}

/// Answer the client's SETUP (server side) and hand over.
pub(crate) async fn start<T: Transport>(
    transport: &T,
    handshake: Handshake<T>,
    hop: u64,
    window: usize,
) -> Result<Started<T>, Error> {
    let draft = handshake.draft;
    let mut state = State::new(draft, true, Some(handshake.options), window);
    let options = our_options(draft, state.initial_grant(), hop);
    let mut writer = match handshake.control {
        Some(send) => {
            let mut writer = control_writer(send);
            Control::ServerSetup(ServerSetup {
                version: draft.has_inline_fields().then(|| draft.code()),
                options,
            })
            .encode(draft, writer.queued())?;
            writer
        }
        None => {
            let mut writer = control_writer(transport.open_uni().await?);
            Setup { options }.encode(draft, writer.queued())?;
            writer
        }
    };
    writer.flush().await?;
    *state.control.get_mut() = Some(writer);
    Ok(Started {
        state,
        recv: Some(handshake.recv),
    })
}

/// Client side: send our SETUP; on 14-16 wait for SERVER_SETUP (on 17 on the server's SETUP
/// stream arrives like any other, and requests wait for it where they must).
pub(crate) async fn connect<T: Transport>(
    transport: &T,
    draft: Draft,
    path: Option<&str>,
    cost: Option<u64>,
    hop: u64,
    window: usize,
    timeout: Duration,
) -> Result<Started<T>, Error> {
    let mut state = State::new(draft, false, None, window);
    let mut options = our_options(draft, state.initial_grant(), hop);
    options.path = path
        .filter(|p| !p.is_empty())
        .map(|p| p.as_bytes().to_vec());
    if draft.has_cluster() {
        options.relay_cost = cost;
    }
    let exchange = async {
        if draft.has_control_stream() {
            let (send, recv) = transport.open_bi().await?;
            let mut writer = control_writer(send);
            Control::ClientSetup(ClientSetup {
                versions: if draft.has_inline_fields() {
                    vec![draft.code()]
                } else {
                    Vec::new()
                },
                options,
            })
            .encode(draft, writer.queued())?;
            writer.flush().await?;
            let budget = handshake_budget();
            let mut reader = Reader::new(
                recv,
                starling_proto::Version::Lite06,
                &budget,
                Rank::Control,
            );
            let Some(Control::ServerSetup(server)) =
                read_control(&mut reader, draft, MAX_SETUP).await?
            else {
                return Err(Error::ProtocolViolation(
                    Violation::ControlStreamWithoutServerSetup,
                ));
            };
            if draft.has_inline_fields() && server.version != Some(draft.code()) {
                return Err(Error::Version);
            }
            let max = server.options.max_request_id;
            state.set_peer(server.options)?;
            if let Some(max) = max {
                state.raise_peer_max(max)?;
            }
            Ok::<_, Error>((writer, Some(reader.into_parts())))
        } else {
            let mut writer = control_writer(transport.open_uni().await?);
            Setup { options }.encode(draft, writer.queued())?;
            writer.flush().await?;
            Ok((writer, None))
        }
    };
    let result = match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(Error::Timeout("setup")),
    };
    match result {
        Ok((writer, recv)) => {
            *state.control.get_mut() = Some(writer);
            Ok(Started { state, recv })
        }
        Err(err) => {
            transport.close(err.session_code().to_code(), "bad setup");
            Err(err)
        }
    }
}

/// The peer's SETUP stream arrived in the session (17 on): a client learns the server's
/// SETUP from it; a second SETUP is a protocol violation. Then its GOAWAY is read.
pub(crate) async fn peer_setup_stream<T: Transport>(
    shared: &Ietf<T>,
    mut reader: Reader<T::Recv>,
) -> Result<(), Error> {
    let state = shared.state();
    let max = shared.config.limits.max_control_message.max(MAX_SETUP);
    let Some(Control::Setup(setup)) = read_control(&mut reader, state.draft, max).await? else {
        return Err(Error::ProtocolViolation(Violation::SetupStreamWithoutSetup));
    };
    state.set_peer(setup.options)?;
    setup_stream_tail(shared, reader).await
}

/// After the SETUP on the peer's SETUP stream (17 on): one GOAWAY, and whatever follows it
/// is ignored. Anything else first breaks the protocol for a server; a client stops reading.
pub(crate) async fn setup_stream_tail<T: Transport>(
    shared: &Ietf<T>,
    mut reader: Reader<T::Recv>,
) -> Result<(), Error> {
    let state = shared.state();
    let max = shared.config.limits.max_control_message;
    match read_control(&mut reader, state.draft, max).await {
        Ok(Some(Control::Goaway(goaway))) => shared.goaway_arrived(goaway.uri)?,
        Ok(None) | Err(Error::Transport(_)) => return Ok(()),
        Ok(Some(_)) if state.server => {
            return Err(Error::ProtocolViolation(Violation::SetupStreamNotGoaway))
        }
        Ok(Some(_)) => {
            reader.stop(starling_proto::StreamCode::Cancelled.to_code());
            return Ok(());
        }
        Err(err) => return Err(err),
    }
    // Anything after GOAWAY is read and dropped.
    while let Ok(Some(_)) = read_control(&mut reader, state.draft, max).await {}
    Ok(())
}

/// Our GOAWAY: on the control stream (14-16) or after our SETUP on its stream (17 on).
pub(crate) async fn send_goaway<T: Transport>(shared: &Ietf<T>, uri: &str) -> Result<(), Error> {
    let state = shared.state();
    let mut control = state.control.lock().await;
    let writer = control.as_mut().ok_or(Error::Closed)?;
    Control::Goaway(starling_proto::ietf::reply::Goaway {
        uri: uri.to_string(),
        timeout: 0,
    })
    .encode(state.draft, writer.queued())?;
    writer.flush().await
}
