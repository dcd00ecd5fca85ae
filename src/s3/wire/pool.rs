//! The idle connections kept per origin for the next request, and the
//! checks that keep a connection out of step from being reused.

use std::time::{Duration, Instant};

use super::Wire;
use super::conn::Conn;
use super::route::Origin;

/// Idle connections older than this are closed rather than reused: S3
/// drops idle connections after about 20 s, and a request on a connection
/// the server is closing costs an attempt.
const IDLE_MAX: Duration = Duration::from_secs(15);
/// Idle connections kept per origin: more than parts are ever in flight.
const IDLE_PER_ORIGIN_MAX: usize = 64;

impl Wire {
    /// How many idle connections `origin` has.
    pub(super) fn idle_count(&self, origin: &Origin) -> usize {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.get(origin).map_or(0, Vec::len)
    }

    /// An idle connection to `origin` that may carry a request: one that
    /// is not too old and received nothing while it sat in the pool. A
    /// byte that arrived then (an answer nobody asked for, a close, a
    /// reset) would be read as the answer to the next request, so such a
    /// connection is closed instead.
    pub(super) fn check_out(&self, origin: &Origin) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let conns = idle.get_mut(origin)?;
        while let Some(mut conn) = conns.pop() {
            if conn.idle_since.elapsed() >= IDLE_MAX {
                continue;
            }
            match conn.idle_news() {
                None => return Some(conn),
                Some(news) => {
                    tracing::debug!(host = %origin.host, "closing a pooled S3 connection that {news} while idle");
                }
            }
        }
        None
    }

    /// Keeps `conn` for the next request to `origin`, unless it holds
    /// bytes nobody asked for (it is out of step) or the pool is full.
    #[expect(
        clippy::disallowed_methods,
        reason = "when a connection went idle: the pool's reuse rule"
    )]
    pub(super) fn check_in(&self, origin: &Origin, mut conn: Conn) {
        if !conn.unread.is_empty() {
            return;
        }
        conn.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let conns = idle.entry(origin.clone()).or_default();
        conns.retain(|c| c.idle_since.elapsed() < IDLE_MAX);
        if conns.len() < IDLE_PER_ORIGIN_MAX {
            conns.push(conn);
        }
    }
}
