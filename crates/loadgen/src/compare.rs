//! `compare`: side-by-side figures from paired runs of the same load against two relays.
//!
//! Reads the JSON summaries of `runs/<scenario>/<a>-<i>.json` and `<b>-<i>.json` (the same
//! load, run A B A B … in one session), pairs them by `i`, and for each figure prints the
//! median of each side and the ratio A/B with its min, median and max over the pairs, as a
//! Markdown table. A ratio below 1 means A used less (or was faster) on that figure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Why the comparison could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("no paired runs under {0}")]
    Empty(PathBuf),
}

/// One figure of one run, read from its summary.
#[derive(Clone, Copy, Debug)]
pub struct Figure {
    pub name: &'static str,
    pub read: fn(&Value) -> Option<f64>,
}

fn relay_cpu(summary: &Value) -> Option<f64> {
    summary["relays"]
        .as_array()?
        .iter()
        .filter_map(|r| r["cpu_seconds"].as_f64())
        .reduce(|a, b| a + b)
}

fn peak_rss_mib(summary: &Value) -> Option<f64> {
    summary["relays"]
        .as_array()?
        .iter()
        .filter_map(|r| r["max_sampled_rss_bytes"].as_f64())
        .reduce(f64::max)
        .map(|bytes| bytes / (1024.0 * 1024.0))
}

/// The relay's sends of one kind (`relay_sends`, counted by the kernel around the run) per
/// frame delivered to a subscriber.
fn per_delivered(summary: &Value, kind: &str) -> Option<f64> {
    let delivered = summary["frames"]["delivered"].as_f64()?;
    let count = summary["relay_sends"][kind].as_f64()?;
    (delivered > 0.0).then_some(count / delivered)
}

fn latency(summary: &Value, name: &str, stat: &str) -> Option<f64> {
    summary["latency"][name][stat].as_f64()
}

fn errors(summary: &Value) -> Option<f64> {
    Some(
        summary["errors"]
            .as_object()?
            .values()
            .filter_map(Value::as_f64)
            .sum(),
    )
}

/// The figures reported for a scenario of `mode` (the summary's `mode`).
pub fn figures(mode: &str, idle: bool) -> Vec<Figure> {
    let mut out = Vec::new();
    if idle {
        out.push(Figure {
            name: "idle RSS per session (KiB)",
            read: |s| {
                s["idle"]
                    .as_array()?
                    .iter()
                    .filter_map(|i| i["bytes_per_session"].as_f64())
                    .reduce(f64::max)
                    .map(|b| b / 1024.0)
            },
        });
        return out;
    }
    match mode {
        "fanout" => out.extend([
            Figure {
                name: "relay CPU s per 1000 delivered frames",
                read: |s| {
                    let delivered = s["frames"]["delivered"].as_f64()?;
                    (delivered > 0.0).then_some(relay_cpu(s)? * 1000.0 / delivered)
                },
            },
            Figure {
                name: "relay UDP send syscalls per delivered frame",
                read: |s| per_delivered(s, "syscalls"),
            },
            Figure {
                name: "relay packets per delivered frame",
                read: |s| per_delivered(s, "packets"),
            },
            Figure {
                name: "delivery p50 (ms)",
                read: |s| latency(s, "delivery", "p50_ms"),
            },
            Figure {
                name: "delivery p99 (ms)",
                read: |s| latency(s, "delivery", "p99_ms"),
            },
            Figure {
                name: "delivery max (ms)",
                read: |s| latency(s, "delivery", "max_ms"),
            },
            Figure {
                name: "frames lost",
                read: |s| s["frames"]["lost"].as_f64(),
            },
        ]),
        "burst" => out.extend([
            Figure {
                name: "first frame p50 (ms)",
                read: |s| latency(s, "first_frame", "p50_ms"),
            },
            Figure {
                name: "first frame p99 (ms)",
                read: |s| latency(s, "first_frame", "p99_ms"),
            },
            Figure {
                name: "connect p99 (ms)",
                read: |s| latency(s, "connect", "p99_ms"),
            },
            Figure {
                name: "relay CPU s",
                read: relay_cpu,
            },
        ]),
        "community" => out.extend([
            Figure {
                name: "relay cores, mean",
                read: |s| s["community"]["relay_cores_mean"].as_f64(),
            },
            Figure {
                name: "relay cores, busiest second",
                read: |s| s["community"]["relay_cores_peak"].as_f64(),
            },
            Figure {
                name: "load generator cores, mean",
                read: |s| s["community"]["load_cores_mean"].as_f64(),
            },
            Figure {
                name: "connect p99 (ms)",
                read: |s| latency(s, "connect", "p99_ms"),
            },
            Figure {
                name: "first message p99 (ms)",
                read: |s| latency(s, "first_frame", "p99_ms"),
            },
            Figure {
                name: "history p99 (ms)",
                read: |s| latency(s, "history", "p99_ms"),
            },
            Figure {
                name: "live p99 (ms)",
                read: |s| latency(s, "delivery", "p99_ms"),
            },
            Figure {
                name: "HTTP fetch p99 (ms)",
                read: |s| latency(s, "http_fetch", "p99_ms"),
            },
            Figure {
                name: "HTTP announced p99 (ms)",
                read: |s| latency(s, "http_announced", "p99_ms"),
            },
            Figure {
                name: "removal p99 (ms)",
                read: |s| latency(s, "removal", "p99_ms"),
            },
            Figure {
                name: "histories complete (%)",
                read: |s| {
                    let owed = s["community"]["history_owed"].as_f64()?;
                    let complete = s["community"]["history_complete"].as_f64()?;
                    (owed > 0.0).then_some(complete / owed * 100.0)
                },
            },
            Figure {
                name: "relay RSS per client (KiB)",
                read: |s| Some(s["community"]["relay_rss_per_client_bytes"].as_f64()? / 1024.0),
            },
        ]),
        "dash" => out.push(Figure {
            name: "tick completion p99 (ms)",
            read: |s| latency(s, "tick_completion", "p99_ms"),
        }),
        _ => {}
    }
    out.push(Figure {
        name: "relay peak RSS (MiB)",
        read: peak_rss_mib,
    });
    out.push(Figure {
        name: "errors",
        read: errors,
    });
    out
}

/// The median of `values` (which it sorts); `None` when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

/// One figure over the pairs.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub figure: &'static str,
    pub a_median: Option<f64>,
    pub b_median: Option<f64>,
    /// A/B per pair where both are known and B is not zero: min, median, max.
    pub ratio: Option<(f64, f64, f64)>,
    pub pairs: usize,
}

/// Compare paired summaries (A, B) on `figures`.
pub fn rows(pairs: &[(Value, Value)], figures: &[Figure]) -> Vec<Row> {
    figures
        .iter()
        .map(|figure| {
            let mut a: Vec<f64> = pairs.iter().filter_map(|(a, _)| (figure.read)(a)).collect();
            let mut b: Vec<f64> = pairs.iter().filter_map(|(_, b)| (figure.read)(b)).collect();
            let mut ratios: Vec<f64> = pairs
                .iter()
                .filter_map(|(a, b)| {
                    let (a, b) = ((figure.read)(a)?, (figure.read)(b)?);
                    (b != 0.0).then_some(a / b)
                })
                .collect();
            let ratio = median(&mut ratios).map(|mid| {
                (
                    ratios.first().copied().unwrap_or(mid),
                    mid,
                    ratios.last().copied().unwrap_or(mid),
                )
            });
            Row {
                figure: figure.name,
                a_median: median(&mut a),
                b_median: median(&mut b),
                ratio,
                pairs: pairs.len(),
            }
        })
        .collect()
}

fn cell(value: Option<f64>) -> String {
    match value {
        None => "–".into(),
        Some(0.0) => "0".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.4}"),
    }
}

/// A Markdown table of `rows`, columns named for the two sides.
pub fn markdown(title: &str, a: &str, b: &str, rows: &[Row]) -> String {
    let mut out = format!(
        "#### {title}\n\n| figure | {a} (median) | {b} (median) | {a}/{b} min | median | max |\n|---|---:|---:|---:|---:|---:|\n"
    );
    for row in rows {
        let (lo, mid, hi) = match row.ratio {
            Some((lo, mid, hi)) => (Some(lo), Some(mid), Some(hi)),
            None => (None, None, None),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            row.figure,
            cell(row.a_median),
            cell(row.b_median),
            cell(lo),
            cell(mid),
            cell(hi)
        ));
    }
    out
}

fn read(path: &Path) -> Result<Value, CompareError> {
    let text = std::fs::read_to_string(path).map_err(|source| CompareError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| CompareError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// The summaries under `dir` named `<a>-<i>.json` and `<b>-<i>.json`, paired by `i`.
pub fn load_pairs(dir: &Path, a: &str, b: &str) -> Result<Vec<(Value, Value)>, CompareError> {
    let entries = std::fs::read_dir(dir).map_err(|source| CompareError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut sides: BTreeMap<u64, (Option<PathBuf>, Option<PathBuf>)> = BTreeMap::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = path
            .extension()
            .filter(|e| *e == "json")
            .and(path.file_stem())
            .and_then(|s| s.to_str())
        else {
            continue;
        };
        let Some((side, index)) = stem.rsplit_once('-') else {
            continue;
        };
        let Ok(index) = index.parse::<u64>() else {
            continue;
        };
        let slot = sides.entry(index).or_default();
        if side == a {
            slot.0 = Some(path);
        } else if side == b {
            slot.1 = Some(path);
        }
    }
    let mut pairs = Vec::new();
    for (_, (a, b)) in sides {
        if let (Some(a), Some(b)) = (a, b) {
            pairs.push((read(&a)?, read(&b)?));
        }
    }
    if pairs.is_empty() {
        return Err(CompareError::Empty(dir.to_path_buf()));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fanout(cpu: f64, delivered: u64, p99: f64) -> Value {
        json!({
            "mode": "fanout",
            "relays": [{"cpu_seconds": cpu, "max_sampled_rss_bytes": 1048576}],
            "frames": {"delivered": delivered, "lost": 0},
            "latency": {"delivery": {"p50_ms": 1.0, "p99_ms": p99, "max_ms": p99}},
            "errors": {}
        })
    }

    #[test]
    fn medians_of_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn ratios_are_per_pair_with_min_median_max() {
        let pairs = vec![
            (fanout(1.0, 1000, 2.0), fanout(2.0, 1000, 4.0)),
            (fanout(1.0, 2000, 3.0), fanout(4.0, 2000, 3.0)),
            (fanout(3.0, 1000, 5.0), fanout(3.0, 1000, 5.0)),
        ];
        let rows = rows(&pairs, &figures("fanout", false));
        let cpu = &rows[0];
        assert_eq!(cpu.figure, "relay CPU s per 1000 delivered frames");
        // Per pair: 1/2, 0.5/2, 3/3.
        assert_eq!(cpu.ratio, Some((0.25, 0.5, 1.0)));
        assert_eq!(cpu.a_median, Some(1.0));
        assert_eq!(cpu.b_median, Some(2.0));
        let p99 = rows
            .iter()
            .find(|r| r.figure == "delivery p99 (ms)")
            .unwrap();
        assert_eq!(p99.ratio, Some((0.5, 1.0, 1.0)));
        // Zero loss on both sides has no ratio, only medians.
        let lost = rows.iter().find(|r| r.figure == "frames lost").unwrap();
        assert_eq!((lost.a_median, lost.ratio), (Some(0.0), None));
        // Runs without the kernel's send counts have no packet figures.
        let packets = rows
            .iter()
            .find(|r| r.figure == "relay packets per delivered frame")
            .unwrap();
        assert_eq!((packets.a_median, packets.ratio), (None, None));
        let table = markdown("fanout", "starling", "moq-relay", &rows);
        assert!(
            table.contains(
                "| relay CPU s per 1000 delivered frames | 1.00 | 2.00 | 0.2500 | 0.5000 | 1.00 |"
            ),
            "{table}"
        );
    }

    #[test]
    fn sends_are_per_delivered_frame() {
        let mut a = fanout(1.0, 1000, 1.0);
        a["relay_sends"] = json!({"syscalls": 1500, "packets": 1200});
        let mut b = fanout(1.0, 2000, 1.0);
        b["relay_sends"] = json!({"syscalls": 6000, "packets": 4800});
        let rows = rows(&[(a, b)], &figures("fanout", false));
        let find = |name| rows.iter().find(|r| r.figure == name).unwrap();
        let syscalls = find("relay UDP send syscalls per delivered frame");
        assert_eq!(
            (syscalls.a_median, syscalls.b_median),
            (Some(1.5), Some(3.0))
        );
        assert_eq!(
            find("relay packets per delivered frame").ratio,
            Some((0.5, 0.5, 0.5))
        );
    }

    #[test]
    fn pairs_are_matched_by_index_and_unpaired_runs_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, value: Value| {
            std::fs::write(dir.path().join(name), value.to_string()).unwrap()
        };
        write("starling-1.json", fanout(1.0, 1000, 1.0));
        write("moq-relay-1.json", fanout(2.0, 1000, 1.0));
        write("starling-2.json", fanout(1.0, 1000, 1.0));
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let pairs = load_pairs(dir.path(), "starling", "moq-relay").unwrap();
        assert_eq!(pairs.len(), 1);
        assert!(load_pairs(dir.path(), "x", "y").is_err());
    }
}
