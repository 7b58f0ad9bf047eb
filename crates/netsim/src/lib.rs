//! A UDP link emulator: a proxy between the clients that send to it and one target address,
//! with per-direction delay and seeded loss, and a switch that cuts the link (a partition or
//! a dead host: datagrams vanish without any reply). Tests put it on the path of a QUIC
//! connection where the machine's kernel has no netem.
//!
//! Each client address gets its own socket towards the target, so replies find their way back.
//! Every queue is bounded: at most [`MAX_CLIENTS`] clients and [`MAX_IN_FLIGHT`] delayed
//! datagrams at once; beyond that datagrams are dropped, as a full router queue would.
//!
//! [`link`] does the same for in-memory sessions: a stream transport with delay and seeded
//! loss, for simulations on a paused clock; [`trace`] records a run so a seed's replay can be
//! compared line by line.

pub mod link;
pub mod trace;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// Clients (source addresses) one link serves at once.
pub const MAX_CLIENTS: usize = 1024;
/// Delayed datagrams held at once, both directions together.
pub const MAX_IN_FLIGHT: usize = 65_536;
/// The largest datagram forwarded.
const MAX_DATAGRAM: usize = 65_535;

/// How one direction of the link treats datagrams.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Shape {
    /// Added one-way delay.
    pub delay: Duration,
    /// Probability in [0, 1] that a datagram is dropped.
    pub loss: f64,
}

#[derive(Debug)]
struct Control {
    up: AtomicBool,
    /// Client to target, and target to client.
    shapes: Mutex<(Shape, Shape)>,
    rng: Mutex<rand::rngs::StdRng>,
    in_flight: AtomicUsize,
    dropped: AtomicUsize,
}

impl Control {
    /// Whether to forward one datagram in this direction, and after how long.
    fn admit(&self, towards_target: bool) -> Option<Duration> {
        if !self.up.load(Ordering::Acquire) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let shape = {
            let shapes = self.shapes.lock();
            if towards_target {
                shapes.0
            } else {
                shapes.1
            }
        };
        if shape.loss > 0.0 && self.rng.lock().gen::<f64>() < shape.loss {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(shape.delay)
    }
}

/// A running link; stops when dropped.
pub struct UdpLink {
    local: SocketAddr,
    control: Arc<Control>,
    task: JoinHandle<()>,
}

impl UdpLink {
    /// Listen on `bind` (port 0: any) and forward to `target`; loss draws come from `seed`.
    pub async fn start(bind: SocketAddr, target: SocketAddr, seed: u64) -> std::io::Result<Self> {
        let front = Arc::new(UdpSocket::bind(bind).await?);
        let local = front.local_addr()?;
        let control = Arc::new(Control {
            up: AtomicBool::new(true),
            shapes: Mutex::new((Shape::default(), Shape::default())),
            rng: Mutex::new(rand::rngs::StdRng::seed_from_u64(seed)),
            in_flight: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
        });
        let task = tokio::spawn(forward(front, target, control.clone()));
        Ok(UdpLink {
            local,
            control,
            task,
        })
    }

    /// Where clients send to reach the target through the link.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Cut the link (`false`: every datagram vanishes, both ways) or restore it.
    pub fn set_up(&self, up: bool) {
        self.control.up.store(up, Ordering::Release);
    }

    /// Shape each direction: client to target, target to client.
    pub fn shape(&self, towards_target: Shape, towards_client: Shape) {
        *self.control.shapes.lock() = (towards_target, towards_client);
    }

    /// Datagrams dropped so far (cut, lost, or over a bound).
    pub fn dropped(&self) -> usize {
        self.control.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for UdpLink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Send `datagram` on `socket` to `to` (or its connected peer) now, or after `delay` from a
/// task of its own.
async fn deliver(
    control: &Arc<Control>,
    socket: &Arc<UdpSocket>,
    to: Option<SocketAddr>,
    datagram: Vec<u8>,
    delay: Duration,
) {
    if delay.is_zero() {
        let _ = match to {
            Some(to) => socket.send_to(&datagram, to).await,
            None => socket.send(&datagram).await,
        };
        return;
    }
    if control.in_flight.fetch_add(1, Ordering::AcqRel) >= MAX_IN_FLIGHT {
        control.in_flight.fetch_sub(1, Ordering::AcqRel);
        control.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let (control, socket) = (control.clone(), socket.clone());
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let _ = match to {
            Some(to) => socket.send_to(&datagram, to).await,
            None => socket.send(&datagram).await,
        };
        control.in_flight.fetch_sub(1, Ordering::AcqRel);
    });
}

async fn forward(front: Arc<UdpSocket>, target: SocketAddr, control: Arc<Control>) {
    let mut clients: HashMap<SocketAddr, (Arc<UdpSocket>, JoinHandle<()>)> = HashMap::new();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let Ok((n, from)) = front.recv_from(&mut buf).await else {
            return;
        };
        let back = match clients.get(&from) {
            Some((back, _)) => back.clone(),
            None => {
                if clients.len() >= MAX_CLIENTS {
                    control.dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let any: SocketAddr = if target.is_ipv6() {
                    "[::]:0".parse().expect("valid")
                } else {
                    "0.0.0.0:0".parse().expect("valid")
                };
                let Ok(back) = UdpSocket::bind(any).await else {
                    continue;
                };
                if back.connect(target).await.is_err() {
                    continue;
                }
                let back = Arc::new(back);
                let replies =
                    tokio::spawn(reply(back.clone(), front.clone(), from, control.clone()));
                clients.insert(from, (back.clone(), replies));
                back
            }
        };
        if let Some(delay) = control.admit(true) {
            deliver(&control, &back, None, buf[..n].to_vec(), delay).await;
        }
    }
}

/// Carry the target's replies to one client.
async fn reply(
    back: Arc<UdpSocket>,
    front: Arc<UdpSocket>,
    client: SocketAddr,
    control: Arc<Control>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let n = match back.recv(&mut buf).await {
            Ok(n) => n,
            // An ICMP "port unreachable" (the target was not listening yet) surfaces on the
            // connected socket as a refusal; like a network, the path stays.
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => continue,
            Err(_) => return,
        };
        if let Some(delay) = control.admit(false) {
            deliver(&control, &front, Some(client), buf[..n].to_vec(), delay).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo() -> SocketAddr {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = socket.recv_from(&mut buf).await {
                let _ = socket.send_to(&buf[..n], from).await;
            }
        });
        addr
    }

    async fn round_trip(client: &UdpSocket, payload: &[u8]) -> Option<Vec<u8>> {
        client.send(payload).await.unwrap();
        let mut buf = [0u8; 2048];
        match tokio::time::timeout(Duration::from_millis(300), client.recv(&mut buf)).await {
            Ok(Ok(n)) => Some(buf[..n].to_vec()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn forwards_both_ways_and_a_cut_link_carries_nothing() {
        let link = UdpLink::start("127.0.0.1:0".parse().unwrap(), echo().await, 1)
            .await
            .unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(link.local_addr()).await.unwrap();
        assert_eq!(
            round_trip(&client, b"ping").await.as_deref(),
            Some(&b"ping"[..])
        );
        link.set_up(false);
        assert_eq!(round_trip(&client, b"lost").await, None);
        assert!(link.dropped() >= 1);
        link.set_up(true);
        assert_eq!(
            round_trip(&client, b"back").await.as_deref(),
            Some(&b"back"[..])
        );
    }

    /// A datagram that reached the target before it listened (refused) must not break the
    /// path: the replies once it listens still come back (a relay dialed through the link
    /// before its peer was up never connected before).
    #[tokio::test]
    async fn a_target_that_starts_late_is_reached() {
        let port = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let target = port.local_addr().unwrap();
        drop(port);
        let link = UdpLink::start("127.0.0.1:0".parse().unwrap(), target, 1)
            .await
            .unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(link.local_addr()).await.unwrap();
        assert_eq!(round_trip(&client, b"early").await, None);
        let socket = UdpSocket::bind(target).await.unwrap();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = socket.recv_from(&mut buf).await {
                let _ = socket.send_to(&buf[..n], from).await;
            }
        });
        assert_eq!(
            round_trip(&client, b"late").await.as_deref(),
            Some(&b"late"[..])
        );
    }

    #[tokio::test(start_paused = true)]
    async fn delay_and_loss_shape_each_direction() {
        let link = UdpLink::start("127.0.0.1:0".parse().unwrap(), echo().await, 7)
            .await
            .unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(link.local_addr()).await.unwrap();
        let delay = Duration::from_millis(40);
        link.shape(Shape { delay, loss: 0.0 }, Shape { delay, loss: 0.0 });
        let started = tokio::time::Instant::now();
        client.send(b"slow").await.unwrap();
        let mut buf = [0u8; 16];
        let n = client.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"slow");
        assert!(started.elapsed() >= 2 * delay, "{:?}", started.elapsed());

        link.shape(
            Shape {
                delay: Duration::ZERO,
                loss: 1.0,
            },
            Shape::default(),
        );
        client.send(b"gone").await.unwrap();
        let lost = tokio::time::timeout(Duration::from_millis(200), client.recv(&mut buf)).await;
        assert!(lost.is_err(), "a datagram got through a link with loss 1");
    }
}
