//! Telling an IETF peer what the origin we publish holds (docs/wire-ietf.md §4.10, §4.11,
//! §8): in answer to its SUBSCRIBE_NAMESPACE (NAMESPACE and NAMESPACE_DONE on the request
//! from 16; a PUBLISH_NAMESPACE request per broadcast on 14 and 15), and unasked, one
//! PUBLISH_NAMESPACE per broadcast, to a peer that does not solicit (MoQ Solicit absent or 0).
//!
//! A broadcast is advertised to the peer once per session whichever way it went; the cluster
//! parameters (hop path with our hop last, warm cost) go to a peer that declared MoQ Cluster.

use starling_model::entropy::Map;
use std::time::Duration;

use starling_model::Announced;
use starling_proto::ietf::namespace::{
    Advertisement, ClusterParams, Namespace, NamespaceDone, PublishNamespace, PublishNamespaceDone,
    SubscribeNamespace,
};
use starling_proto::ietf::reply::{Refused, RequestOk};
use starling_proto::ietf::subscribe::RequestUpdate;
use starling_proto::ietf::Control;
use starling_proto::{Hops, Path, RouteCost};
use starling_transport::Transport;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::request::Request;
use crate::announcing::{Teller, View};
use crate::error::Error;
use crate::shared::ietf::Ietf;
use crate::violation::Violation;

/// How matches reach the peer.
enum Mode<'a, T: Transport> {
    /// A PUBLISH_NAMESPACE request each (unasked, or answering on 14 and 15).
    Requests,
    /// NAMESPACE / NAMESPACE_DONE on the SUBSCRIBE_NAMESPACE request (16 on).
    Inline(&'a mut Request<T>),
}

/// One broadcast told to the peer.
struct Advert {
    /// Requests mode: the advertisement's stop, and where its re-pricings go.
    task: Option<(CancellationToken, watch::Sender<ClusterParams>)>,
    /// The cluster parameters last told (`None` to a peer without MoQ Cluster).
    cluster: Option<ClusterParams>,
}

/// What one view has told the peer.
struct Told {
    /// By absolute path.
    live: Map<Path, Advert>,
}

/// NAMESPACE for `path`: its suffix under the view's prefix, and the cluster parameters a
/// peer that declared MoQ Cluster gets.
fn namespace(view: &View, path: &Path, cluster: Option<ClusterParams>) -> Control {
    Control::Namespace(Namespace {
        suffix: view.suffix(path),
        cluster,
    })
}

/// The cluster parameters of an advertisement to this peer.
fn cluster_of<T: Transport>(shared: &Ietf<T>, announced: &Announced) -> Option<ClusterParams> {
    let state = shared.state();
    if !state.peer_clusters() {
        return None;
    }
    let mut hops = Hops::from_vec(announced.route.hops.to_vec()).ok()?;
    hops.push(shared.config.hop).ok()?;
    Some(ClusterParams {
        hop_path: Some(hops),
        route_cost: Some(advertised_cost(announced.route.cost)),
    })
}

/// The one cost MoQ Cluster carries: the warm half, or the maximum for a route whose cost is
/// not known (it crossed a link without costs). Read back as both halves, a known warm cost
/// would make such a route look known, and cheaper at the receiver than here: the ranking
/// must only ever get worse along a chain (`Route::rank`).
fn advertised_cost(cost: RouteCost) -> u64 {
    if cost.cold >= RouteCost::MAX_HALF {
        RouteCost::MAX_HALF
    } else {
        cost.warm
    }
}

impl Told {
    async fn start<T: Transport>(
        &mut self,
        shared: &Ietf<T>,
        view: &View,
        mode: &mut Mode<'_, T>,
        announced: &Announced,
    ) -> Result<(), Error> {
        let path = announced.path.clone();
        let cluster = cluster_of(shared, announced);
        match mode {
            Mode::Inline(request) => {
                request
                    .send(&namespace(view, &path, cluster.clone()))
                    .await?;
                self.live.insert(
                    path,
                    Advert {
                        task: None,
                        cluster,
                    },
                );
            }
            Mode::Requests => {
                let state = shared.state();
                if !state.advertised.lock().insert(path.clone()) {
                    // Already advertised to this peer the other way.
                    return Ok(());
                }
                let wire = path
                    .strip_prefix(&shared.config.root)
                    .unwrap_or_else(|| path.clone());
                let stop = CancellationToken::new();
                let (updates, task_updates) = watch::channel(cluster.clone().unwrap_or_default());
                let task_stop = stop.clone();
                let task = shared.clone();
                let task_path = path.clone();
                shared.spawn(async move {
                    advertisement(&task, wire, task_updates, task_stop).await;
                    task.state().advertised.lock().remove(&task_path);
                });
                self.live.insert(
                    path,
                    Advert {
                        task: Some((stop, updates)),
                        cluster,
                    },
                );
            }
        }
        Ok(())
    }

    async fn end<T: Transport>(
        &mut self,
        view: &View,
        mode: &mut Mode<'_, T>,
        path: &Path,
    ) -> Result<(), Error> {
        match (self.live.remove(path), mode) {
            (Some(Advert { task: None, .. }), Mode::Inline(request)) => {
                request
                    .send(&Control::NamespaceDone(NamespaceDone {
                        suffix: view.suffix(path),
                    }))
                    .await
            }
            (
                Some(Advert {
                    task: Some((stop, _)),
                    ..
                }),
                _,
            ) => {
                stop.cancel();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The route to a told broadcast changed: a cluster peer hears the new hop path and cost
    /// (a repeated NAMESPACE on the request, or a REQUEST_UPDATE on the advertisement).
    async fn update<T: Transport>(
        &mut self,
        shared: &Ietf<T>,
        view: &View,
        mode: &mut Mode<'_, T>,
        announced: &Announced,
    ) -> Result<(), Error> {
        let Some(advert) = self.live.get_mut(&announced.path) else {
            return Ok(());
        };
        let cluster = cluster_of(shared, announced);
        if cluster.is_none() || cluster == advert.cluster {
            return Ok(());
        }
        advert.cluster = cluster.clone();
        match (&advert.task, mode) {
            (Some((_, updates)), _) => {
                updates.send_replace(cluster.unwrap_or_default());
                Ok(())
            }
            (None, Mode::Inline(request)) => {
                request
                    .send(&namespace(view, &announced.path, cluster))
                    .await
            }
            (None, Mode::Requests) => Ok(()),
        }
    }

    fn end_all(&mut self) {
        for (_, advert) in self.live.drain() {
            if let Some((stop, _)) = advert.task {
                stop.cancel();
            }
        }
    }
}

/// Follow `view` through the announcing engine: what is announced now, then every change;
/// in Inline mode until the request ends, else until the session does.
async fn follow<T: Transport>(
    shared: &Ietf<T>,
    view: &View,
    mode: Mode<'_, T>,
) -> Result<(), Error> {
    let mut teller = IetfTeller {
        shared,
        view,
        mode,
        told: Told {
            live: Map::default(),
        },
    };
    // The drafts re-price at once: no hold.
    crate::announcing::tell(&mut teller, view, shared.exclude_hop(), Duration::ZERO).await
}

/// An IETF peer's interest as the announcing engine drives it.
struct IetfTeller<'a, 'r, T: Transport> {
    shared: &'a Ietf<T>,
    view: &'a View,
    mode: Mode<'r, T>,
    told: Told,
}

impl<T: Transport> Teller for IetfTeller<'_, '_, T> {
    async fn open(&mut self, live: Vec<Announced>) -> Result<(), Error> {
        for announced in live {
            self.start(&announced).await?;
        }
        Ok(())
    }

    fn told(&self, path: &Path) -> bool {
        self.told.live.contains_key(path)
    }

    async fn start(&mut self, now: &Announced) -> Result<(), Error> {
        self.told
            .start(self.shared, self.view, &mut self.mode, now)
            .await
    }

    async fn update(&mut self, now: &Announced) -> Result<(), Error> {
        self.told
            .update(self.shared, self.view, &mut self.mode, now)
            .await
    }

    async fn end(&mut self, path: &Path) -> Result<(), Error> {
        self.told.end(self.view, &mut self.mode, path).await
    }

    async fn flush(&mut self) -> Result<(), Error> {
        Ok(())
    }

    async fn stopped(&mut self) -> Result<(), Error> {
        match &mut self.mode {
            Mode::Inline(request) => ended(request).await,
            // Unasked advertisements go on until the session ends.
            Mode::Requests => std::future::pending().await,
        }
    }

    fn close(&mut self) {
        self.told.end_all();
    }
}

/// Resolves once the SUBSCRIBE_NAMESPACE request ends: UNSUBSCRIBE_NAMESPACE or its close
/// (14-16), the subscriber's FIN (17, 18) or STOP_SENDING (19 on, where a FIN only ends the
/// updates).
async fn ended<T: Transport>(request: &mut Request<T>) -> Result<(), Error> {
    let draft = request.draft()?;
    loop {
        match request.recv().await {
            // From 19 a FIN ends only the updates; STOP_SENDING follows to cancel.
            Ok(None) if draft >= starling_proto::ietf::Draft::D19 => {}
            Ok(None) | Ok(Some(Control::UnsubscribeNamespace(_))) | Err(Error::Transport(_)) => {
                return Ok(())
            }
            Ok(Some(_)) => {
                return Err(Error::ProtocolViolation(
                    Violation::UnexpectedMessageOnSubscribeNamespace,
                ))
            }
            Err(err) => return Err(err),
        }
    }
}

/// Answer the peer's SUBSCRIBE_NAMESPACE: OK (even for a prefix outside its grant, which
/// then matches nothing), then what matches, for as long as the request lives.
pub(crate) async fn subscribe_namespace<T: Transport>(
    shared: &Ietf<T>,
    request: &mut Request<T>,
    msg: SubscribeNamespace,
) -> Result<(), Error> {
    let state = shared.state();
    let draft = state.draft;
    let limits = &shared.config.limits;
    let Some(_slot) = shared.take_slot(
        &shared.announce_interests,
        limits.max_announce_interests,
        crate::Held::Interest,
    ) else {
        return super::refuse(
            request,
            Refused::SubscribeNamespace,
            starling_proto::ietf::reply::RefusalCode::InternalError,
            "too many namespace subscriptions",
        )
        .await;
    };
    request
        .send(&Control::RequestOk {
            answers: Some(Refused::SubscribeNamespace),
            ok: RequestOk {
                request_id: msg.request_id,
            },
        })
        .await?;
    let (true, Some(origin), Ok(prefix)) = (
        shared.config.may_subscribe_under(&msg.prefix),
        shared.config.publish.clone(),
        shared.absolute(&msg.prefix),
    ) else {
        return ended(request).await;
    };
    let view = View {
        origin,
        prefix,
        root: shared.config.root.clone(),
        access: shared.config.access.clone(),
        show_hidden: shared.config.cluster_peer || msg.hidden || !state.peer_hides(),
        max_hops: shared.config.max_hops,
    };
    if draft.has_namespace_messages() {
        follow(shared, &view, Mode::Inline(request)).await
    } else {
        // 14 and 15: PUBLISH_NAMESPACE requests, for as long as this request lives.
        let stop = CancellationToken::new();
        let task_stop = stop.clone();
        let task_shared = shared.clone();
        let follower = async move {
            tokio::select! {
                biased;
                _ = task_stop.cancelled() => Ok(()),
                result = follow(&task_shared, &view, Mode::Requests) => result,
            }
        };
        let result = tokio::select! {
            biased;
            result = ended(request) => result,
            result = follower => result,
        };
        stop.cancel();
        result
    }
}

/// Advertise every broadcast the peer may read, unasked, to a peer that does not solicit.
pub(crate) async fn advertise<T: Transport>(shared: Ietf<T>) {
    let state = shared.state();
    // A client's peer is known only once its SETUP arrived.
    if state
        .peer_setup(shared.config.limits.handshake_timeout)
        .await
        .is_err()
        || state.peer_solicits()
    {
        return;
    }
    let Some(origin) = shared.config.publish.clone() else {
        return;
    };
    let view = View {
        origin,
        prefix: shared.config.root.clone(),
        root: shared.config.root.clone(),
        access: shared.config.access.clone(),
        show_hidden: shared.config.cluster_peer || !state.peer_hides(),
        max_hops: shared.config.max_hops,
    };
    if let Err(err) = follow(&shared, &view, Mode::Requests).await {
        tracing::debug!(?err, "advertising ended");
    }
}

/// One PUBLISH_NAMESPACE of ours, held until `stop`: then withdrawn with DONE (14-16) or our
/// FIN (17 on). A re-pricing goes as a REQUEST_UPDATE with the new hop path and cost; a
/// refusal or the peer's cancellation ends it.
async fn advertisement<T: Transport>(
    shared: &Ietf<T>,
    namespace: Path,
    mut updates: watch::Receiver<ClusterParams>,
    stop: CancellationToken,
) {
    let cluster = updates.borrow_and_update().clone();
    let draft = shared.state().draft;
    let by_namespace = (!draft.has_namespace_messages()).then(|| namespace.clone());
    let opened = Request::open(shared, by_namespace, |id| {
        Control::PublishNamespace(PublishNamespace {
            request_id: id,
            namespace: namespace.clone(),
            cluster,
        })
    })
    .await;
    let mut request = match opened {
        Ok(request) => request,
        Err(err) => {
            tracing::debug!(?err, %namespace, "PUBLISH_NAMESPACE not sent");
            return;
        }
    };
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => {
                if draft.has_control_stream() {
                    let advertisement = if draft.has_namespace_messages() {
                        Advertisement::Request(request.id)
                    } else {
                        Advertisement::Namespace(namespace.clone())
                    };
                    let _ = request
                        .send(&Control::PublishNamespaceDone(PublishNamespaceDone { advertisement }))
                        .await;
                }
                request.finish();
                return;
            }
            Ok(()) = updates.changed() => {
                let cluster = updates.borrow_and_update().clone();
                let Ok(update_id) = shared.state().allocate(shared.config.limits.request_timeout).await else {
                    return;
                };
                let update = RequestUpdate {
                    request_id: update_id,
                    subscription_id: request.id,
                    hop_path: cluster.hop_path,
                    route_cost: cluster.route_cost,
                    ..RequestUpdate::default()
                };
                if request.send(&Control::RequestUpdate(update)).await.is_err() {
                    return;
                }
            }
            msg = request.recv() => match msg {
                Ok(Some(Control::RequestOk { .. })) => {}
                Ok(Some(Control::RequestError { error, .. })) => {
                    tracing::debug!(%namespace, reason = %error.reason, "PUBLISH_NAMESPACE refused");
                    return;
                }
                // Cancelled, closed, or the peer broke the request: it is over.
                _ => return,
            }
        }
    }
}
