//! The dash client's reading side: follow each expected stats broadcast as it is announced
//! and read all its tracks, every reader polled in one task.

use std::collections::HashSet;

use futures::stream::{FuturesUnordered, StreamExt};
use starling_model::{Origin, StartAt};
use starling_net::AnyTransport;
use starling_proto::Path;
use starling_session::Session;
use tokio::sync::watch;

use crate::publisher::track_name;
use crate::reader::{read_track, ReadContext, TrackRead};
use crate::run::{stopped_or_closed, Stop};

/// The dash client following every expected stats broadcast as it is announced.
pub(super) struct Follow<'a> {
    pub(super) ctx: &'a ReadContext<'a>,
    pub(super) origin: &'a Origin,
    pub(super) expected: &'a HashSet<Path>,
    pub(super) tracks: usize,
    pub(super) last_group: watch::Receiver<Option<u64>>,
    pub(super) stop: &'a Stop,
    pub(super) session: &'a Session<AnyTransport>,
    /// Tripped when following ended.
    pub(super) done: &'a Stop,
}

impl Follow<'_> {
    /// Read every track of every expected broadcast until each has its last group (or the
    /// run stops); one reader per track, all polled in this task.
    pub(super) async fn run(self) -> Vec<TrackRead> {
        let reads = self.follow().await;
        self.done.stop();
        reads
    }

    async fn follow(&self) -> Vec<TrackRead> {
        let prefix = Path::new(".stats").expect("a valid path");
        let interest = match self.origin.interest(prefix.clone()) {
            Ok(interest) => interest,
            Err(err) => {
                self.ctx.recorder.errors.count(&format!("interest:{err}"));
                return Vec::new();
            }
        };
        let mut followed = HashSet::new();
        let mut readers = FuturesUnordered::new();
        let mut reads = Vec::new();
        let mut changed: Vec<Path> = self
            .origin
            .announced(&prefix, None)
            .into_iter()
            .map(|a| a.path)
            .collect();
        let all = self.expected.len();
        loop {
            for path in changed.drain(..) {
                if !self.expected.contains(&path) || followed.contains(&path) {
                    continue;
                }
                let Some(broadcast) = self.origin.consume(&path, None) else {
                    continue;
                };
                followed.insert(path);
                for t in 0..self.tracks {
                    match broadcast.subscribe_track(&track_name(t), StartAt::default()) {
                        Ok(track) => readers.push(read_track(
                            track,
                            self.ctx,
                            TrackRead::from_start(),
                            self.last_group.clone(),
                            stopped_or_closed(self.stop, self.session),
                        )),
                        Err(code) => {
                            self.ctx
                                .recorder
                                .errors
                                .count(&format!("subscribe_refused:{code:?}"));
                            if let Some(ready) = self.ctx.ready {
                                ready.count_down();
                            }
                        }
                    }
                }
            }
            tokio::select! {
                _ = interest.changed(&mut changed) => {}
                Some(read) = readers.next() => {
                    reads.push(read);
                    if readers.is_empty() && followed.len() == all {
                        break;
                    }
                }
                _ = stopped_or_closed(self.stop, self.session) => break,
            }
        }
        // Readers stop with the same signal; collect what they saw.
        while let Some(read) = readers.next().await {
            reads.push(read);
        }
        reads
    }
}
