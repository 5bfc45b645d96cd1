//! The console and the subscriber portal (`/ui`): static assets embedded in
//! the binary, served by `hookline serve` and the `api` function alike, and
//! the API again under `/ui/api` for the page to call.
//!
//! The page is plain HTML, CSS and ES modules from the repository's `ui/`
//! directory, with no build step: what is in `ui/` is what is embedded
//! ([`ASSETS`]; a test fails when a file there is missing from the table),
//! so nothing needs Node.js and nothing can drift between a source and a
//! build. Nothing is fetched from anywhere else at run time (the
//! Content-Security-Policy says so to the browser).
//!
//! `/ui/api/…` is the API itself ([`super::http::router`] nests the route
//! table there): the same routes, access checks and tenant scoping, but
//! always authenticated by `Authorization: Bearer` (an API key of the key
//! store, a `hookline serve` key, or a portal token), never by an IAM
//! signature, since a browser has none. On AWS that prefix is the one API
//! Gateway route without the IAM authorizer; the function authenticates
//! every request under it itself.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// Where the console is served.
pub const UI_PATH: &str = "/ui";

/// Where the API is served again for the console (bearer credentials only).
pub const UI_API_PATH: &str = "/ui/api";

/// One embedded file of `ui/`.
pub struct Asset {
    /// Its path under `ui/` (and under `/ui/`).
    pub path: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub bytes: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $type:literal) => {
        Asset { path: $path, content_type: $type, bytes: include_bytes!(concat!("../../ui/", $path)) }
    };
}

/// Every file of `ui/`, embedded.
pub static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("api.js", "text/javascript; charset=utf-8"),
    asset!("session.js", "text/javascript; charset=utf-8"),
    asset!("dom.js", "text/javascript; charset=utf-8"),
    asset!("chart.js", "text/javascript; charset=utf-8"),
    asset!("views/audit.js", "text/javascript; charset=utf-8"),
    asset!("views/dead_letter.js", "text/javascript; charset=utf-8"),
    asset!("views/dead_letters.js", "text/javascript; charset=utf-8"),
    asset!("views/event.js", "text/javascript; charset=utf-8"),
    asset!("views/event_types.js", "text/javascript; charset=utf-8"),
    asset!("views/events.js", "text/javascript; charset=utf-8"),
    asset!("views/job.js", "text/javascript; charset=utf-8"),
    asset!("views/overview.js", "text/javascript; charset=utf-8"),
    asset!("views/replays.js", "text/javascript; charset=utf-8"),
    asset!("views/portal_links.js", "text/javascript; charset=utf-8"),
    asset!("views/subscription.js", "text/javascript; charset=utf-8"),
    asset!("views/subscription_form.js", "text/javascript; charset=utf-8"),
    asset!("views/subscriptions.js", "text/javascript; charset=utf-8"),
];

/// What the browser may load and where it may connect: this origin only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'";

/// The answer to `GET /ui/<path>` (`/ui` and `/ui/` are the page itself;
/// the console routes in the page's fragment, so no other path is a page).
pub fn asset(path: &str) -> Response {
    let path = path.trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    let Some(a) = ASSETS.iter().find(|a| a.path == path) else {
        return (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "no such file")
            .into_response();
    };
    let mut res = a.bytes.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(a.content_type));
    // Revalidated on every load (a new binary serves new files at once),
    // answered 304 by the ETag when unchanged.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&etag(a.bytes)) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res
}

/// A strong ETag of `bytes`.
fn etag(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    let hex: String = d.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_ui_is_embedded_and_every_asset_is_a_file() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui");
        let mut files = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    files.push(p.strip_prefix(&dir).unwrap().to_string_lossy().replace('\\', "/"));
                }
            }
        }
        files.sort();
        let mut table: Vec<String> = ASSETS.iter().map(|a| a.path.to_string()).collect();
        table.sort();
        assert_eq!(files, table, "ui/ and console::ASSETS must list the same files");
    }

    #[test]
    fn unknown_files_are_404_and_the_page_is_served_at_the_root() {
        assert_eq!(asset("nope.js").status(), StatusCode::NOT_FOUND);
        assert_eq!(asset("../Cargo.toml").status(), StatusCode::NOT_FOUND);
        let page = asset("");
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(page.headers()[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert!(page.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap().contains("default-src 'none'"));
    }
}
