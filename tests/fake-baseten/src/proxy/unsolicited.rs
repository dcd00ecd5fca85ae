//! A TCP relay that speaks on idle connections: each connection is relayed
//! to the upstream byte for byte, and once it has been idle for a while
//! (quiet both ways, with no request waiting for its answer: nothing sent
//! yet, or the server spoke last), the relay writes an answer to the
//! client that no request asked for, once per connection.
//!
//! Real servers and middleboxes do this: a server closing an idle
//! keep-alive connection may first send `408 Request Timeout` (RFC 9110
//! §15.5.9), and a broken gateway may send a stale or second answer. A
//! client that pools connections must not read such bytes as the answer to
//! the next request it sends there; this relay is how tests prove it.
//!
//! ```no_run
//! # async fn demo(fake: std::net::SocketAddr) -> anyhow::Result<()> {
//! use fake_baseten::proxy::unsolicited::Unsolicited;
//! use std::time::Duration;
//! let relay = Unsolicited::start(
//!     fake,
//!     Duration::from_millis(100),
//!     b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec(),
//! )
//! .await?;
//! let s3_endpoint = relay.url(); // give this to the client
//! # let _ = s3_endpoint; Ok(()) }
//! ```

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio::time::Instant;

/// A running relay; it stops when dropped.
pub struct Unsolicited {
    addr: SocketAddr,
    spoken: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
    /// Its own runtime, when started for a blocking test.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Unsolicited {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Unsolicited {
    /// Listens on a free loopback port and relays to `upstream`, writing
    /// `answer` to a connection quiet for `after`.
    pub async fn start(
        upstream: SocketAddr,
        after: Duration,
        answer: Vec<u8>,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .context("while binding the unsolicited-answer relay")?;
        let addr = listener.local_addr()?;
        let spoken = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&spoken);
        let answer: Arc<[u8]> = answer.into();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (count, answer) = (Arc::clone(&count), Arc::clone(&answer));
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        relay(client, server, after, &answer, &count).await;
                    }
                });
            }
        });
        Ok(Self {
            addr,
            spoken,
            task,
            runtime: None,
        })
    }

    /// [`Unsolicited::start`] on a runtime of its own, for tests that are
    /// not async.
    pub fn start_in_background(
        upstream: SocketAddr,
        after: Duration,
        answer: Vec<u8>,
    ) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("unsolicited")
            .build()
            .context("while starting the relay's runtime")?;
        let mut relay = runtime.block_on(Self::start(upstream, after, answer))?;
        relay.runtime = Some(runtime);
        Ok(relay)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections the relay spoke on unasked.
    pub fn spoken(&self) -> u64 {
        self.spoken.load(Ordering::SeqCst)
    }
}

/// Relays `client` ⇄ `server` until either side closes; once, when no byte
/// went either way for `after` and the client was not the last to send,
/// writes `answer` to the client.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    after: Duration,
    answer: &[u8],
    spoken: &AtomicU64,
) {
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (mut client_read, client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let client_write = Arc::new(Mutex::new(client_write));
    // When a byte last went either way, and whether the client sent it.
    let last = Arc::new(std::sync::Mutex::new((Instant::now(), false)));
    let touch = |last: &std::sync::Mutex<(Instant, bool)>, client: bool| {
        *last.lock().unwrap_or_else(|e| e.into_inner()) = (Instant::now(), client);
    };
    let up = {
        let last = Arc::clone(&last);
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n @ 1..) = client_read.read(&mut buf).await {
                touch(&last, true);
                if server_write.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    };
    let down = {
        let (last, client_write) = (Arc::clone(&last), Arc::clone(&client_write));
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n @ 1..) = server_read.read(&mut buf).await {
                touch(&last, false);
                if client_write
                    .lock()
                    .await
                    .write_all(&buf[..n])
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }
    };
    let speak = async {
        loop {
            let (quiet_since, client_last) = *last.lock().unwrap_or_else(|e| e.into_inner());
            if !client_last && quiet_since.elapsed() >= after {
                let _ = client_write.lock().await.write_all(answer).await;
                spoken.fetch_add(1, Ordering::SeqCst);
                return std::future::pending::<()>().await;
            }
            // A request waits for its answer: look again a little later.
            let wake = (quiet_since + after).max(Instant::now() + Duration::from_millis(10));
            tokio::time::sleep_until(wake).await;
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
        () = speak => {}
    }
}
