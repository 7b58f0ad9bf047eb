//! The JSON summary and the SVG CDF.

use starling_loadgen::cdf;
use starling_loadgen::histogram::Snapshot;
use starling_loadgen::recorder::Recorder;
use starling_loadgen::Summary;

fn sample() -> Summary {
    let recorder = Recorder::new();
    for ms in 1..=10u64 {
        recorder.delivery.record(ms * 1_000_000);
    }
    recorder.connect.record(3_000_000);
    recorder.errors.count("group_reset:Old");
    recorder.errors.count("group_reset:Old");
    Summary::new("fanout", 0, &[&recorder])
}

#[test]
fn json_carries_latency_frames_and_errors() {
    let summary = sample();
    let json: serde_json::Value = serde_json::from_str(&summary.to_json().unwrap()).unwrap();
    assert_eq!(json["mode"], "fanout");
    assert_eq!(json["latency"]["delivery"]["count"], 10);
    assert_eq!(json["latency"]["delivery"]["max_ms"], 10.0);
    assert_eq!(json["latency"]["connect"]["p50_ms"], 3.0);
    assert!(json["latency"]["first_frame"]["p50_ms"].is_null());
    assert_eq!(json["errors"]["group_reset:Old"], 2);
    for key in [
        "expected",
        "received",
        "lost",
        "duplicates",
        "out_of_order",
        "delivered",
    ] {
        assert!(json["frames"][key].is_u64(), "frames.{key}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("summary.json");
    summary.write_json(&path).unwrap();
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(written, json);
}

#[test]
fn text_report_names_every_distribution_and_error() {
    let text = sample().to_string();
    for needle in [
        "connect",
        "first_frame",
        "delivery",
        "group_reset:Old=2",
        "lost 0",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn the_svg_has_one_line_per_non_empty_distribution() {
    let summary = sample();
    let svg = cdf::render("test <cdf>", &summary.distributions);
    assert!(svg.starts_with("<svg"));
    assert!(svg.trim_end().ends_with("</svg>"));
    // connect and delivery have samples; first_frame is empty and left out.
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert!(svg.contains("delivery (n=10)"));
    assert!(!svg.contains("first_frame"));
    assert!(svg.contains("test &lt;cdf&gt;"), "the title is escaped");
    let empty = cdf::render("nothing", &[("x".to_string(), Snapshot::default())]);
    assert!(empty.contains("no samples"));
}
