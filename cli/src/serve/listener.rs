//! The HTTP listener of `hookline serve`, defended against slow and idle
//! clients: a small accept loop over hyper's HTTP/1 connection (axum::serve
//! sets no timeouts and no connection cap).
//!
//! Every connection is in one of three phases, tracked by a wrapper around
//! its socket and by the service:
//! - idle: waiting for the first byte of a request (after accept, or after
//!   the last response); closed after the idle timeout;
//! - head: a request has begun but its header is not complete; closed after
//!   the header timeout, counted from the first byte, so trickling one byte
//!   at a time does not extend it;
//! - busy: the header is complete and the handler runs; the handler bounds
//!   reading the body with the body timeout (then answers 408 and closes).
//!
//! One reaper task checks every connection a few times per timeout. At most
//! `max_connections` are open: at the cap, a new connection takes the place
//! of a waiting one (no request in progress), which is closed, as nginx
//! reuses idle keep-alive connections. Connections that never completed a
//! request (slow or idle clients) go first, oldest first; keep-alive
//! connections of clients that did are closed only when there are none. A
//! connection is not replaced within [`MIN_EVICT_AGE_MS`] of its last change
//! (accepted, first byte, last response), so a flood of new connections
//! cannot churn through the open ones; when no connection can be replaced,
//! the new one is refused at once with a 503. The accept loop never waits
//! for a free place, so real clients are not starved.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

/// The listener's limits (flags of `hookline serve`). The body timeout is
/// the handler's: only it knows when it reads the body.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// From the first byte of a request to the end of its header.
    pub header_timeout: Duration,
    /// How long a connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
}

/// How long shutdown waits for requests in progress before closing.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// At most one warning per this long about refused connections.
const WARN_EVERY_MS: u64 = 10_000;
/// A connection is not closed to make room within this long of its last
/// change of phase.
const MIN_EVICT_AGE_MS: u64 = 1_000;

const IDLE: u64 = 0;
const HEAD: u64 = 1;
const BUSY: u64 = 2;

/// One open connection: its phase and since when (ms since the listener
/// started, packed in one word), and how to close it.
struct Conn {
    state: AtomicU64,
    /// Has completed a request: a keep-alive client, kept longer at the cap.
    served: AtomicBool,
    kill: Notify,
    peer: SocketAddr,
}

impl Conn {
    fn set(&self, phase: u64, now_ms: u64) {
        self.state.store(now_ms << 2 | phase, Relaxed);
    }

    fn get(&self) -> (u64, u64) {
        let s = self.state.load(Relaxed);
        (s & 3, s >> 2)
    }
}

/// Every open connection, for the reaper and the cap.
struct Registry {
    epoch: Instant,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    refused: AtomicU64,
    last_warn_ms: AtomicU64,
}

impl Registry {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn insert(&self, peer: SocketAddr) -> (u64, Arc<Conn>) {
        let id = self.next_id.fetch_add(1, Relaxed);
        let conn = Arc::new(Conn {
            state: AtomicU64::new(self.now_ms() << 2 | IDLE),
            served: AtomicBool::new(false),
            kill: Notify::new(),
            peer,
        });
        self.conns.lock().expect("registry lock").insert(id, conn.clone());
        (id, conn)
    }

    fn remove(&self, id: u64) {
        self.conns.lock().expect("registry lock").remove(&id);
    }

    fn len(&self) -> usize {
        self.conns.lock().expect("registry lock").len()
    }

    /// Below `cap` after closing, if needed, a waiting connection
    /// ([`Self::evict`]); false when none can be closed.
    fn make_room(&self, cap: usize) -> bool {
        let mut g = self.conns.lock().expect("registry lock");
        if g.len() < cap {
            return true;
        }
        self.evict(&mut g, "the connection limit is reached")
    }

    /// Closes one connection without a request in progress and unchanged
    /// for [`MIN_EVICT_AGE_MS`]: one that never completed a request before a
    /// keep-alive one, the longest waiting first. False when there is none.
    fn evict(&self, g: &mut HashMap<u64, Arc<Conn>>, why: &str) -> bool {
        let now = self.now_ms();
        let victim = g
            .iter()
            .filter_map(|(id, c)| {
                let (phase, since) = c.get();
                (phase != BUSY && now.saturating_sub(since) >= MIN_EVICT_AGE_MS)
                    .then(|| (c.served.load(Relaxed), since, *id))
            })
            .min()
            .map(|(_, _, id)| id);
        match victim.and_then(|id| g.remove(&id)) {
            Some(c) => {
                tracing::debug!(peer = %c.peer, reason = why, "closing the longest-waiting connection without a request in progress");
                c.kill.notify_one();
                true
            }
            None => false,
        }
    }

    /// Counts one refused (or unaccepted) connection; returns how many were
    /// refused since the last warning when it is time for another (at most
    /// one per [`WARN_EVERY_MS`]).
    fn refused(&self) -> Option<u64> {
        self.refused.fetch_add(1, Relaxed);
        let now = self.now_ms().max(1);
        let last = self.last_warn_ms.load(Relaxed);
        if (last == 0 || now >= last + WARN_EVERY_MS)
            && self.last_warn_ms.compare_exchange(last, now, Relaxed, Relaxed).is_ok()
        {
            return Some(self.refused.swap(0, Relaxed));
        }
        None
    }
}

/// The socket, noting the first byte of each request (idle → head).
struct Tracked {
    inner: TcpStream,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
}

impl AsyncRead for Tracked {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before && this.conn.get().0 == IDLE {
            this.conn.set(HEAD, this.registry.now_ms());
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Serves `handler` on `listener` within `limits` until `shutdown`
/// completes; then stops accepting, lets requests in progress finish (at
/// most [`SHUTDOWN_GRACE`]) and returns.
pub async fn serve<H, F>(
    listener: TcpListener,
    limits: Limits,
    handler: H,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let registry = Arc::new(Registry {
        epoch: Instant::now(),
        next_id: AtomicU64::new(0),
        conns: Mutex::new(HashMap::new()),
        refused: AtomicU64::new(0),
        last_warn_ms: AtomicU64::new(0),
    });
    let reaper = tokio::spawn(reap(registry.clone(), limits));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    // The header timeout is ours (hyper's would also close idle keep-alive
    // connections after it, leaving no separate idle timeout).
    http.header_read_timeout(None).keep_alive(true);
    let cap = limits.max_connections.max(1);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    accept_failed(&registry, e).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        if !registry.make_room(cap) {
            if let Some(refused) = registry.refused() {
                tracing::warn!(
                    open = cap,
                    refused,
                    "connection limit reached and no connection can make room: refusing new connections (503)"
                );
            }
            refuse(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        let (id, conn) = registry.insert(peer);
        let io = TokioIo::new(Tracked { inner: stream, conn: conn.clone(), registry: registry.clone() });
        let (handler, reg, c, mut stop) = (handler.clone(), registry.clone(), conn.clone(), stop_rx.clone());
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let (reg, c) = (reg.clone(), c.clone());
            c.set(BUSY, reg.now_ms());
            let res = handler(req);
            async move {
                let res = res.await;
                c.served.store(true, Relaxed);
                c.set(IDLE, reg.now_ms());
                Ok::<_, std::convert::Infallible>(res)
            }
        });
        let served = http.serve_connection(io, service);
        let registry = registry.clone();
        tokio::spawn(async move {
            tokio::pin!(served);
            let mut draining = false;
            loop {
                tokio::select! {
                    r = served.as_mut() => {
                        if let Err(e) = r {
                            tracing::debug!(peer = %conn.peer, error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    // Dropping the connection closes the socket.
                    _ = conn.kill.notified() => break,
                    _ = stop.changed(), if !draining => {
                        draining = true;
                        served.as_mut().graceful_shutdown();
                    }
                }
            }
            registry.remove(id);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let deadline = Instant::now() + SHUTDOWN_GRACE;
    while registry.len() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    reaper.abort();
    Ok(())
}

/// Closes connections past their phase's timeout, a few times per timeout.
async fn reap(registry: Arc<Registry>, limits: Limits) {
    let (header_ms, idle_ms) = (limits.header_timeout.as_millis() as u64, limits.idle_timeout.as_millis() as u64);
    let tick =
        (limits.header_timeout.min(limits.idle_timeout) / 8).clamp(Duration::from_millis(25), Duration::from_secs(1));
    let mut every = tokio::time::interval(tick);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        every.tick().await;
        let now = registry.now_ms();
        let mut g = registry.conns.lock().expect("registry lock");
        g.retain(|_, c| {
            let (phase, since) = c.get();
            let (limit, what) = match phase {
                IDLE => (idle_ms, "idle timeout: no request"),
                HEAD => (header_ms, "header timeout: request header incomplete"),
                _ => return true,
            };
            if now.saturating_sub(since) < limit {
                return true;
            }
            tracing::debug!(peer = %c.peer, reason = what, "closing connection");
            c.kill.notify_one();
            false
        });
    }
}

/// An accept error: out of file descriptors frees one (a waiting
/// connection, as at the cap) and retries at once;
/// connection errors are skipped; anything else is retried after a pause.
async fn accept_failed(registry: &Registry, e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused
    ) {
        return;
    }
    if is_out_of_files(&e) {
        let freed = registry.evict(&mut registry.conns.lock().expect("registry lock"), "out of file descriptors");
        if let Some(failed) = registry.refused() {
            tracing::warn!(error = %e, failed, open = registry.len(), "accept failed: out of file descriptors; closing the longest-waiting connections without a request in progress");
        }
        tokio::time::sleep(Duration::from_millis(if freed { 1 } else { 50 })).await;
        return;
    }
    tracing::warn!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[cfg(unix)]
fn is_out_of_files(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

#[cfg(not(unix))]
fn is_out_of_files(_: &io::Error) -> bool {
    false
}

/// Answers 503 without reading the request (best effort: never waits) and
/// closes.
fn refuse(stream: TcpStream) {
    const BODY: &str = r#"{"error":{"code":"too_many_connections","message":"the server has too many open connections; retry shortly"}}"#;
    let msg = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = stream.try_write(msg.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        Registry {
            epoch: Instant::now() - Duration::from_secs(100),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
            refused: AtomicU64::new(0),
            last_warn_ms: AtomicU64::new(0),
        }
    }

    fn add(r: &Registry, phase: u64, age_ms: u64, served: bool) -> u64 {
        let (id, c) = r.insert("127.0.0.1:1".parse().unwrap());
        c.set(phase, r.now_ms() - age_ms);
        c.served.store(served, Relaxed);
        id
    }

    fn left(r: &Registry) -> Vec<u64> {
        let mut ids: Vec<u64> = r.conns.lock().unwrap().keys().copied().collect();
        ids.sort();
        ids
    }

    #[test]
    fn at_the_cap_slow_and_idle_clients_go_before_keep_alive_ones_and_busy_or_young_ones_stay() {
        let r = registry();
        let keep_alive = add(&r, IDLE, 50_000, true);
        let busy = add(&r, BUSY, 90_000, false);
        let slow = add(&r, HEAD, 5_000, false);
        let quiet = add(&r, IDLE, 8_000, false);
        let young = add(&r, IDLE, 10, false);
        assert!(r.make_room(10), "below the cap nothing is closed");
        assert_eq!(left(&r).len(), 5);
        // Never-served first, the longest waiting first; then keep-alive ones.
        assert!(r.make_room(5));
        assert_eq!(left(&r), vec![keep_alive, busy, slow, young]);
        assert!(r.make_room(4));
        assert_eq!(left(&r), vec![keep_alive, busy, young]);
        assert!(r.make_room(3));
        assert_eq!(left(&r), vec![busy, young]);
        // A request in progress, or a connection in its first second, stays.
        assert!(!r.make_room(2));
        assert_eq!(left(&r), vec![busy, young]);
        let _ = quiet;
    }
}
