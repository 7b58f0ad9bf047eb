//! Reading a process's CPU time and memory from `/proc/<pid>/stat` and `/proc/<pid>/status`.
//!
//! CPU time is `utime + stime` (fields 14 and 15 of `stat`, in clock ticks); the command name
//! in field 2 may hold spaces and parentheses, so fields are counted from its closing `)`.
//! Memory is `VmRSS` (now) and `VmHWM` (the peak resident set over the process's life), in
//! kB in `status`.

use std::path::PathBuf;

/// Why a `/proc` file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("malformed /proc data: {0}")]
    Malformed(&'static str),
}

/// User and system CPU time, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub utime_ticks: u64,
    pub stime_ticks: u64,
}

impl CpuTimes {
    pub fn total_ticks(&self) -> u64 {
        self.utime_ticks + self.stime_ticks
    }

    /// User plus system time in seconds.
    pub fn seconds(&self) -> f64 {
        self.total_ticks() as f64 / clock_ticks_per_second() as f64
    }

    /// CPU seconds spent between `earlier` and `self`.
    pub fn seconds_since(&self, earlier: &CpuTimes) -> f64 {
        self.total_ticks().saturating_sub(earlier.total_ticks()) as f64
            / clock_ticks_per_second() as f64
    }
}

/// Resident memory, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`: resident now.
    pub rss_bytes: u64,
    /// `VmHWM`: the peak resident set so far.
    pub hwm_bytes: u64,
}

/// `sysconf(_SC_CLK_TCK)`: the unit of `stat`'s CPU times (100 on Linux in practice).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// Parse the contents of `/proc/<pid>/stat`.
pub fn parse_stat(text: &str) -> Result<CpuTimes, ProcError> {
    let close = text
        .rfind(')')
        .ok_or(ProcError::Malformed("stat has no command name"))?;
    // After the name: field 3 (state) is index 0, so field n is index n - 3.
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> Result<u64, ProcError> {
        fields
            .get(n - 3)
            .ok_or(ProcError::Malformed("stat is too short"))?
            .parse()
            .map_err(|_| ProcError::Malformed("stat CPU time is not a number"))
    };
    Ok(CpuTimes {
        utime_ticks: field(14)?,
        stime_ticks: field(15)?,
    })
}

/// Parse the contents of `/proc/<pid>/status`.
pub fn parse_status(text: &str) -> Result<Memory, ProcError> {
    let kb = |key: &str| -> Result<u64, ProcError> {
        let line = text
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .ok_or(ProcError::Malformed("status lacks VmRSS or VmHWM"))?;
        let mut parts = line.split_whitespace();
        let value: u64 = parts
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or(ProcError::Malformed("status memory is not a number"))?;
        match parts.next() {
            Some("kB") => Ok(value * 1024),
            _ => Err(ProcError::Malformed("status memory is not in kB")),
        }
    };
    Ok(Memory {
        rss_bytes: kb("VmRSS:")?,
        hwm_bytes: kb("VmHWM:")?,
    })
}

fn read(pid: u32, file: &str) -> Result<String, ProcError> {
    let path = PathBuf::from(format!("/proc/{pid}/{file}"));
    std::fs::read_to_string(&path).map_err(|source| ProcError::Io { path, source })
}

/// The CPU time process `pid` has used so far.
pub fn read_cpu(pid: u32) -> Result<CpuTimes, ProcError> {
    parse_stat(&read(pid, "stat")?)
}

/// Process `pid`'s resident memory now and at its peak.
pub fn read_memory(pid: u32) -> Result<Memory, ProcError> {
    parse_status(&read(pid, "status")?)
}
