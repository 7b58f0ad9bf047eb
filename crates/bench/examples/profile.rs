//! Run one shape for a number of iterations and print wall and CPU time per delivered item, for
//! profiling under `perf record` or `valgrind --tool=callgrind` (criterion's sampling gets in
//! their way).
//!
//! `cargo run --release -p starling-bench --example profile -- dash RELAYS PROJECTS TRACKS TICKS`
//! `cargo run --release -p starling-bench --example profile -- delivery VIEWERS FRAMES`
//! (`STARLING_BENCH_VERSION=moq-lite-07-wip` runs either on lite-07; `STARLING_BENCH_WORKERS=N`
//! on a multi-thread runtime of N workers, to compare one core with more by wall time.)
//! (CPU time is read from Linux's `/proc/thread-self/schedstat`; elsewhere only wall time.)

use std::time::Instant;

/// The relay binary's allocator, so profiles show what it would spend.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use starling_bench::{runtime, Dash, DashShape, Delivery, Error};

const USAGE: &str =
    "usage: profile dash RELAYS PROJECTS TRACKS TICKS | profile delivery VIEWERS FRAMES";

/// Nanoseconds this thread has run on a CPU, where the kernel tells.
fn cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

fn per(total: Option<u64>, count: u64) -> String {
    match total {
        Some(ns) if count > 0 => format!("{} ns", ns / count),
        _ => "n/a".to_string(),
    }
}

/// The version to run on: `STARLING_BENCH_VERSION` (a version name), else moq-lite-06.
fn version() -> starling_proto::Protocol {
    std::env::var("STARLING_BENCH_VERSION")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(starling_proto::Protocol::Lite(
            starling_proto::Version::Lite06,
        ))
}

/// Time `work` (which delivers `items` items) in wall and CPU time.
fn measure<T>(what: &str, items: u64, work: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    let (wall, cpu) = (Instant::now(), cpu_ns());
    let out = work()?;
    let cpu = cpu_ns().zip(cpu).map(|(after, before)| after - before);
    println!(
        "{what}: wall {:?} ({} per item), cpu {} per item",
        wall.elapsed(),
        per(Some(wall.elapsed().as_nanos() as u64), items),
        per(cpu, items)
    );
    Ok(out)
}

/// Run `work` to its end in a task of the runtime's own: on a multi-thread runtime the
/// topology is then built and driven from a worker, as a relay's tasks are, not from this
/// thread (whose allocations a worker would free, and whose wakes cross to it).
fn on_runtime<T: Send + 'static>(
    rt: &tokio::runtime::Runtime,
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    rt.block_on(async { tokio::spawn(work).await.expect("the runtime's task") })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let numbers: Vec<usize> = args
        .iter()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let rt = runtime()?;
    match (args.first().map(String::as_str), &numbers[..]) {
        (Some("dash"), &[relays, projects, tracks, ticks]) => {
            let shape = DashShape {
                relays,
                projects,
                tracks,
                version: version(),
            };
            println!("{shape:?}: {} tracks", shape.total_tracks());
            let mut dash = measure("setup", 1, || on_runtime(&rt, Dash::setup(shape)))?;
            let items = (ticks * shape.total_tracks()) as u64;
            dash = measure("ticks (item = one track's group)", items, || {
                on_runtime(&rt, async move {
                    for _ in 0..ticks {
                        dash.tick().await?;
                    }
                    Ok(dash)
                })
            })?;
            measure("teardown", 1, || {
                dash.close();
                drop(dash);
                drop(rt);
                Ok(())
            })?;
        }
        (Some("delivery"), &[viewers, frames]) => {
            let mut delivery = measure("setup", 1, || {
                on_runtime(&rt, Delivery::setup(viewers, version()))
            })?;
            let items = (frames * viewers) as u64;
            delivery = measure("frames (item = one delivered frame)", items, || {
                on_runtime(&rt, async move {
                    for _ in 0..frames {
                        delivery.frame().await?;
                    }
                    Ok(delivery)
                })
            })?;
            measure("teardown", 1, || {
                delivery.close();
                drop(delivery);
                drop(rt);
                Ok(())
            })?;
        }
        _ => return Err(USAGE.into()),
    }
    Ok(())
}
