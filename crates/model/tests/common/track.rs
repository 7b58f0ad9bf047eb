//! Helpers for the track tests: track infos, frames, groups, and polling a reader once.

use std::task::{Context, Poll};

use bytes::Bytes;
use futures::task::noop_waker;
use starling_model::{
    Frame, GroupConsumer, GroupProducer, Limits, StartAt, TrackConsumer, TrackInfo, TrackProducer,
};
use starling_proto::StreamCode;

pub fn info(max_age_ms: u64, timescale: u64) -> TrackInfo {
    TrackInfo {
        priority: 0,
        max_age_ms,
        timescale,
    }
}

/// No age expiry to speak of (an hour at ms timescale).
pub fn ageless() -> TrackInfo {
    info(3_600_000, 1000)
}

pub fn frame(timestamp: u64, len: usize) -> Frame {
    Frame {
        timestamp,
        payload: Bytes::from(vec![0xAB; len]),
    }
}

pub fn track(info: Option<TrackInfo>, limits: Limits) -> TrackProducer {
    TrackProducer::new("t", info, limits)
}

pub fn start(max_age_ms: u64, floor: Option<u64>) -> StartAt {
    StartAt {
        max_age_ms,
        floor,
        ..StartAt::default()
    }
}

/// A group with one frame of `len` bytes at `timestamp`, still open.
pub fn group_with(track: &TrackProducer, seq: u64, timestamp: u64, len: usize) -> GroupProducer {
    let mut g = track.create_group(seq).unwrap();
    g.write_frame(frame(timestamp, len)).unwrap();
    g
}

pub fn poll(reader: &mut TrackConsumer) -> Poll<Result<Option<GroupConsumer>, StreamCode>> {
    let w = noop_waker();
    reader.poll_group(&mut Context::from_waker(&w))
}

/// The next group's sequence; panics unless one is ready.
pub fn next(reader: &mut TrackConsumer) -> u64 {
    match poll(reader) {
        Poll::Ready(Ok(Some(g))) => g.sequence(),
        other => panic!(
            "expected a group, got {:?}",
            other.map(|r| r.map(|g| g.map(|g| g.sequence())))
        ),
    }
}

/// Every group ready now, until the reader would block or the track ends.
pub fn ready(reader: &mut TrackConsumer) -> Vec<u64> {
    let mut out = Vec::new();
    while let Poll::Ready(Ok(Some(g))) = poll(reader) {
        out.push(g.sequence());
    }
    out
}

pub fn frame_result(g: &mut GroupConsumer) -> Poll<Result<Option<Frame>, StreamCode>> {
    let w = noop_waker();
    g.poll_frame(&mut Context::from_waker(&w))
}

pub fn aborted(g: &GroupConsumer) -> Option<StreamCode> {
    let w = noop_waker();
    match g.poll_aborted(&mut Context::from_waker(&w)) {
        Poll::Ready(code) => Some(code),
        Poll::Pending => None,
    }
}

pub fn live(reader: &TrackConsumer, seqs: impl IntoIterator<Item = u64>) -> Vec<u64> {
    seqs.into_iter()
        .filter(|s| reader.group(*s).is_some())
        .collect()
}
