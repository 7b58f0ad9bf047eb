//! One request of an IETF session, whichever way its draft carries it (docs/wire-ietf.md
//! §4.2): its own bidi stream from draft 17, or a virtual stream on the shared control
//! stream of drafts 14-16, fed by the control-stream reader (`control.rs`). The publisher and
//! subscriber halves talk to a [`Request`] and never ask which.

use starling_proto::ietf::Control;
use starling_proto::Path;
use starling_transport::{Transport, TransportError};
use tokio::sync::mpsc;

use crate::error::Error;
use crate::rank::Rank;
use crate::reader::Reader;
use crate::shared::ietf::Ietf;
use crate::shared::ietf::Route;
use crate::writer::Writer;

/// Messages queued for one request on the control stream before its handler reads them; a
/// peer that sends more without waiting for answers breaks the session's bound.
pub(crate) const ROUTE_QUEUE: usize = 16;

enum Io<T: Transport> {
    /// Draft 17 on: the request's own stream.
    Stream {
        reader: Reader<T::Recv>,
        writer: Writer<T::Send>,
        /// The peer's FIN arrived: only a STOP_SENDING can follow.
        fin: bool,
    },
    /// Drafts 14-16: what the control stream routed to this request id.
    Mux { rx: mpsc::Receiver<Control> },
}

pub(crate) struct Request<T: Transport> {
    shared: Ietf<T>,
    pub id: u64,
    io: Io<T>,
}

/// A writer for a control, SETUP or request stream: they go before data, as moq-net sends
/// them. (An IETF session's writers take lite-06's version, which only their varints would
/// use; the drafts' messages are encoded into `queued()`.)
pub(crate) fn control_writer<S: starling_transport::SendStream>(stream: S) -> Writer<S> {
    let mut writer = Writer::new(stream, starling_proto::Version::Lite06);
    writer.set_priority(i32::MAX);
    writer
}

/// Read one control message from a stream, at most `max` bytes of body.
pub(crate) async fn read_control<R: starling_transport::RecvStream>(
    reader: &mut Reader<R>,
    draft: starling_proto::ietf::Draft,
    max: usize,
) -> Result<Option<Control>, Error> {
    reader
        .unit(|buf| {
            Ok(
                Control::peek_with_limit(buf, draft, max)?.map(|(msg, used)| {
                    let _ = buf.split_to(used);
                    msg
                }),
            )
        })
        .await
}

impl<T: Transport> Request<T> {
    /// A request the peer opened on its own stream (17 on).
    pub fn stream(
        shared: Ietf<T>,
        id: u64,
        reader: Reader<T::Recv>,
        writer: Writer<T::Send>,
    ) -> Self {
        Request {
            shared,
            id,
            io: Io::Stream {
                reader,
                writer,
                fin: false,
            },
        }
    }

    /// A request on the control stream (14-16), fed through `rx`.
    pub fn mux(shared: Ietf<T>, id: u64, rx: mpsc::Receiver<Control>) -> Self {
        Request {
            shared,
            id,
            io: Io::Mux { rx },
        }
    }

    /// Open a request of ours: a request id, then `build(id)` on a stream of its own (17 on)
    /// or on the control stream (14-16). `namespace` names a PUBLISH_NAMESPACE for the
    /// withdrawals of 14 and 15, which name it.
    pub async fn open(
        shared: &Ietf<T>,
        namespace: Option<Path>,
        build: impl FnOnce(u64) -> Control,
    ) -> Result<Self, Error> {
        let state = shared.state();
        let limits = &shared.config.limits;
        let id = state.allocate(limits.request_timeout).await?;
        let msg = build(id);
        // Draft 16 gives SUBSCRIBE_NAMESPACE a stream of its own.
        let own_stream = !state.draft.has_control_stream()
            || (state.draft.has_namespace_messages()
                && matches!(msg, Control::SubscribeNamespace(_)));
        if !own_stream {
            let (tx, rx) = mpsc::channel(ROUTE_QUEUE);
            state.routes.lock().insert(
                id,
                Route {
                    tx,
                    namespace,
                    ours: true,
                },
            );
            let mut request = Request::mux(shared.clone(), id, rx);
            request.send(&msg).await?;
            Ok(request)
        } else {
            let (send, recv) = shared.transport.open_bi().await?;
            let reader = Reader::new(recv, shared.version, &shared.budget, Rank::Control);
            let mut request = Request::stream(shared.clone(), id, reader, control_writer(send));
            request.send(&msg).await?;
            Ok(request)
        }
    }

    pub fn draft(&self) -> Result<starling_proto::ietf::Draft, Error> {
        Ok(self.shared.state().draft)
    }

    /// The next message on the request; `None` once at the requester's FIN (17 on; later
    /// calls wait for a STOP_SENDING) or once the request was closed on the control stream
    /// (14-16). A STOP_SENDING on our side is `Err(Transport(Stopped))`.
    pub async fn recv(&mut self) -> Result<Option<Control>, Error> {
        let draft = self.shared.state().draft;
        let max = self.shared.config.limits.max_control_message;
        match &mut self.io {
            Io::Stream {
                reader,
                writer,
                fin,
            } => {
                let stopped = async {
                    match writer.stopped().await {
                        Some(code) => Error::Transport(TransportError::Stopped(code)),
                        None => std::future::pending().await,
                    }
                };
                if *fin {
                    return Err(stopped.await);
                }
                // What the peer sent before it stopped our side comes first.
                tokio::select! {
                    biased;
                    msg = read_control(reader, draft, max) => {
                        if matches!(msg, Ok(None)) {
                            *fin = true;
                        }
                        msg
                    }
                    err = stopped => Err(err),
                }
            }
            Io::Mux { rx } => Ok(rx.recv().await),
        }
    }

    /// The next message on a request we made. Like [`Request::recv`], except that a stop may
    /// have overtaken the peer's last word: a refuser writes REQUEST_ERROR, a publisher
    /// PUBLISH_DONE, and drops the stream, and the stop can arrive first (a lost packet, a
    /// slower stream). A stop then waits, within the request timeout, for that message or the
    /// stream's end.
    pub async fn reply(&mut self) -> Result<Option<Control>, Error> {
        let stop = match self.recv().await {
            Err(stop @ Error::Transport(TransportError::Stopped(_))) => stop,
            other => return other,
        };
        let Io::Stream { reader, fin, .. } = &mut self.io else {
            return Err(stop);
        };
        let draft = self.shared.state().draft;
        let limits = &self.shared.config.limits;
        let read = read_control(reader, draft, limits.max_control_message);
        match tokio::time::timeout(limits.request_timeout, read).await {
            Ok(Ok(Some(msg))) => Ok(Some(msg)),
            _ => {
                *fin = true;
                Err(stop)
            }
        }
    }

    /// Send one message on the request.
    pub async fn send(&mut self, msg: &Control) -> Result<(), Error> {
        let state = self.shared.state();
        tracing::trace!(id = self.id, ?msg, "IETF request message out");
        match &mut self.io {
            Io::Stream { writer, .. } => {
                msg.encode(state.draft, writer.queued())?;
                writer.flush().await
            }
            Io::Mux { .. } => {
                let mut control = state.control.lock().await;
                let writer = control.as_mut().ok_or(Error::Closed)?;
                msg.encode(state.draft, writer.queued())?;
                writer.flush().await
            }
        }
    }

    /// We are done sending: a FIN (17 on); on the control stream the request is forgotten.
    pub fn finish(&mut self) {
        match &mut self.io {
            Io::Stream { writer, .. } => {
                let _ = writer.finish();
            }
            Io::Mux { .. } => self.forget(),
        }
    }

    /// Cancel the request from the receiving side: STOP_SENDING with `code`, then our FIN
    /// (17 on, as moq-net cancels); on the control stream the request is forgotten.
    pub fn cancel(&mut self, code: u32) {
        match &mut self.io {
            Io::Stream { reader, writer, .. } => {
                reader.stop(code);
                let _ = writer.finish();
            }
            Io::Mux { .. } => self.forget(),
        }
    }

    /// Abandon the request's stream with `code` both ways (17 on).
    pub fn reset(&mut self, code: u32) {
        match &mut self.io {
            Io::Stream { reader, writer, .. } => {
                reader.stop(code);
                writer.reset(code);
            }
            Io::Mux { .. } => self.forget(),
        }
    }

    fn forget(&self) {
        self.shared.state().routes.lock().remove(&self.id);
    }
}

impl<T: Transport> Drop for Request<T> {
    fn drop(&mut self) {
        if matches!(self.io, Io::Mux { .. }) {
            self.forget();
        }
    }
}
