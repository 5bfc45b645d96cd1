//! `HttpClient` against a real (tiny, raw tokio) HTTP/1.1 server on 127.0.0.1.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shared::http_client::{ClientConfig, HttpClient, PostError};
use shared::ssrf::AddressPolicy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

struct Server {
    base: String,
    connections: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// Starts the test server; the response depends on the path.
async fn server() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (c, s) = (connections.clone(), seen.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            c.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve_connection(stream, s.clone()));
        }
    });
    Server { base, connections, seen }
}

async fn serve_connection(mut stream: TcpStream, seen: Arc<Mutex<Vec<Seen>>>) {
    let mut buf = Vec::new();
    loop {
        // Read one request head.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut request_line = lines.next().unwrap().split(' ');
        let method = request_line.next().unwrap().to_string();
        let path = request_line.next().unwrap().to_string();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let len: usize =
            headers.iter().find(|(k, _)| k == "content-length").map(|(_, v)| v.parse().unwrap()).unwrap_or(0);
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = buf[head_end..head_end + len].to_vec();
        buf.drain(..head_end + len);
        seen.lock().unwrap().push(Seen { method, path: path.clone(), headers, body });

        let response: Vec<u8> = match path.as_str() {
            "/ok" => reply(200, &[], b"{\"ok\":true}"),
            "/fail" => reply(500, &[], b"boom"),
            "/redirect" => reply(302, &[("location", "/ok")], b""),
            "/gone" => reply(410, &[], b""),
            "/slow" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                reply(200, &[], b"late")
            }
            "/big" => reply(200, &[], &vec![b'x'; 100 * 1024]),
            "/big-utf8" => reply(200, &[], "é".repeat(5000).as_bytes()),
            "/retry" => reply(503, &[("retry-after", "7")], b""),
            "/retry-date" => reply(429, &[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], b""),
            "/stall-body" => {
                let head = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial";
                let _ = stream.write_all(head).await;
                tokio::time::sleep(Duration::from_secs(5)).await;
                return;
            }
            "/close" => return,
            _ => reply(404, &[], b"not found"),
        };
        if stream.write_all(&response).await.is_err() {
            return;
        }
    }
}

fn reply(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

fn dev_client() -> HttpClient {
    HttpClient::new(ClientConfig {
        policy: AddressPolicy::AllowLoopback,
        total_timeout: Duration::from_millis(800),
        ..ClientConfig::default()
    })
}

fn json_headers() -> Vec<(&'static str, String)> {
    vec![
        ("content-type", "application/json".to_string()),
        ("webhook-id", "msg_1".to_string()),
        ("webhook-timestamp", "1700000000".to_string()),
        ("webhook-signature", "v1,c2VjcmV0LXNpZ25hdHVyZQ==".to_string()),
    ]
}

#[tokio::test]
async fn ok_with_body_and_headers() {
    let srv = server().await;
    let res = dev_client().post(&format!("{}/ok", srv.base), &json_headers(), b"{\"a\":1}".to_vec()).await;
    assert_eq!(res.status, Some(200), "{res:?}");
    assert_eq!(res.error, None);
    assert!(res.is_success());
    assert_eq!(res.body, "{\"ok\":true}");
    assert_eq!(res.retry_after, None);
    assert!(res.latency > Duration::ZERO && res.latency < Duration::from_secs(5));

    let seen = srv.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].body, b"{\"a\":1}");
    assert_eq!(seen[0].header("content-type"), Some("application/json"));
    assert_eq!(seen[0].header("webhook-id"), Some("msg_1"));
    assert_eq!(seen[0].header("webhook-signature"), Some("v1,c2VjcmV0LXNpZ25hdHVyZQ=="));
    assert!(seen[0].header("user-agent").unwrap().starts_with("Hookline/"));
}

#[tokio::test]
async fn server_error_is_a_status() {
    let srv = server().await;
    let res = dev_client().post(&format!("{}/fail", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, Some(500));
    assert_eq!(res.error, None);
    assert!(!res.is_success());
    assert_eq!(res.body, "boom");
}

#[tokio::test]
async fn redirect_is_not_followed() {
    let srv = server().await;
    let res = dev_client().post(&format!("{}/redirect", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, Some(302));
    assert!(!res.is_success());
    let seen = srv.seen.lock().unwrap().clone();
    assert_eq!(seen.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), ["/redirect"]);
}

#[tokio::test]
async fn slow_server_times_out() {
    let srv = server().await;
    let res = dev_client().post(&format!("{}/slow", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, None);
    assert_eq!(res.error, Some(PostError::Timeout));
    assert!(res.latency >= Duration::from_millis(700), "{:?}", res.latency);
    assert!(res.latency < Duration::from_secs(3), "{:?}", res.latency);
}

#[tokio::test]
async fn stalled_body_keeps_the_status() {
    let srv = server().await;
    let res = dev_client().post(&format!("{}/stall-body", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, Some(200), "{res:?}");
    assert_eq!(res.error, None);
    assert!(res.latency < Duration::from_secs(3), "{:?}", res.latency);
}

#[tokio::test]
async fn large_body_is_truncated() {
    let srv = server().await;
    let res = dev_client().post(&format!("{}/big", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, Some(200));
    assert_eq!(res.body.len(), 4096);
    assert!(res.body.bytes().all(|b| b == b'x'));

    // Multi-byte text is cut at a character boundary, never over the limit.
    let res = dev_client().post(&format!("{}/big-utf8", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, Some(200));
    assert!(res.body.len() <= 4096, "{}", res.body.len());
    assert!(res.body.len() >= 4093);

    let small = HttpClient::new(ClientConfig {
        policy: AddressPolicy::AllowLoopback,
        max_body_bytes: 10,
        ..ClientConfig::default()
    });
    let res = small.post(&format!("{}/ok", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.body, "{\"ok\":true");
}

#[tokio::test]
async fn retry_after_is_parsed() {
    let srv = server().await;
    let res = dev_client().post(&format!("{}/retry", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, Some(503));
    assert_eq!(res.retry_after, Some(Duration::from_secs(7)));
    // An HTTP-date in the past means "now".
    let res = dev_client().post(&format!("{}/retry-date", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, Some(429));
    assert_eq!(res.retry_after, Some(Duration::ZERO));
}

#[tokio::test]
async fn forbidden_address_is_refused_without_connecting() {
    let srv = server().await;
    let public = HttpClient::new(ClientConfig::default());
    let port = srv.base.rsplit(':').next().unwrap().to_string();
    for url in [
        format!("{}/ok", srv.base),
        format!("https://127.0.0.1:{port}/ok"),
        format!("https://localhost:{port}/ok"),
        format!("https://[::ffff:127.0.0.1]:{port}/ok"),
    ] {
        let res = public.post(&url, &json_headers(), b"{}".to_vec()).await;
        assert_eq!(res.status, None, "{url}");
        match &res.error {
            Some(PostError::ForbiddenAddress(msg)) => {
                assert!(msg.contains("loopback address"), "{msg}")
            }
            other => panic!("{url}: expected ForbiddenAddress, got {other:?}"),
        }
    }
    // Even in dev mode, private and metadata addresses are refused.
    let res = dev_client().post("http://169.254.169.254/latest/meta-data", &json_headers(), Vec::new()).await;
    assert_eq!(res.error, Some(PostError::ForbiddenAddress("169.254.169.254: cloud metadata address".into())));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(srv.connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn invalid_urls() {
    let public = HttpClient::new(ClientConfig::default());
    let res = public.post("not a url", &json_headers(), Vec::new()).await;
    assert!(matches!(res.error, Some(PostError::InvalidUrl(_))), "{res:?}");
    let res = public.post("http://example.com/hook", &json_headers(), Vec::new()).await;
    assert_eq!(res.error, Some(PostError::InvalidUrl("callback URL must use https".into())));
    let res = public.post("https://user:pw@example.com/hook", &json_headers(), Vec::new()).await;
    assert!(matches!(res.error, Some(PostError::InvalidUrl(_))), "{res:?}");
}

#[tokio::test]
async fn connection_refused_is_connect_error_without_secrets() {
    // Bind then drop to get a port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let res = dev_client()
        .post(&format!("http://127.0.0.1:{port}/hook?token=query-secret"), &json_headers(), Vec::new())
        .await;
    assert_eq!(res.status, None);
    let err = res.error.expect("an error");
    assert!(matches!(err, PostError::Connect(_)), "{err:?}");
    let msg = err.to_string();
    assert!(!msg.contains("c2VjcmV0"), "{msg}");
    assert!(!msg.contains("query-secret"), "{msg}");
}

#[tokio::test]
async fn closed_without_response_is_an_error() {
    let srv = server().await;
    let res = dev_client().post(&format!("{}/close", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, None);
    assert!(res.error.is_some());
    assert!(!res.error.unwrap().to_string().contains("c2VjcmV0"));
}

#[tokio::test]
async fn connections_are_reused() {
    let srv = server().await;
    let client = dev_client();
    for _ in 0..5 {
        let res = client.post(&format!("{}/ok", srv.base), &json_headers(), b"{}".to_vec()).await;
        assert_eq!(res.status, Some(200));
    }
    assert_eq!(srv.connections.load(Ordering::SeqCst), 1);
    // Clones share the pool.
    let res = client.clone().post(&format!("{}/ok", srv.base), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, Some(200));
    assert_eq!(srv.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn localhost_goes_through_the_guarded_resolver_in_dev() {
    let srv = server().await;
    let url = srv.base.replace("127.0.0.1", "localhost");
    let res = dev_client().post(&format!("{url}/ok"), &json_headers(), Vec::new()).await;
    assert_eq!(res.status, Some(200), "{res:?}");
}
