//! A scriptable webhook receiver: records every request it gets and answers
//! according to the behaviour set for its path.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// How the receiver answers requests to one path.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// 200, echoing verification challenges.
    Ok,
    /// Answer the first `n` deliveries with `status`, then 200.
    FailFirst(usize, u16),
    /// Sleep `delay` before answering the first `n` deliveries, then 200.
    SlowFirst(usize, Duration),
    /// Always `status`.
    Always(u16),
    /// Always `status`, with this response body (bytes, as sent).
    AlwaysWithBody(u16, Vec<u8>),
    /// 200 to verification without echoing the challenge (handshake fails).
    NoEcho,
    /// `status` with a `Retry-After` header of `secs`, for the first `n`.
    RetryAfterFirst(usize, u16, u64),
    /// `status` at random, with this probability (0 to 1); else 200.
    FailRandomly(f64, u16),
    /// `status` to deliveries whose body contains the text; else 200.
    FailMatching(String, u16),
    /// 200 with the request's body as the response body (verifications
    /// too): an endpoint that echoes what it gets.
    EchoBody,
    /// 200 with the request's headers as a JSON object (verifications too).
    EchoHeaders,
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The path it was sent to.
    pub path: String,
    /// Its headers, lower-case names.
    pub headers: HashMap<String, String>,
    /// Its body bytes.
    pub body: Vec<u8>,
    /// When it arrived.
    pub at: std::time::Instant,
    /// The status it was answered with (200 for verifications).
    pub status: u16,
}

impl Delivery {
    /// A header value, or "".
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }

    /// Checks its Standard Webhooks signature against one secret, now (as
    /// a subscriber would: five minutes of tolerance).
    ///
    /// # Errors
    ///
    /// Why the signature does not verify.
    pub fn verify(&self, secret: &shared::signing::Secret) -> Result<(), shared::signing::VerifyError> {
        shared::signing::verify(
            std::slice::from_ref(secret),
            self.header("webhook-id"),
            self.header("webhook-timestamp"),
            self.header("webhook-signature"),
            &self.body,
            chrono::Utc::now().timestamp(),
            300,
        )
    }

    /// Whether it is signed by the secret `whsec_…`.
    pub fn signed_by(&self, secret: &str) -> bool {
        shared::signing::Secret::parse(secret).is_ok_and(|s| self.verify(&s).is_ok())
    }

    /// Is this the verification handshake?
    pub fn is_verification(&self) -> bool {
        self.header("hookline-event-type") == "hookline.verification"
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

#[derive(Default)]
struct Inner {
    behaviours: HashMap<String, Behaviour>,
    seen: HashMap<String, usize>,
    log: Vec<Delivery>,
    /// Deliveries being answered now, and the most at once, per path.
    open: HashMap<String, (usize, usize)>,
}

/// Counts a delivery as open on its path until dropped (also when the
/// client gives up and the handler is cancelled).
struct Open {
    inner: Arc<Mutex<Inner>>,
    path: String,
}

impl Open {
    fn new(inner: &Arc<Mutex<Inner>>, path: &str) -> Open {
        let mut g = inner.lock().unwrap();
        let (now, max) = g.open.entry(path.to_string()).or_default();
        *now += 1;
        *max = (*max).max(*now);
        Open { inner: inner.clone(), path: path.to_string() }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some((now, _)) = self.inner.lock().unwrap().open.get_mut(&self.path) {
            *now -= 1;
        }
    }
}

/// The receiver; clones share state.
#[derive(Clone)]
pub struct Receiver {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

impl Receiver {
    /// Starts a receiver on a free loopback port.
    pub async fn start() -> Receiver {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new().fallback(handle).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { addr, inner }
    }

    /// The URL of `path` on this receiver, with `behaviour`.
    pub fn url(&self, path: &str, behaviour: Behaviour) -> String {
        self.set(path, behaviour);
        format!("http://{}{}", self.addr, path)
    }

    /// Changes how `path` answers from now on.
    pub fn set(&self, path: &str, behaviour: Behaviour) {
        let mut g = self.inner.lock().unwrap();
        g.behaviours.insert(path.to_string(), behaviour);
        g.seen.remove(path);
    }

    /// Deliveries on `path` answered with a 2xx, in the order they arrived.
    pub fn successes(&self, path: &str) -> Vec<Delivery> {
        self.deliveries(path).into_iter().filter(|d| (200..300).contains(&d.status)).collect()
    }

    /// The distinct `webhook-id`s of the deliveries on `path`, sorted: the
    /// events it got, whatever came more than once (at-least-once).
    pub fn webhook_ids(&self, path: &str) -> Vec<String> {
        let mut ids: Vec<String> = self.deliveries(path).iter().map(|d| d.header("webhook-id").to_string()).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Deliveries (not verifications) received on `path`.
    pub fn deliveries(&self, path: &str) -> Vec<Delivery> {
        self.inner.lock().unwrap().log.iter().filter(|d| d.path == path && !d.is_verification()).cloned().collect()
    }

    /// The most deliveries `path` was answering at one time.
    pub fn max_concurrent(&self, path: &str) -> usize {
        self.inner.lock().unwrap().open.get(path).map_or(0, |(_, max)| *max)
    }

    /// Every request received on `path`, verifications included.
    pub fn requests(&self, path: &str) -> Vec<Delivery> {
        self.inner.lock().unwrap().log.iter().filter(|d| d.path == path).cloned().collect()
    }
}

async fn handle(State(inner): State<Arc<Mutex<Inner>>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_string();
    let mut d = Delivery {
        path: path.clone(),
        headers: headers.iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())).collect(),
        body: body.to_vec(),
        at: std::time::Instant::now(),
        status: 200,
    };
    let verification = d.is_verification();
    let challenge = d.json()["challenge"].clone();
    let (behaviour, n, status) = {
        let mut g = inner.lock().unwrap();
        let b = g.behaviours.get(&path).cloned().unwrap_or(Behaviour::Ok);
        let n = if verification {
            0
        } else {
            let c = g.seen.entry(path.clone()).or_insert(0);
            *c += 1;
            *c
        };
        // The status is decided before the delivery is logged, so the log
        // says how each was answered.
        let status = match &b {
            _ if verification => 200,
            Behaviour::FailFirst(k, s) | Behaviour::RetryAfterFirst(k, s, _) if n <= *k => *s,
            Behaviour::Always(s) | Behaviour::AlwaysWithBody(s, _) => *s,
            Behaviour::FailRandomly(p, s) if rand::random::<f64>() < *p => *s,
            Behaviour::FailMatching(text, s) if String::from_utf8_lossy(&d.body).contains(text.as_str()) => *s,
            _ => 200,
        };
        d.status = status;
        g.log.push(d);
        (b, n, status)
    };
    if let Behaviour::EchoBody = behaviour {
        return (StatusCode::OK, [("content-type", "application/json")], body).into_response();
    }
    if let Behaviour::EchoHeaders = behaviour {
        let map: serde_json::Map<String, serde_json::Value> =
            headers.iter().map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").into())).collect();
        return (StatusCode::OK, axum::Json(serde_json::Value::Object(map))).into_response();
    }
    if verification {
        return match behaviour {
            Behaviour::NoEcho => (StatusCode::OK, "ok").into_response(),
            _ => (StatusCode::OK, axum::Json(serde_json::json!({"challenge": challenge}))).into_response(),
        };
    }
    let status_code = status;
    let status = |s: u16| StatusCode::from_u16(s).unwrap();
    let _open = Open::new(&inner, &path);
    match behaviour {
        Behaviour::Ok | Behaviour::NoEcho | Behaviour::EchoBody | Behaviour::EchoHeaders => {
            StatusCode::OK.into_response()
        }
        Behaviour::FailFirst(k, s) if n <= k => status(s).into_response(),
        Behaviour::FailFirst(..) => StatusCode::OK.into_response(),
        Behaviour::SlowFirst(k, delay) => {
            if n <= k {
                tokio::time::sleep(delay).await;
            }
            StatusCode::OK.into_response()
        }
        Behaviour::Always(s) => status(s).into_response(),
        Behaviour::AlwaysWithBody(s, body) => (status(s), body).into_response(),
        Behaviour::RetryAfterFirst(k, s, secs) if n <= k => {
            (status(s), [("retry-after", secs.to_string())]).into_response()
        }
        Behaviour::RetryAfterFirst(..) => StatusCode::OK.into_response(),
        Behaviour::FailRandomly(..) | Behaviour::FailMatching(..) => status(status_code).into_response(),
    }
}
