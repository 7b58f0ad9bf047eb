//! What the whole-relay simulation checks once the mesh settled after an event: the relays'
//! routes and registered links, their HTTP API, and delivery to every relay's subscriber.

use std::collections::BTreeSet;

use bytes::Bytes;
use futures::FutureExt;
use rand::rngs::StdRng;
use rand::Rng;
use starling_proto::Path;
use tower::ServiceExt;

use super::{Mesh, SETTLE, TRACK};

impl Mesh {
    pub(super) fn check_routes(&self) -> Result<(), String> {
        let live = self.live();
        let all: Vec<String> = (0..self.next_broadcast)
            .map(|i| format!("sim/b{i}"))
            .collect();
        for at in 0..self.nodes.len() {
            let Some(core) = self.core(at) else {
                continue;
            };
            let reach = self.component(at);
            for name in &all {
                let path = Path::new(name).unwrap();
                for route in core.origin().routes(&path) {
                    let mut hops = route.hops.to_vec();
                    hops.sort_unstable();
                    hops.dedup();
                    if hops.len() != route.hops.len() || route.hops.contains(&Mesh::hop(at)) {
                        return Err(format!(
                            "relay {at}: {name} has a looping chain {:?}",
                            route.hops
                        ));
                    }
                }
                let publisher = live.iter().find(|(n, _)| n == name).map(|(_, p)| *p);
                let reachable = publisher.is_some_and(|p| reach.contains(&p));
                let routed = core.origin().route(&path, None).is_some();
                if reachable != routed {
                    return Err(format!(
                        "relay {at}: {name} routed {routed}, reachable {reachable} (publisher {publisher:?})"
                    ));
                }
            }
            // One registered link per peer it dials and can reach.
            let edges = self.board.board().edges.clone();
            let dialing = edges
                .iter()
                .filter(|e| e.from == at && e.up && self.alive(e.to))
                .count();
            let links = core
                .sessions()
                .list()
                .iter()
                .filter(|entry| entry.info.peer.is_some())
                .count();
            if links != dialing {
                return Err(format!(
                    "relay {at}: {links} links registered, {dialing} peers dialed and reachable"
                ));
            }
        }
        Ok(())
    }

    /// GET `target` from relay `at`'s HTTP API: status and body.
    pub(super) async fn http(&self, at: usize, target: &str) -> Result<(u16, Bytes), String> {
        let router = self.nodes[at].http.clone().expect("a live relay's API");
        let request = axum::http::Request::get(target)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = tokio::time::timeout(SETTLE, router.oneshot(request))
            .await
            .map_err(|_| format!("relay {at}: GET {target} timed out"))?
            .map_err(|err| format!("relay {at}: GET {target}: {err}"))?;
        let status = response.status().as_u16();
        let body =
            tokio::time::timeout(SETTLE, axum::body::to_bytes(response.into_body(), 1 << 20))
                .await
                .map_err(|_| format!("relay {at}: GET {target}: the body timed out"))?
                .map_err(|err| format!("relay {at}: GET {target}: {err}"))?;
        Ok((status, body))
    }

    pub(super) async fn check_http(&self, rng: &mut StdRng) -> Result<(), String> {
        let token = self.token(&[], &["sim/**"], self.far_future());
        for at in 0..self.nodes.len() {
            if !self.alive(at) {
                continue;
            }
            let (status, body) = self
                .http(at, &format!("/announced/sim?jwt={token}"))
                .await?;
            let listed: BTreeSet<String> = String::from_utf8_lossy(&body)
                .lines()
                .filter(|l| !l.is_empty())
                .map(|l| format!("sim/{}", l.trim_start_matches('/')))
                .collect();
            let reachable = self.reachable(at);
            if status != 200 || listed != reachable {
                return Err(format!(
                    "relay {at}: /announced/sim answered {status} {listed:?}, reachable {reachable:?}"
                ));
            }
            // The last round's group of one reachable broadcast, fetched over HTTP by number,
            // and as the latest group where the relay's subscriber keeps the track cached (on
            // a cold relay the latest is the first group its pull brings, which may be older:
            // the pull window fills oldest first).
            if self.round > 0 && !reachable.is_empty() {
                let names: Vec<&String> = reachable.iter().collect();
                let name = names[rng.gen_range(0..names.len())];
                let round = self.round - 1;
                let hot = self.nodes[at].subscriber.as_ref().is_some_and(|s| {
                    s.readers.contains_key(name) && s.session.closed().now_or_never().is_none()
                });
                let mut targets = vec![format!("/fetch/{name}/{TRACK}?group={round}&jwt={token}")];
                if hot {
                    targets.push(format!("/fetch/{name}/{TRACK}?jwt={token}"));
                }
                for target in targets {
                    let (status, body) = self.http(at, &target).await?;
                    let want = format!("r{round}");
                    if status != 200 || body != want.as_bytes() {
                        return Err(format!(
                            "relay {at}: {target} answered {status} {body:?}, want {want}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn check_delivery(&self) -> Result<(), String> {
        let round = self.round - 1;
        for (at, node) in self.nodes.iter().enumerate() {
            let Some(subscriber) = &node.subscriber else {
                continue;
            };
            if subscriber.session.closed().now_or_never().is_some() {
                continue; // as above
            }
            for (name, reader) in &subscriber.readers {
                if reader.track.latest_sequence() != Some(round) {
                    return Err(format!(
                        "relay {at}: the subscriber over {:?} has {name} at group {:?}, not {round}",
                        subscriber.protocol,
                        reader.track.latest_sequence()
                    ));
                }
            }
        }
        Ok(())
    }
}
