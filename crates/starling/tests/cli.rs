//! The `starling` binary end to end on loopback: relay, publish (stdin and clock), subscribe,
//! over WebTransport (`http://` pinning), raw QUIC (`moqt://`), WebSocket (`ws://`) and
//! plaintext QMux over TCP (`tcp://`).

use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_starling");

/// Kills the child when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Start a relay (and its plaintext QMux listener) and wait until it says it is listening:
/// the process, the QUIC/HTTP port and the QMux TCP port.
fn relay() -> (Running, u16, u16) {
    let port = free_port();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(BIN)
        .args([
            "relay",
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--listen-tcp",
            &format!("127.0.0.1:{tcp}"),
        ])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let running = Running(child);
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains("relay listening") {
            // Keep draining the relay's log so it never blocks on a full pipe.
            std::thread::spawn(move || for _ in lines {});
            return (running, port, tcp);
        }
    }
    panic!("relay exited before listening");
}

fn subscribe(url: &str, broadcast: &str, track: &str, count: usize) -> Child {
    Command::new(BIN)
        .args([
            "subscribe",
            "--url",
            url,
            "--tls-disable-verify",
            "--broadcast",
            broadcast,
            "--track",
            track,
            "--count",
            &count.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Wait for a child to exit, within a deadline; its stdout lines.
fn finish(mut child: Child, deadline: Duration) -> Vec<String> {
    let mut stdout = child.stdout.take().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
        let status = child.wait();
        let _ = tx.send((status, out));
    });
    match rx.recv_timeout(deadline) {
        Ok((status, out)) => {
            let status = status.unwrap();
            assert!(status.success(), "subscriber failed: {status}");
            out.lines().map(str::to_string).collect()
        }
        Err(_) => {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            panic!("subscriber did not finish in time");
        }
    }
}

#[test]
fn stdin_publisher_reaches_subscribers_over_every_binding() {
    let (_relay, port, tcp_port) = relay();
    let mut publisher = Running(
        Command::new(BIN)
            .args([
                "publish",
                "--url",
                &format!("http://127.0.0.1:{port}/"),
                "--broadcast",
                "room/alice",
                "stdin",
                "--track",
                "chat",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let subscribers: Vec<Child> = [
        format!("moqt://127.0.0.1:{port}/"),
        format!("http://127.0.0.1:{port}/"),
        format!("ws://127.0.0.1:{port}/"),
        format!("tcp://127.0.0.1:{tcp_port}/"),
    ]
    .iter()
    .map(|url| subscribe(url, "room/alice", "chat", 5))
    .collect();
    // Every subscriber joins at the live edge, so keep writing lines until all are done; each
    // must then hold five consecutive lines of what was written.
    let mut stdin = publisher.0.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..400 {
            if writeln!(stdin, "line {i}").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    });
    for child in subscribers {
        let lines = finish(child, Duration::from_secs(20));
        assert_eq!(lines.len(), 5, "{lines:?}");
        // Each line is its own group, and groups travel on independent streams (newest first
        // when several are in flight), so arrival order may differ; none may be missing.
        let mut numbers: Vec<usize> = lines
            .iter()
            .map(|l| l.strip_prefix("line ").unwrap().parse().unwrap())
            .collect();
        // A subscriber stops after its first five arrivals, so groups overtaken at the very
        // end (older streams yield to newer ones; on a loaded machine by more than one group)
        // may be outside them. The oldest three must be consecutive, and all five close.
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), 5, "{lines:?}");
        let first = numbers[0];
        assert_eq!(
            &numbers[..3],
            &(first..first + 3).collect::<Vec<_>>()[..],
            "{lines:?}"
        );
        assert!(numbers[4] - first <= 7, "{lines:?}");
    }
    drop(publisher);
    let _ = writer.join();
}

#[test]
fn clock_publishes_a_minute_header_then_seconds() {
    let (_relay, port, _) = relay();
    let _clock = Running(
        Command::new(BIN)
            .args([
                "publish",
                "--url",
                &format!("http://127.0.0.1:{port}/"),
                "--broadcast",
                "clock",
                "clock",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let lines = finish(
        subscribe(&format!("moqt://127.0.0.1:{port}/"), "clock", "seconds", 2),
        Duration::from_secs(20),
    );
    // A late joiner gets the current minute's group from its first frame: the header, then a
    // second.
    assert_eq!(lines.len(), 2, "{lines:?}");
    let header = &lines[0];
    assert_eq!(header.len(), "2026-11-30 03:07:".len(), "{header}");
    assert!(
        header.ends_with(':') && header.as_bytes()[4] == b'-',
        "{header}"
    );
    let second: u32 = lines[1].parse().expect("seconds frame");
    assert!(second < 60);
}
