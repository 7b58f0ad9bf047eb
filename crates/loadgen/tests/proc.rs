//! `/proc` parsing, on synthetic text and on the test process itself.

use starling_loadgen::proc::{
    clock_ticks_per_second, parse_stat, parse_status, read_cpu, read_memory, ProcError,
};
use starling_loadgen::usage::UsageProbe;

#[test]
fn stat_fields_are_counted_after_the_command_name() {
    // A command name with spaces and parentheses must not shift the fields.
    let stat = "1234 (my (odd) relay) S 1 1234 1234 0 -1 4194560 3553 0 0 0 250 75 0 0 20 0 9 0 \
                 12345 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 4096 17663 0 0 0 17 1 0 0 0 0 0";
    let cpu = parse_stat(stat).unwrap();
    assert_eq!(cpu.utime_ticks, 250);
    assert_eq!(cpu.stime_ticks, 75);
    assert_eq!(cpu.total_ticks(), 325);
    let earlier = parse_stat(&stat.replace(" 250 75 ", " 200 70 ")).unwrap();
    let ticks = clock_ticks_per_second() as f64;
    assert!((cpu.seconds_since(&earlier) - 55.0 / ticks).abs() < 1e-9);
}

#[test]
fn malformed_stat_is_an_error() {
    assert!(matches!(
        parse_stat("1234 no name"),
        Err(ProcError::Malformed(_))
    ));
    assert!(matches!(
        parse_stat("1 (x) S 1 2"),
        Err(ProcError::Malformed(_))
    ));
    assert!(matches!(
        parse_stat("1 (x) S 1 1 1 0 -1 0 0 0 0 0 abc 0"),
        Err(ProcError::Malformed(_))
    ));
}

#[test]
fn status_memory_is_read_in_bytes() {
    let status =
        "Name:\trelay\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nThreads:\t4\n";
    let memory = parse_status(status).unwrap();
    assert_eq!(memory.hwm_bytes, 50 * 1024 * 1024);
    assert_eq!(memory.rss_bytes, 40 * 1024 * 1024);
    assert!(parse_status("Name:\tx\nVmRSS:\t1 kB\n").is_err());
    assert!(parse_status("VmHWM:\t1 MB\nVmRSS:\t1 kB\n").is_err());
}

#[test]
fn the_test_process_reads_itself() {
    let pid = std::process::id();
    let before = read_cpu(pid).unwrap();
    // Burn some CPU so the counters must move (a tick is 10 ms at USER_HZ 100).
    let started = std::time::Instant::now();
    let mut x = 0u64;
    while started.elapsed() < std::time::Duration::from_millis(100) {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    let after = read_cpu(pid).unwrap();
    assert!(
        after.total_ticks() > before.total_ticks(),
        "{before:?} -> {after:?}"
    );
    assert!(after.seconds_since(&before) > 0.0);
    let memory = read_memory(pid).unwrap();
    assert!(memory.rss_bytes > 0);
    assert!(memory.hwm_bytes >= memory.rss_bytes);
}

#[test]
fn a_missing_process_is_an_io_error() {
    // PIDs are below 2^22 on Linux.
    assert!(matches!(read_cpu(u32::MAX), Err(ProcError::Io { .. })));
}

#[tokio::test]
async fn a_usage_probe_reports_the_window() {
    let probe = UsageProbe::start(std::process::id()).unwrap();
    let burn = std::time::Instant::now();
    let mut x = 0u64;
    while burn.elapsed() < std::time::Duration::from_millis(50) {
        x = std::hint::black_box(x.wrapping_add(1));
    }
    let usage = probe.finish().unwrap();
    assert_eq!(usage.pid, std::process::id());
    assert!(usage.window_seconds >= 0.05);
    assert!(usage.cpu_seconds >= 0.0);
    assert!(usage.peak_rss_bytes > 0);
    assert!(usage.max_sampled_rss_bytes > 0);
}
