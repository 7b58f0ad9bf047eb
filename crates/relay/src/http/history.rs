//! The relay's recent past, for the status page's charts: one [`Point`] per interval (sessions,
//! subscriptions, bytes and frames per second in and out, refusals per second by reason, the
//! receive and cache budgets, runtime lag), the last `window` of them in a ring. A ticker
//! samples whether or not anyone is watching, so a page opened now draws the minutes before
//! it; `GET /history.json` serves the ring and every status snapshot carries the newest point.
//!
//! A sample is one pass over the live sessions ([`RelayMetrics::pulse`]); the ring holds
//! `window / interval` points (600 by default), each a few hundred bytes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{header, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::http::access::admit_operator;
use crate::http::HttpState;
use crate::metrics::{Pulse, RelayMetrics};
use crate::registry::SessionRegistry;

/// The relay over one interval.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Point {
    /// Unix time at the end of the interval, in milliseconds.
    pub time_ms: u64,
    pub sessions: usize,
    pub subscriptions: u64,
    pub bytes_in_per_sec: f64,
    pub bytes_out_per_sec: f64,
    pub frames_in_per_sec: f64,
    pub frames_out_per_sec: f64,
    /// Refusals per second over the interval, by reason; reasons with none are left out.
    pub refused_per_sec: BTreeMap<&'static str, f64>,
    pub receive_used: usize,
    pub receive_total: usize,
    pub cache_used: usize,
    pub cache_total: usize,
    /// How late the runtime ran a timer at the sample, when the relay measures it.
    pub lag_ms: Option<f64>,
}

impl Point {
    /// The point ending at `pulse` (taken at `now`), with rates over the time since `before`
    /// (none for the first sample).
    pub fn between(
        before: Option<&(Instant, Pulse)>,
        now: Instant,
        time_ms: u64,
        pulse: &Pulse,
    ) -> Self {
        let seconds = before
            .map(|(at, _)| now.saturating_duration_since(*at).as_secs_f64())
            .unwrap_or(0.0);
        let per_sec = |now: u64, then: Option<u64>| match then {
            Some(then) if seconds > 0.0 => now.saturating_sub(then) as f64 / seconds,
            _ => 0.0,
        };
        let earlier = before.map(|(_, pulse)| pulse);
        let refused_per_sec = pulse
            .refused
            .iter()
            .filter_map(|(reason, count)| {
                let then = earlier.map(|p| {
                    p.refused
                        .iter()
                        .find(|(r, _)| r == reason)
                        .map_or(0, |(_, n)| *n)
                });
                let rate = per_sec(*count, then);
                (rate > 0.0).then_some((*reason, rate))
            })
            .collect();
        Point {
            time_ms,
            sessions: pulse.sessions,
            subscriptions: pulse.subscriptions,
            bytes_in_per_sec: per_sec(pulse.bytes_in, earlier.map(|p| p.bytes_in)),
            bytes_out_per_sec: per_sec(pulse.bytes_out, earlier.map(|p| p.bytes_out)),
            frames_in_per_sec: per_sec(pulse.frames_in, earlier.map(|p| p.frames_in)),
            frames_out_per_sec: per_sec(pulse.frames_out, earlier.map(|p| p.frames_out)),
            refused_per_sec,
            receive_used: pulse.receive_used,
            receive_total: pulse.receive_total,
            cache_used: pulse.cache_used,
            cache_total: pulse.cache_total,
            lag_ms: pulse.lag.map(|lag| lag.as_secs_f64() * 1000.0),
        }
    }
}

/// The last `capacity` points, oldest first, and the pulse the next rates start from.
struct Ring {
    points: VecDeque<Point>,
    capacity: usize,
    last: Option<(Instant, Pulse)>,
}

impl Ring {
    fn push(&mut self, now: Instant, time_ms: u64, pulse: Pulse) -> Point {
        let point = Point::between(self.last.as_ref(), now, time_ms, &pulse);
        if self.points.len() == self.capacity {
            self.points.pop_front();
        }
        self.points.push_back(point.clone());
        self.last = Some((now, pulse));
        point
    }
}

/// The series and what it samples.
pub(crate) struct History {
    metrics: RelayMetrics,
    sessions: SessionRegistry,
    interval: Duration,
    ring: Mutex<Ring>,
}

#[derive(Serialize)]
struct HistoryJson {
    interval_ms: u64,
    window_ms: u64,
    points: Vec<Point>,
}

impl History {
    /// Keeps `window` of points, one per `interval` (at least one point).
    pub fn new(
        metrics: RelayMetrics,
        sessions: SessionRegistry,
        interval: Duration,
        window: Duration,
    ) -> Arc<Self> {
        let interval = interval.max(Duration::from_millis(100));
        let capacity = (window.as_millis() / interval.as_millis()).clamp(1, 100_000) as usize;
        Arc::new(History {
            metrics,
            sessions,
            interval,
            ring: Mutex::new(Ring {
                points: VecDeque::with_capacity(capacity),
                capacity,
                last: None,
            }),
        })
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes a sample now and appends its point.
    pub fn sample(&self) -> Point {
        let pulse = self.metrics.pulse(&self.sessions);
        let time_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        self.ring().push(Instant::now(), time_ms, pulse)
    }

    /// The newest point, if any sample was taken.
    pub fn latest(&self) -> Option<Point> {
        self.ring().points.back().cloned()
    }

    fn json(&self) -> HistoryJson {
        let ring = self.ring();
        HistoryJson {
            interval_ms: self.interval.as_millis() as u64,
            window_ms: (self.interval * ring.capacity as u32).as_millis() as u64,
            points: ring.points.iter().cloned().collect(),
        }
    }

    /// Sample every interval until the history is dropped.
    pub fn spawn_ticker(self: &Arc<Self>) {
        let history: Weak<History> = Arc::downgrade(self);
        let interval = self.interval;
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(history) = history.upgrade() else {
                    return;
                };
                history.sample();
            }
        });
    }
}

/// `GET /history.json`: the ring, oldest point first.
pub(crate) async fn history_json(State(state): State<Arc<HttpState>>, uri: Uri) -> Response {
    if let Err(err) = admit_operator(&state, uri.query()).await {
        return err.into_response();
    }
    match &state.history {
        Some(history) => (
            [(header::CACHE_CONTROL, "no-store")],
            axum::Json(history.json()),
        )
            .into_response(),
        None => (
            axum::http::StatusCode::NOT_FOUND,
            "this relay keeps no history\n",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pulse(bytes_in: u64, frames_out: u64, refused: u64) -> Pulse {
        Pulse {
            sessions: 3,
            subscriptions: 2,
            bytes_in,
            bytes_out: 0,
            frames_in: 0,
            frames_out,
            refused: vec![("lag", refused), ("version", 0)],
            receive_used: 10,
            receive_total: 100,
            cache_used: 5,
            cache_total: 50,
            lag: Some(Duration::from_micros(1500)),
        }
    }

    #[test]
    fn rates_are_differences_over_the_time_between_samples() {
        let start = Instant::now();
        let first = (start, pulse(1000, 10, 4));
        let point = Point::between(
            Some(&first),
            start + Duration::from_secs(2),
            7,
            &pulse(5000, 30, 10),
        );
        assert_eq!(point.time_ms, 7);
        assert_eq!(point.bytes_in_per_sec, 2000.0);
        assert_eq!(point.frames_out_per_sec, 10.0);
        // Reasons with no refusal in the interval are left out.
        assert_eq!(point.refused_per_sec, BTreeMap::from([("lag", 3.0)]));
        assert_eq!(point.lag_ms, Some(1.5));
        assert_eq!((point.sessions, point.subscriptions), (3, 2));
        // The first sample has no interval: no rates.
        let point = Point::between(None, start, 7, &pulse(5000, 30, 10));
        assert_eq!(point.bytes_in_per_sec, 0.0);
        assert!(point.refused_per_sec.is_empty());
    }

    #[test]
    fn the_ring_keeps_the_newest_points_only() {
        let mut ring = Ring {
            points: VecDeque::new(),
            capacity: 3,
            last: None,
        };
        let start = Instant::now();
        for second in 0..5u64 {
            ring.push(
                start + Duration::from_secs(second),
                second,
                pulse(second * 100, 0, 0),
            );
        }
        let times: Vec<u64> = ring.points.iter().map(|p| p.time_ms).collect();
        assert_eq!(times, [2, 3, 4]);
        assert!(ring.points.iter().all(|p| p.bytes_in_per_sec == 100.0));
    }
}
