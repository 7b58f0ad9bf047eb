//! What the host grants the process: the memory limit relay-wide bounds are shares of.
//!
//! The cgroup limit wins (v2 `memory.max`, then v1 `memory.limit_in_bytes`), so a container's
//! quota is what counts; without one, the machine's memory (`MemTotal`).

use std::path::Path;

/// The memory this process may use, in bytes; `None` when nothing says (not Linux).
pub fn memory_limit() -> Option<u64> {
    cgroup_limit(Path::new("/"))
        .or_else(|| meminfo_total(&std::fs::read_to_string("/proc/meminfo").ok()?))
}

/// The cgroup memory limit under `root` (a test passes a fake tree).
fn cgroup_limit(root: &Path) -> Option<u64> {
    // cgroup v2: the process's group, from /proc/self/cgroup ("0::/path").
    let group = std::fs::read_to_string(root.join("proc/self/cgroup"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("0::").map(|p| p.trim().to_owned()))
        })
        .unwrap_or_default();
    let v2 = root
        .join("sys/fs/cgroup")
        .join(group.trim_start_matches('/'))
        .join("memory.max");
    let v1 = root.join("sys/fs/cgroup/memory/memory.limit_in_bytes");
    [v2, root.join("sys/fs/cgroup/memory.max"), v1]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .find_map(|text| parse_limit(&text))
}

/// A cgroup limit file's value: bytes, or `max` / a v1 "unlimited" sentinel for none.
fn parse_limit(text: &str) -> Option<u64> {
    let value: u64 = text.trim().parse().ok()?;
    // cgroup v1 writes a page-rounded i64::MAX when unlimited.
    (value < 1 << 60).then_some(value)
}

/// `MemTotal` from /proc/meminfo, in bytes.
fn meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_and_unlimited_is_none() {
        assert_eq!(parse_limit("4294967296\n"), Some(4 << 30));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        assert_eq!(
            meminfo_total("MemTotal:       24576000 kB\nMemFree: 1 kB\n"),
            Some(24_576_000 * 1024)
        );
    }

    #[test]
    fn the_process_cgroup_limit_wins() {
        let root = std::env::temp_dir().join(format!("starling-host-{}", std::process::id()));
        let group = root.join("sys/fs/cgroup/relay.slice");
        std::fs::create_dir_all(&group).unwrap();
        std::fs::create_dir_all(root.join("proc/self")).unwrap();
        std::fs::write(root.join("proc/self/cgroup"), "0::/relay.slice\n").unwrap();
        std::fs::write(group.join("memory.max"), "2147483648\n").unwrap();
        std::fs::write(root.join("sys/fs/cgroup/memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_limit(&root), Some(2 << 30));
        std::fs::write(group.join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_limit(&root), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
