//! Criterion bench of whole moq-lite sessions over the in-memory transport, one current-thread
//! runtime per shape: delivery (ns per delivered frame) and the stats dash (ns per track per tick),
//! on lite-06 and again on lite-07 (`delivery_lite07`, `dash_production_lite07`). The routes
//! bench is the origin's alone, the same whatever the wire.
//!
//! Setup (sessions, announces, subscriptions) runs once per point, lazily, so a name filter skips
//! it; each measured iteration is one frame (delivery) or one tick (dash).

use std::time::{Duration, Instant};

/// The relay binary's allocator, so the bench measures what a relay would spend.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{
    criterion_group, criterion_main, measurement::WallTime, BenchmarkGroup, BenchmarkId, Criterion,
    SamplingMode, Throughput,
};
use starling_bench::{runtime, Dash, DashShape, Delivery, Teardown};
use starling_proto::ietf::Draft;
use starling_proto::{Protocol, Version};
use tokio::runtime::Runtime;

/// The lite-07 and IETF-22 groups repeat the lite-06 ones under `<name>_lite07`, `<name>_ietf22`.
const VERSIONS: [(Protocol, &str); 3] = [
    (Protocol::Lite(Version::Lite06), ""),
    (Protocol::Lite(Version::Lite07Wip), "_lite07"),
    (Protocol::Ietf(Draft::D22), "_ietf22"),
];

fn delivery(c: &mut Criterion) {
    for (version, suffix) in VERSIONS {
        delivery_on(c, version, &format!("delivery{suffix}"));
    }
}

fn delivery_on(c: &mut Criterion, version: Protocol, name: &str) {
    let mut group = c.benchmark_group(name);
    group.sample_size(20);
    for viewers in [1usize, 10, 100, 1000] {
        group.throughput(Throughput::Elements(viewers as u64));
        let mut state: Option<(Runtime, Delivery)> = None;
        group.bench_function(BenchmarkId::new("viewers", viewers), |b| {
            let (rt, shape) = state.get_or_insert_with(|| {
                let rt = runtime().expect("runtime");
                let shape = rt
                    .block_on(Delivery::setup(viewers, version))
                    .expect("delivery setup");
                (rt, shape)
            });
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        shape.frame().await.expect("frame delivered");
                    }
                    start.elapsed()
                })
            })
        });
        if let Some((_rt, mut shape)) = state.take() {
            shape.close();
        }
    }
    group.finish();
}

/// One dash point: throughput counts the tracks, so a flat time per track is a constant cost.
fn dash_point(group: &mut BenchmarkGroup<'_, WallTime>, id: BenchmarkId, shape: DashShape) {
    group.throughput(Throughput::Elements(shape.total_tracks() as u64));
    let mut state: Option<(Runtime, Dash)> = None;
    group.bench_function(id, |b| {
        let (rt, dash) = state.get_or_insert_with(|| {
            let rt = runtime().expect("runtime");
            let started = Instant::now();
            let dash = rt.block_on(Dash::setup(shape)).expect("dash setup");
            eprintln!("dash {shape:?}: setup {:?}", started.elapsed());
            (rt, dash)
        });
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    dash.tick().await.expect("tick delivered");
                }
                start.elapsed()
            })
        })
    });
    if let Some((_rt, mut dash)) = state.take() {
        dash.close();
    }
}

fn dash_group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    // A tick is milliseconds; flat sampling keeps the run short at the large points.
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group
}

fn dash(c: &mut Criterion) {
    let on = |relays, projects, tracks| DashShape {
        relays,
        projects,
        tracks,
        version: Protocol::Lite(Version::Lite06),
    };
    let mut group = dash_group(c, "dash_projects");
    for projects in [1usize, 4, 16] {
        dash_point(
            &mut group,
            BenchmarkId::new("projects", projects),
            on(5, projects, 24),
        );
    }
    group.finish();

    let mut group = dash_group(c, "dash_tracks");
    for tracks in [6usize, 24, 96] {
        dash_point(
            &mut group,
            BenchmarkId::new("tracks", tracks),
            on(5, 1, tracks),
        );
    }
    group.finish();

    let mut group = dash_group(c, "dash_relays");
    for relays in [2usize, 5, 9, 17, 33] {
        // 768 tracks in total whatever the mesh size.
        dash_point(
            &mut group,
            BenchmarkId::new("relays", relays),
            on(relays, 1, 768 / (relays - 1)),
        );
    }
    group.finish();

    // 34 nodes x 5 projects x 24 tracks = 4080 tracks, on every version.
    for (version, suffix) in VERSIONS {
        let mut group = dash_group(c, &format!("dash_production{suffix}"));
        let shape = DashShape {
            version,
            ..on(35, 5, 24)
        };
        dash_point(&mut group, BenchmarkId::new("tracks", 4080), shape);
        group.finish();
    }
}

/// Route teardown and refollow (one peer leaving and coming back) at 256 / 1024 / 2048
/// prefixes x 1 / 16 broadcasts each, and a peer that had announced 10 000 broadcasts under one
/// prefix. Each measured step is one whole teardown (or refollow); the other step runs
/// untimed between them to restore the table.
fn routes(c: &mut Criterion) {
    let points: Vec<(usize, usize)> = [256usize, 1024, 2048]
        .iter()
        .flat_map(|&prefixes| [(prefixes, 1), (prefixes, 16)])
        .chain([(1, 10_000)])
        .collect();
    for (name, timed_teardown) in [("routes_teardown", true), ("routes_refollow", false)] {
        let mut group = c.benchmark_group(name);
        group.sampling_mode(SamplingMode::Flat);
        group.sample_size(10);
        for &(prefixes, per_prefix) in &points {
            let id = BenchmarkId::new(format!("prefixes_{prefixes}_x"), per_prefix);
            let mut state: Option<Teardown> = None;
            group.bench_function(id, |b| {
                let shape = state.get_or_insert_with(|| {
                    Teardown::setup(prefixes, per_prefix).expect("routes setup")
                });
                b.iter_custom(|iters| {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        if timed_teardown {
                            let start = Instant::now();
                            shape.teardown();
                            spent += start.elapsed();
                            shape.refollow().expect("refollow");
                        } else {
                            shape.teardown();
                            let start = Instant::now();
                            shape.refollow().expect("refollow");
                            spent += start.elapsed();
                        }
                    }
                    spent
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1));
    targets = delivery, dash, routes
}
criterion_main!(benches);
