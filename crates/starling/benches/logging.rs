//! Criterion bench: span enter/exit and a disabled `debug!` under the `Targets` and `EnvFilter` paths.

use std::hint::black_box;

use criterion::{
    criterion_group, criterion_main, measurement::WallTime, BenchmarkGroup, Criterion,
};
use starling_logging::LogFilter;
use tracing::Subscriber;
use tracing_subscriber::{filter::EnvFilter, layer::SubscriberExt, Layer, Registry};

/// (name, list): the `bench::hot` debug span is disabled by the first and enabled by the second;
/// the `bench::cold` debug event is disabled by both.
const LISTS: [(&str, &str); 2] = [
    ("span-disabled", "info"),
    ("span-enabled", "info,bench::hot=debug"),
];

/// The fallback a span directive forces, for scale: the same enabled span via a span name.
const SPAN_DIRECTIVE: &str = "info,bench::hot[work]=debug";

fn subscriber<F>(filter: F) -> impl Subscriber + Send + Sync
where
    F: Layer<Registry> + Send + Sync + 'static,
{
    // The same stack `init_logging` installs, writing nowhere.
    tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::sink))
}

fn run(
    group: &mut BenchmarkGroup<'_, WallTime>,
    filter: &str,
    span_enabled: bool,
    subscriber: impl Subscriber + Send + Sync + 'static,
) {
    // Creating the dispatcher rebuilds every callsite's cached interest for it; the previous
    // run's dispatcher is gone by now, so nothing here measures a stale "sometimes".
    let _default = tracing::subscriber::set_default(subscriber);
    let span = tracing::debug_span!(target: "bench::hot", "work", id = 7u64);
    assert_eq!(!span.is_disabled(), span_enabled, "{filter}");
    group.bench_function(format!("{filter}/span_enter_exit"), |b| {
        b.iter(|| {
            let _entered = black_box(&span).enter();
        })
    });
    group.bench_function(format!("{filter}/debug_disabled"), |b| {
        b.iter(|| tracing::debug!(target: "bench::cold", n = black_box(1u64), "not logged"))
    });
    drop(span);
}

fn logging(c: &mut Criterion) {
    for (name, list) in LISTS {
        let mut group = c.benchmark_group(name);
        let LogFilter::Targets(targets) = LogFilter::parse(list).expect(list) else {
            panic!("{list} should run on Targets");
        };
        let span_enabled = name == "span-enabled";
        run(&mut group, "targets", span_enabled, subscriber(targets));
        let env = EnvFilter::builder().parse(list).expect(list);
        run(&mut group, "envfilter", span_enabled, subscriber(env));
        group.finish();
    }
    let mut group = c.benchmark_group("span-directive");
    let LogFilter::Env(env) = LogFilter::parse(SPAN_DIRECTIVE).expect(SPAN_DIRECTIVE) else {
        panic!("{SPAN_DIRECTIVE} should run on EnvFilter");
    };
    run(&mut group, "envfilter", true, subscriber(env));
    group.finish();
}

criterion_group!(benches, logging);
criterion_main!(benches);
