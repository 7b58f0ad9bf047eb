//! The community's warm publisher: every channel's `chat` track, one message (one group of
//! one frame) per channel per interval, staggered so the channels take turns.
//!
//! Message `k` of the channel at position `c` (of `n`) is due at
//! `start + (k·n + c) · interval / n`: one global sequence of posts, evenly spaced. Its frame
//! carries `k` and that due time (see [`crate::frame`]), so a reader tells history from
//! live and measures delivery from when the message was due. Each channel counts what it
//! has sent, which is what a member asking for it is owed ([`super::history`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use starling_model::{
    BroadcastProducer, Frame, Limits, Origin, Route, RouteHandle, TrackInfo, TrackProducer,
};
use starling_proto::Path;

use super::layout::{Channel, Layout, TRACK};
use crate::clock::Clock;
use crate::frame::FrameHeader;
use crate::publisher::PublishError;

/// When the `k`-th post of the whole schedule is due, `posts_per_round` channels each
/// posting once per `interval`.
pub fn due_ns(start_ns: u64, post: u64, posts_per_round: u64, interval: Duration) -> u64 {
    let step = interval.as_nanos() as u64 / posts_per_round.max(1);
    start_ns + post * step
}

/// One channel's track and what it has sent.
struct Posting {
    track: TrackProducer,
    sent: AtomicU64,
}

/// Every channel, published in one local origin.
pub struct Channels {
    origin: Origin,
    layout: Layout,
    postings: Vec<Posting>,
    _broadcasts: Vec<(BroadcastProducer, RouteHandle)>,
}

impl Channels {
    /// Publish every channel of `layout`, each track keeping `max_age` of messages.
    pub fn new(layout: Layout, max_age: Duration) -> Result<Arc<Self>, PublishError> {
        let origin = Origin::new();
        let info = TrackInfo {
            max_age_ms: max_age.as_millis() as u64,
            ..TrackInfo::default()
        };
        let mut postings = Vec::with_capacity(layout.channel_count());
        let mut broadcasts = Vec::with_capacity(layout.channel_count());
        for channel in layout.channels() {
            let broadcast = BroadcastProducer::new(Limits::default());
            let track = broadcast.create_track(TRACK, info);
            let route = origin.publish(
                Path::new(&channel.path())?,
                broadcast.consume(),
                Route::local(),
            )?;
            postings.push(Posting {
                track,
                sent: AtomicU64::new(0),
            });
            broadcasts.push((broadcast, route));
        }
        Ok(Arc::new(Channels {
            origin,
            layout,
            postings,
            _broadcasts: broadcasts,
        }))
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Messages `channel` has sent so far.
    pub fn sent(&self, channel: Channel) -> u64 {
        self.postings[self.layout.position(channel)]
            .sent
            .load(Ordering::Acquire)
    }

    /// Post `rounds` messages on every channel (`None`: until `stop`), one round per
    /// `interval`, the first due at `start_ns`. Returns the posts made.
    pub async fn post(
        &self,
        clock: &Clock,
        start_ns: u64,
        interval: Duration,
        rounds: Option<u64>,
        message_size: usize,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<u64, PublishError> {
        tokio::pin!(stop);
        let n = self.postings.len() as u64;
        if n == 0 {
            return Ok(0);
        }
        let total = rounds.map(|r| r * n);
        let mut post = 0u64;
        while total.is_none_or(|t| post < t) {
            let due = due_ns(start_ns, post, n, interval);
            if due > clock.now_ns() {
                tokio::select! {
                    biased;
                    _ = &mut stop => break,
                    _ = tokio::time::sleep_until(clock.instant_at(due).into()) => {}
                }
            }
            // Every post already due goes out now, keeping its due time.
            let now = clock.now_ns();
            loop {
                let due = due_ns(start_ns, post, n, interval);
                if due > now || total.is_some_and(|t| post >= t) {
                    break;
                }
                self.write(&self.postings[(post % n) as usize], due, message_size)?;
                post += 1;
            }
        }
        Ok(post)
    }

    /// Write the posting's next message as one group of one frame.
    fn write(&self, posting: &Posting, due: u64, size: usize) -> Result<(), PublishError> {
        let k = posting.sent.load(Ordering::Relaxed);
        let payload = FrameHeader::new(k, due).frame(size)?;
        let mut group = posting.track.create_group(k)?;
        group.write_frame(Frame {
            timestamp: due / 1_000_000,
            payload,
        })?;
        group.finish();
        posting.sent.store(k + 1, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posts_are_evenly_spaced_and_each_channel_posts_once_a_round() {
        let interval = Duration::from_millis(1000);
        assert_eq!(due_ns(5, 0, 4, interval), 5);
        assert_eq!(due_ns(5, 1, 4, interval), 5 + 250_000_000);
        // Post 4 is channel 0's second message, one interval after its first.
        assert_eq!(due_ns(0, 4, 4, interval), 1_000_000_000);
    }

    #[tokio::test]
    async fn a_bounded_schedule_counts_every_channels_messages() {
        let layout = Layout {
            open_channels: 3,
            member_channels: 2,
            open_per_member: 1,
            member_per_member: 1,
        };
        let channels = Channels::new(layout, Duration::from_secs(10)).unwrap();
        let clock = Clock::new();
        let posts = channels
            .post(
                &clock,
                clock.now_ns(),
                Duration::from_millis(10),
                Some(3),
                64,
                std::future::pending(),
            )
            .await
            .unwrap();
        assert_eq!(posts, 15);
        for channel in layout.channels() {
            assert_eq!(channels.sent(channel), 3, "{channel:?}");
        }
    }
}
