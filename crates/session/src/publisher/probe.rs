//! Serving a PROBE stream: reports of our send-side RTT estimate to the subscriber (docs/wire.md §4.11).
//!
//! Reports go out at once, again when the RTT moves by 25 % or more, and at least every 10 s;
//! a metric that becomes unknown is retracted once with zeros. The subscriber sends only the
//! stream type: any further byte is malformed.

use std::sync::Arc;
use std::time::Duration;

use starling_proto::{Probe, StreamCode};
use starling_transport::Transport;
use tokio::time::Instant;

use crate::error::Error;
use crate::reader::Reader;
use crate::shared::Shared;
use crate::writer::Writer;

const SAMPLE: Duration = Duration::from_millis(100);
const REFRESH: Duration = Duration::from_secs(10);

pub(crate) async fn probe<T: Transport>(
    shared: &Arc<Shared<T>>,
    reader: &mut Reader<T::Recv>,
    writer: &mut Writer<T::Send>,
) -> Result<(), Error> {
    let mut last: Option<(Probe, Instant)> = None;
    let mut ticks = tokio::time::interval(SAMPLE);
    loop {
        tokio::select! {
            biased;
            done = reader.finished() => {
                // FIN: the subscriber stopped listening; any byte is malformed.
                return done.map_err(|_| Error::Stream(StreamCode::MalformedTrack));
            }
            _ = ticks.tick() => {
                let now = Instant::now();
                // A measured 0 is sent as 1; 0 on the wire means unknown.
                // lite-03 has no RTT field: an RTT-only report says nothing there, and nothing
                // is sent (moq-net's `lite03_sends_nothing_for_an_rtt_only_report`).
                let rtt_ms = if shared.version.has_probe_rtt() {
                    shared.transport.rtt_ms().map(|rtt| rtt.max(1)).unwrap_or(0)
                } else {
                    0
                };
                let report = Probe { bitrate: 0, rtt_ms };
                if due(last.as_ref(), &report, now) {
                    writer.message(&report).await?;
                    last = Some((report, now));
                }
            }
        }
    }
}

fn due(last: Option<&(Probe, Instant)>, report: &Probe, now: Instant) -> bool {
    let unknown = report.rtt_ms == 0 && report.bitrate == 0;
    match last {
        None => !unknown,
        Some((previous, _)) if unknown => previous.rtt_ms != 0 || previous.bitrate != 0,
        Some((previous, at)) => {
            let moved = previous.rtt_ms.abs_diff(report.rtt_ms) * 4 >= previous.rtt_ms.max(1);
            moved || now.duration_since(*at) >= REFRESH
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtt(ms: u64) -> Probe {
        Probe {
            bitrate: 0,
            rtt_ms: ms,
        }
    }

    #[test]
    fn reports_first_on_change_and_on_refresh() {
        let t0 = Instant::now();
        assert!(due(None, &rtt(40), t0));
        assert!(!due(None, &rtt(0), t0), "nothing known, nothing said");
        let last = (rtt(40), t0);
        assert!(
            !due(Some(&last), &rtt(45), t0 + SAMPLE),
            "a 12 % move is not news"
        );
        assert!(due(Some(&last), &rtt(50), t0 + SAMPLE), "a 25 % move is");
        assert!(due(Some(&last), &rtt(30), t0 + SAMPLE));
        assert!(
            due(Some(&last), &rtt(40), t0 + REFRESH),
            "refresh every 10 s"
        );
        assert!(due(Some(&last), &rtt(0), t0 + SAMPLE), "retract once");
        assert!(!due(Some(&(rtt(0), t0)), &rtt(0), t0 + SAMPLE));
    }
}
