//! A TCP relay that keeps every byte a client sends through it: put in
//! front of the Baseten fake, it shows everything the client told the
//! platform (headers, bodies, uploads), so a test can prove a secret was
//! never among it. The bytes are relayed unchanged, `Host` included, so
//! the fake serves the client exactly as it would directly.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A running relay. Stops when dropped.
pub struct Tap {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<u8>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Tap {
    /// Relays a free loopback port to `upstream`.
    pub fn start_in_background(upstream: SocketAddr) -> anyhow::Result<Tap> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("tap")
            .build()
            .context("while starting the tap's runtime")?;
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .context("while binding the tap")?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        runtime.spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let kept = kept.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    relay(client, server, kept).await;
                });
            }
        });
        Ok(Tap {
            addr,
            seen,
            runtime: Some(runtime),
        })
    }

    /// `http://127.0.0.1:PORT`: use it wherever the fake's URL would go.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Everything clients sent so far, every connection appended.
    pub fn seen(&self) -> Vec<u8> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether `needle` occurs in what clients sent.
    pub fn saw(&self, needle: &str) -> bool {
        let hay = self.seen();
        let needle = needle.as_bytes();
        !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn relay(client: TcpStream, server: TcpStream, kept: Arc<Mutex<Vec<u8>>>) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            kept.lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(&buf[..n]);
            if sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = sw.shutdown().await;
    };
    let down = async move {
        let _ = tokio::io::copy(&mut sr, &mut cw).await;
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}
