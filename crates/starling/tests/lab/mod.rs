//! Network namespaces for the tests that need hosts of their own: a lab of namespaces joined
//! to the test's namespace or to each other by veth pairs (removed when dropped), commands
//! run inside them, and sockets opened inside them from the test process itself (a thread
//! enters the namespace, binds, and leaves the socket behind it), so one test can be many
//! hosts. Needs root with CAP_NET_ADMIN; `cannot_build_namespaces` says why not elsewhere.

#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{ensure, Context};

/// Why this machine cannot build network namespaces, if it cannot: not root, or a root
/// without the capability (a container without CAP_NET_ADMIN). Any other failure later is a
/// test failure.
pub fn cannot_build_namespaces() -> Option<String> {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        return Some("network namespaces need root".into());
    }
    let probe = format!("stprobe{}", std::process::id() % 100_000);
    match run("ip", &["netns", "add", &probe]) {
        Ok(()) => {
            let _ = run("ip", &["netns", "del", &probe]);
            None
        }
        Err(err) if format!("{err:#}").contains("not permitted") => Some(format!(
            "this root may not create network namespaces: {err:#}"
        )),
        Err(_) => None, // let the test itself fail and say why
    }
}

pub fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    ensure!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// Namespaces and links of one test, removed when dropped.
pub struct Lab {
    tag: String,
    /// Second octet of every address in this lab.
    net: u8,
    namespaces: Vec<String>,
    root_ends: Vec<String>,
    links: u8,
    dir: tempfile::TempDir,
}

/// One veth pair: `a` may be the test's namespace (`None`).
pub struct Link {
    pub a_ns: Option<String>,
    pub a_if: String,
    pub a_ip: Ipv4Addr,
    pub b_ns: String,
    pub b_if: String,
    pub b_ip: Ipv4Addr,
}

impl Lab {
    pub fn new(hosts: usize) -> anyhow::Result<Lab> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let seed = std::process::id().wrapping_mul(7).wrapping_add(n);
        let tag = format!("{:03x}", seed & 0xfff);
        let mut lab = Lab {
            net: 100 + (seed % 150) as u8,
            tag,
            namespaces: Vec::new(),
            root_ends: Vec::new(),
            links: 0,
            dir: tempfile::tempdir()?,
        };
        for host in 0..hosts {
            let ns = format!("st{}h{host}", lab.tag);
            let _ = run("ip", &["netns", "del", &ns]);
            run("ip", &["netns", "add", &ns])?;
            lab.namespaces.push(ns.clone());
            run(
                "ip",
                &["netns", "exec", &ns, "ip", "link", "set", "lo", "up"],
            )?;
        }
        Ok(lab)
    }

    pub fn ns(&self, host: usize) -> &str {
        &self.namespaces[host]
    }

    /// A veth pair between `a` (`None`: this namespace) and `b` on its own /30.
    pub fn link(&mut self, a: Option<usize>, b: usize) -> anyhow::Result<Link> {
        let index = self.links;
        self.links += 1;
        let a_if = format!("st{}l{index}a", self.tag);
        let b_if = format!("st{}l{index}b", self.tag);
        let _ = run("ip", &["link", "del", &a_if]);
        run(
            "ip",
            &["link", "add", &a_if, "type", "veth", "peer", "name", &b_if],
        )?;
        let a_ip = Ipv4Addr::new(10, self.net, index, 1);
        let b_ip = Ipv4Addr::new(10, self.net, index, 2);
        let a_ns = a.map(|host| self.ns(host).to_string());
        let b_ns = self.ns(b).to_string();
        match &a_ns {
            Some(ns) => run("ip", &["link", "set", &a_if, "netns", ns])?,
            None => self.root_ends.push(a_if.clone()),
        }
        run("ip", &["link", "set", &b_if, "netns", &b_ns])?;
        let link = Link {
            a_ns,
            a_if,
            a_ip,
            b_ns,
            b_if,
            b_ip,
        };
        for (ns, dev, ip) in [
            (link.a_ns.as_deref(), &link.a_if, a_ip),
            (Some(link.b_ns.as_str()), &link.b_if, b_ip),
        ] {
            in_ns(ns, &["ip", "addr", "add", &format!("{ip}/30"), "dev", dev])?;
            in_ns(ns, &["ip", "link", "set", dev, "up"])?;
        }
        Ok(link)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = run("ip", &["netns", "del", ns]);
        }
        for dev in &self.root_ends {
            let _ = run("ip", &["link", "del", dev]);
        }
    }
}

/// Run `args` in namespace `ns` (`None`: here).
pub fn in_ns(ns: Option<&str>, args: &[&str]) -> anyhow::Result<()> {
    match ns {
        Some(ns) => {
            let mut all = vec!["netns", "exec", ns];
            all.extend_from_slice(args);
            run("ip", &all)
        }
        None => run(args[0], &args[1..]),
    }
}

impl Link {
    /// Take the link down (both ends) or bring it back.
    pub fn set_up(&self, up: bool) -> anyhow::Result<()> {
        let state = if up { "up" } else { "down" };
        in_ns(
            self.a_ns.as_deref(),
            &["ip", "link", "set", &self.a_if, state],
        )?;
        in_ns(Some(&self.b_ns), &["ip", "link", "set", &self.b_if, state])
    }

    /// Hold the link to `rate` in both directions (tc tbf).
    pub fn limit(&self, rate: &str) -> anyhow::Result<()> {
        for (ns, dev) in [
            (self.a_ns.as_deref(), &self.a_if),
            (Some(self.b_ns.as_str()), &self.b_if),
        ] {
            in_ns(
                ns,
                &[
                    "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", "64kb",
                    "latency", "100ms",
                ],
            )?;
        }
        Ok(())
    }
}

/// Run `make` on a thread inside namespace `ns`: what it opens (sockets) belongs to `ns`
/// for the rest of its life, wherever it is used from. `make` runs within the caller's
/// tokio runtime, so what it spawns (a QUIC endpoint's driver) runs there.
pub fn inside<T: Send>(ns: &str, make: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Handle::try_current().ok();
    let path = format!("/var/run/netns/{ns}");
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                let file = std::fs::File::open(&path).with_context(|| path.clone())?;
                // SAFETY: setns on this thread only, with a namespace file it owns open.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                ensure!(rc == 0, "setns {path}: {}", std::io::Error::last_os_error());
                let _entered = runtime.as_ref().map(|r| r.enter());
                Ok(make())
            })
            .join()
            .expect("the namespace thread")
    })
}
