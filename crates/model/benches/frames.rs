//! Criterion bench of the model's publish path: what one frame costs to enter a track's cache
//! (admitted, charged, published), with the relay-wide cache budget and the relay's bounds
//! (1 MiB and 8 groups a track), 1 KB frames, 30 to a group, so the track's own policy drops
//! a group every 30 frames. `reader` adds a reader that takes every frame as it is written, as
//! a subscription's group send does. ns per frame.
//!
//! `cargo bench -p starling-model --bench frames`

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use starling_model::{
    BroadcastProducer, CacheBudget, Frame, GroupConsumer, Limits, StartAt, TrackConsumer,
    TrackInfo, TrackProducer,
};

/// The relay binary's allocator, so the bench measures what a relay would spend.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const GROUP_FRAMES: u64 = 30;

struct Publisher {
    _broadcast: BroadcastProducer,
    track: TrackProducer,
    reader: Option<(TrackConsumer, Option<GroupConsumer>)>,
    group: Option<starling_model::GroupProducer>,
    written: u64,
    payload: Bytes,
    frames: Vec<Frame>,
}

impl Publisher {
    fn new(reader: bool) -> Self {
        let limits = Limits {
            track_cache_bytes: 1 << 20,
            max_cached_groups: 8,
            ..Limits::default()
        };
        let broadcast =
            BroadcastProducer::new(limits).with_cache_budget(Arc::new(CacheBudget::new(256 << 20)));
        let track = broadcast.create_track("video", TrackInfo::default());
        let reader = reader.then(|| {
            let consumer = broadcast
                .consume()
                .subscribe_track("video", StartAt::default())
                .expect("a reader");
            (consumer, None)
        });
        Publisher {
            _broadcast: broadcast,
            track,
            reader,
            group: None,
            written: 0,
            payload: Bytes::from(vec![7u8; 1000]),
            frames: Vec::new(),
        }
    }

    /// One frame in, opening the next group every [`GROUP_FRAMES`]; the reader, if any,
    /// takes what is new.
    fn frame(&mut self) {
        if self.written.is_multiple_of(GROUP_FRAMES) {
            if let Some(group) = self.group.take() {
                group.finish();
            }
            self.group = Some(self.track.append_group().expect("a group"));
        }
        let group = self.group.as_mut().expect("an open group");
        group
            .write_frame(Frame {
                timestamp: self.written,
                payload: self.payload.clone(),
            })
            .expect("a frame");
        self.written += 1;
        if let Some((track, group)) = &mut self.reader {
            let mut cx = Context::from_waker(Waker::noop());
            while let Poll::Ready(Ok(Some(next))) = track.poll_group(&mut cx) {
                *group = Some(next);
            }
            if let Some(group) = group {
                let _ = group.poll_frames(&mut cx, &mut self.frames);
                self.frames.clear();
            }
        }
    }
}

fn frames(c: &mut Criterion) {
    let mut group = c.benchmark_group("frame_in");
    group.throughput(Throughput::Elements(1));
    for reader in [false, true] {
        let name = if reader { "reader" } else { "alone" };
        let mut publisher = Publisher::new(reader);
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| publisher.frame())
        });
    }
    group.finish();
}

criterion_group!(benches, frames);
criterion_main!(benches);
