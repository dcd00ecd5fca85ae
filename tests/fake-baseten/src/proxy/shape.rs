//! A shaped link: a TCP relay that makes loopback behave like a WAN, with a
//! round-trip delay, a rate cap per connection and a cap on the total rate,
//! so upload concurrency and part size can be measured and tested where
//! one loopback connection would otherwise be as fast as memory.
//!
//! No kernel shaping exists on the machines this runs on, so the link is
//! shaped in userspace: each direction of each connection is a delay line
//! (bytes read at `t` are written at `t + rtt/2`) drained through two token
//! buckets, the connection's own and one shared by every connection in that
//! direction. Nothing is random: the same traffic takes the same time.
//!
//! The relay holds at most about one bandwidth-delay product per direction
//! of a connection (it stops reading when its delay line is full), so a
//! client's socket sees the back-pressure a real link gives, and the relay
//! stays small whatever is sent through it.
//!
//! ```text
//! fake-baseten --scenario S --shaped-link 'rtt=30ms,conn=40MB/s,total=400MB/s'
//! ```
//!
//! `open=N` makes a new connection wait N round trips before it carries a
//! byte, as a cloud runner's path pays for TCP's and TLS's handshakes
//! (loopback TLS costs none of the delay a real one does).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Bytes read from a socket per step.
const READ_BYTES: usize = 64 * 1024;
/// Bytes written per token-bucket decision: small enough that a rate cap
/// is smooth at the millisecond scale timers work at.
const WRITE_SLICE_BYTES: usize = 16 * 1024;
/// What a delay line holds at least, whatever the rates.
const MIN_WINDOW_BYTES: u64 = 256 * 1024;
/// A delay line's size when nothing caps the rate.
const UNCAPPED_WINDOW_BYTES: u64 = 4 * 1024 * 1024;
/// How far ahead of its rate a bucket may run after an idle moment.
const BURST_SECS: f64 = 0.002;

/// The link's shape. Rates are in bytes per second, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Shape {
    pub rtt: Duration,
    /// Each connection's cap, each way.
    pub conn_bytes_per_sec: Option<u64>,
    /// The cap on all connections together, each way.
    pub total_bytes_per_sec: Option<u64>,
    /// Round trips a new connection waits before it carries a byte.
    pub open_round_trips: u32,
}

impl Shape {
    /// Parses `rtt=30ms,conn=40MB/s,total=400MB/s,open=2` (any subset; `ms` or
    /// `s`; rates in `B/s`, `kB/s`, `MB/s`, `GB/s` (powers of 1000) or
    /// `KiB/s`, `MiB/s`, `GiB/s`).
    pub fn parse(spec: &str) -> anyhow::Result<Shape> {
        let mut shape = Shape::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((name, value)) = item.split_once('=') else {
                bail!(
                    "shaped link: expected name=value, got {item:?} (e.g. rtt=30ms,conn=40MB/s,total=400MB/s)"
                );
            };
            match name.trim() {
                "rtt" => shape.rtt = parse_duration(value.trim())?,
                "conn" => shape.conn_bytes_per_sec = Some(parse_rate(value.trim())?),
                "total" => shape.total_bytes_per_sec = Some(parse_rate(value.trim())?),
                "open" => {
                    shape.open_round_trips = value.trim().parse().ok().filter(|n| *n <= 10).with_context(|| {
                        format!("shaped link: open={value:?} must be a whole number of round trips, at most 10")
                    })?;
                }
                other => {
                    bail!("shaped link: unknown setting {other:?}; known: rtt, conn, total, open")
                }
            }
        }
        Ok(shape)
    }

    /// Bytes a delay line may hold: twice what the link carries in one
    /// direction's delay, so the relay itself never caps the rate.
    fn window_bytes(&self) -> u64 {
        let rate = self.conn_bytes_per_sec.or(self.total_bytes_per_sec);
        match rate {
            None => UNCAPPED_WINDOW_BYTES,
            Some(r) => {
                let bdp = r as f64 * self.rtt.as_secs_f64() / 2.0;
                (2.0 * bdp) as u64 + MIN_WINDOW_BYTES
            }
        }
    }
}

fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        bail!("shaped link: a duration needs a unit (ms or s), got {text:?}");
    };
    let value: f64 = number
        .trim()
        .parse()
        .with_context(|| format!("shaped link: {text:?} is not a duration"))?;
    if !value.is_finite() || value < 0.0 || value > 60.0 / scale {
        bail!("shaped link: duration {text:?} must be between 0 and 60 s");
    }
    Ok(Duration::from_secs_f64(value * scale))
}

fn parse_rate(text: &str) -> anyhow::Result<u64> {
    let Some(amount) = text.strip_suffix("/s") else {
        bail!("shaped link: a rate ends in /s (e.g. 40MB/s), got {text:?}");
    };
    let units: [(&str, f64); 7] = [
        ("GiB", 1024.0 * 1024.0 * 1024.0),
        ("MiB", 1024.0 * 1024.0),
        ("KiB", 1024.0),
        ("GB", 1e9),
        ("MB", 1e6),
        ("kB", 1e3),
        ("B", 1.0),
    ];
    for (unit, scale) in units {
        if let Some(number) = amount.strip_suffix(unit) {
            let value: f64 = number
                .trim()
                .parse()
                .with_context(|| format!("shaped link: {text:?} is not a rate"))?;
            let bytes = value * scale;
            if !bytes.is_finite() || bytes < 1024.0 {
                bail!("shaped link: rate {text:?} must be at least 1 KiB/s");
            }
            return Ok(bytes as u64);
        }
    }
    bail!(
        "shaped link: unknown rate unit in {text:?}; use B/s, kB/s, MB/s, GB/s, KiB/s, MiB/s or GiB/s"
    )
}

/// A token bucket that lends: a sender takes what it sends at once and
/// waits until the bucket is back at zero, so senders are served in the
/// order they asked and the long-run rate is exact even though timers only
/// wake up every millisecond or so.
struct Bucket {
    bytes_per_sec: f64,
    level: f64,
    at: Instant,
}

impl Bucket {
    fn new(bytes_per_sec: u64, now: Instant) -> Self {
        Self {
            bytes_per_sec: bytes_per_sec as f64,
            level: 0.0,
            at: now,
        }
    }

    /// Takes `n` bytes' worth; returns how long the sender must wait.
    fn take(&mut self, n: usize, now: Instant) -> Duration {
        let burst = (self.bytes_per_sec * BURST_SECS).max(WRITE_SLICE_BYTES as f64);
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * self.bytes_per_sec;
        self.level = (self.level + refill).min(burst) - n as f64;
        self.at = now;
        if self.level >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.level / self.bytes_per_sec)
        }
    }
}

type SharedBucket = Arc<Mutex<Bucket>>;

/// What the link has carried, for tests and benchmarks.
#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    open: AtomicUsize,
    peak_open: AtomicUsize,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

/// A running shaped link. Stops accepting when dropped.
pub struct ShapedLink {
    addr: SocketAddr,
    shape: Shape,
    counters: Arc<Counters>,
    shutdown: watch::Sender<bool>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl ShapedLink {
    /// Starts a link on `127.0.0.1` (a free port) relaying to `upstream`
    /// (the fake's or the fault proxy's address).
    pub async fn start(upstream: SocketAddr, shape: Shape) -> anyhow::Result<ShapedLink> {
        Self::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST), upstream, shape).await
    }

    pub async fn start_on(
        host: IpAddr,
        upstream: SocketAddr,
        shape: Shape,
    ) -> anyhow::Result<ShapedLink> {
        let listener = TcpListener::bind(SocketAddr::new(host, 0))
            .await
            .context("while binding the shaped link")?;
        let addr = listener.local_addr()?;
        let counters = Arc::new(Counters::default());
        let now = Instant::now();
        let totals = [(); 2].map(|()| {
            shape
                .total_bytes_per_sec
                .map(|r| Arc::new(Mutex::new(Bucket::new(r, now))))
        });
        let (shutdown, rx) = watch::channel(false);
        tokio::spawn(accept(
            listener,
            upstream,
            shape,
            totals,
            counters.clone(),
            rx,
        ));
        Ok(ShapedLink {
            addr,
            shape,
            counters,
            shutdown,
            runtime: None,
        })
    }

    /// Starts on a runtime of its own, for tests that are not async.
    pub fn start_in_background(upstream: SocketAddr, shape: Shape) -> anyhow::Result<ShapedLink> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("shaped-link")
            .build()
            .context("while starting the shaped link's runtime")?;
        let mut link = runtime.block_on(Self::start(upstream, shape))?;
        link.runtime = Some(runtime);
        Ok(link)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: give it to a client as the fake's (or the
    /// proxy's) base URL; the `Host` header passes through untouched.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.counters.accepted.load(Ordering::SeqCst)
    }

    /// The most connections that were open at once.
    pub fn peak_connections(&self) -> usize {
        self.counters.peak_open.load(Ordering::SeqCst)
    }

    /// Bytes carried client → upstream and upstream → client.
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.counters.bytes_up.load(Ordering::SeqCst),
            self.counters.bytes_down.load(Ordering::SeqCst),
        )
    }
}

impl Drop for ShapedLink {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    shape: Shape,
    totals: [Option<SharedBucket>; 2],
    counters: Arc<Counters>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let client = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        counters.accepted.fetch_add(1, Ordering::SeqCst);
        let open = counters.open.fetch_add(1, Ordering::SeqCst) + 1;
        counters.peak_open.fetch_max(open, Ordering::SeqCst);
        let (totals, counters) = (totals.clone(), counters.clone());
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            relay(client, upstream, shape, totals, &counters, shutdown).await;
            counters.open.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// One connection: both directions shaped until both have ended (or the
/// link stops).
async fn relay(
    client: TcpStream,
    upstream: SocketAddr,
    shape: Shape,
    [total_up, total_down]: [Option<SharedBucket>; 2],
    counters: &Counters,
    mut shutdown: watch::Receiver<bool>,
) {
    // The handshakes' round trips: nothing moves either way meanwhile.
    tokio::time::sleep(shape.rtt * shape.open_round_trips).await;
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = direction(
        client_read,
        server_write,
        shape,
        total_up,
        &counters.bytes_up,
    );
    let down = direction(
        server_read,
        client_write,
        shape,
        total_down,
        &counters.bytes_down,
    );
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = shutdown.changed() => {}
    }
}

/// One direction: a reader fills the delay line as long as it has room, a
/// writer drains it no earlier than each piece's due time and no faster
/// than the buckets allow. The end of the stream travels the line too.
async fn direction(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    shape: Shape,
    total: Option<SharedBucket>,
    carried: &AtomicU64,
) {
    let one_way = shape.rtt / 2;
    let slots = shape.window_bytes().div_ceil(READ_BYTES as u64).max(2) as usize;
    let (tx, mut rx) = mpsc::channel::<(Instant, Bytes)>(slots);
    let reader = async move {
        loop {
            let mut buffer = BytesMut::with_capacity(READ_BYTES);
            let n = from.read_buf(&mut buffer).await.unwrap_or(0);
            // An empty piece is the end of the stream (or a failed read).
            if tx
                .send((Instant::now() + one_way, buffer.freeze()))
                .await
                .is_err()
                || n == 0
            {
                return;
            }
        }
    };
    let writer = async move {
        let mut own = shape
            .conn_bytes_per_sec
            .map(|r| Bucket::new(r, Instant::now()));
        while let Some((due, piece)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if piece.is_empty() {
                let _ = to.shutdown().await;
                return;
            }
            for slice in piece.chunks(WRITE_SLICE_BYTES) {
                let now = Instant::now();
                let mut wait = own
                    .as_mut()
                    .map_or(Duration::ZERO, |b| b.take(slice.len(), now));
                if let Some(total) = &total {
                    let shared = total
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take(slice.len(), now);
                    wait = wait.max(shared);
                }
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                if to.write_all(slice).await.is_err() {
                    return;
                }
                carried.fetch_add(slice.len() as u64, Ordering::Relaxed);
            }
        }
    };
    tokio::join!(reader, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_with_units_and_refuse_nonsense() {
        assert_eq!(
            Shape::parse("rtt=30ms,conn=40MB/s,total=400MB/s").unwrap(),
            Shape {
                rtt: Duration::from_millis(30),
                conn_bytes_per_sec: Some(40_000_000),
                total_bytes_per_sec: Some(400_000_000),
                open_round_trips: 0,
            }
        );
        assert_eq!(Shape::parse("rtt=60ms,open=2").unwrap().open_round_trips, 2);
        assert!(Shape::parse("open=two").is_err());
        assert_eq!(
            Shape::parse("conn=2MiB/s").unwrap().conn_bytes_per_sec,
            Some(2 * 1024 * 1024)
        );
        assert_eq!(
            Shape::parse("rtt=0.5s").unwrap().rtt,
            Duration::from_millis(500)
        );
        for bad in [
            "rtt=30",
            "conn=40MB",
            "conn=1B/s",
            "speed=1MB/s",
            "rtt",
            "rtt=-1ms",
        ] {
            assert!(Shape::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bucket_lends_and_keeps_the_long_run_rate() {
        let start = Instant::now();
        let mut bucket = Bucket::new(1_000_000, start);
        // 100 slices of 16 KiB taken at once from an empty bucket: the last
        // waits for all of them.
        let mut wait = Duration::ZERO;
        for _ in 0..100 {
            wait = bucket.take(16 * 1024, start);
        }
        let expected = 100.0 * 16384.0 / 1e6;
        assert!((wait.as_secs_f64() - expected).abs() < 1e-6, "{wait:?}");
        // An idle second refills only the burst, not a second's worth.
        let later = start + wait + Duration::from_secs(1);
        assert_eq!(bucket.take(16 * 1024, later), Duration::ZERO);
        assert!(bucket.take(16 * 1024, later) > Duration::ZERO);
    }

    /// A sink upstream that counts what it receives, then answers its size.
    async fn counting_upstream() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    let mut total = 0u64;
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => total += n as u64,
                        }
                    }
                    let _ = s.write_all(total.to_string().as_bytes()).await;
                });
            }
        });
        addr
    }

    async fn send_through(link: SocketAddr, bytes: usize) -> (u64, Duration) {
        let started = Instant::now();
        let mut s = TcpStream::connect(link).await.unwrap();
        s.write_all(&vec![7u8; bytes]).await.unwrap();
        s.shutdown().await.unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).await.unwrap();
        (answer.parse().unwrap(), started.elapsed())
    }

    #[tokio::test]
    async fn one_connection_is_capped_and_delayed() {
        let upstream = counting_upstream().await;
        let shape = Shape::parse("rtt=100ms,conn=4MB/s").unwrap();
        let link = ShapedLink::start(upstream, shape).await.unwrap();
        let (got, took) = send_through(link.addr(), 2_000_000).await;
        assert_eq!(got, 2_000_000);
        // 2 MB at 4 MB/s is 0.5 s, plus a round trip for the answer. Only
        // the floor is the shaper's doing; a loaded machine may take longer.
        let expected = 0.5 + 0.1;
        assert!(took.as_secs_f64() >= expected * 0.95, "{took:?}");
        assert_eq!(link.bytes().0, 2_000_000);
    }

    #[tokio::test]
    async fn the_total_cap_is_shared_by_every_connection() {
        let upstream = counting_upstream().await;
        let shape = Shape::parse("rtt=10ms,conn=4MB/s,total=4MB/s").unwrap();
        let link = ShapedLink::start(upstream, shape).await.unwrap();
        let started = Instant::now();
        let sends: Vec<_> = (0..4)
            .map(|_| tokio::spawn(send_through(link.addr(), 500_000)))
            .collect();
        for s in sends {
            assert_eq!(s.await.unwrap().0, 500_000);
        }
        // Four connections share 4 MB/s: 2 MB take 0.5 s, not 0.125 s. Only
        // the floor is the cap's doing; a loaded machine may take longer.
        let took = started.elapsed().as_secs_f64();
        assert!(took >= 0.47, "{took}");
        assert_eq!(link.peak_connections(), 4);
    }
}
