//! The targets: each calls the real entry points of one parser family on
//! one input, checks what must hold of the answer (a panic is the finding;
//! a broken property panics too, with what broke), and says whether some
//! parser accepted the input (accepted inputs may join the corpus).

use std::path::Path;
use std::sync::OnceLock;

use chrono::{DateTime, TimeZone, Utc};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;

use hookline_api::cursor::CursorError;
use shared::context::Config;
use shared::envelope::{self, Format};
use shared::signing::{self, Secret};

/// One fuzz target.
pub struct Target {
    /// Its name (`--target`, the directory of its corpus and regressions).
    pub name: &'static str,
    /// What it runs, for `--list` and the docs.
    pub about: &'static str,
    /// Whether its inputs are JSON (JSON-aware mutations apply).
    pub json: bool,
    /// Seeds made by the code under test (issued cursors, real signatures)
    /// or taken from the docs, besides the files of `corpus/<name>/`.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Runs one input; whether a parser accepted it.
    pub run: fn(&[u8]) -> bool,
}

/// Every target, in the order `make fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "envelope",
        about: "shared::envelope: detection and normalization as ingest runs them (auto-detected, each format \
                named, with EventBridge defaults), batches item by item, redaction, producer ids, and the \
                stored record made from an accepted envelope",
        json: true,
        seeds: envelope_seeds,
        run: envelope,
    },
    Target {
        name: "api_body",
        about: "hookline_api::fuzzing::bodies: every request body type (hookline_api::parse) and the checks \
                its route makes before any store call",
        json: true,
        seeds: no_seeds,
        run: api_body,
    },
    Target {
        name: "api_query",
        about: "hookline_api::fuzzing::queries: the typed query strings of the list \
                and ingest routes, and the Idempotency-Key header (`query` + newline + header)",
        json: false,
        seeds: no_seeds,
        run: api_query,
    },
    Target {
        name: "cursor",
        about: "hookline_api::cursor::read of arbitrary text for each listing's filters, the positions a \
                cursor carries, and issue -> read round trips",
        json: false,
        seeds: cursor_seeds,
        run: cursor,
    },
    Target {
        name: "signature",
        about: "shared::signing::verify as `hookline listen` calls it (webhook-id, webhook-timestamp, \
                webhook-signature and body, one per line), Secret::parse, and sign -> verify round trips",
        json: false,
        seeds: signature_seeds,
        run: signature,
    },
    Target {
        name: "record",
        about: "hookline_sqlite::decode of arbitrary text as every stored record and queue message type, \
                and encode -> decode round trips of the records that decode",
        json: true,
        seeds: no_seeds,
        run: record,
    },
    Target {
        name: "catalog",
        about: "shared::catalog: the input as a registration's schema (schema::Schema::parse) and as its \
                example (check_registration); an accepted schema validates the input itself and is \
                compatible with itself (compat::breaking_changes)",
        json: true,
        seeds: catalog_seeds,
        run: catalog,
    },
];

/// The target named `name`.
pub fn by_name(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

fn no_seeds() -> Vec<Vec<u8>> {
    Vec::new()
}

/// The configuration every target reads: the defaults, as `hookline
/// serve` starts without settings.
fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| Config::from_lookup(|_| None).expect("the default configuration"))
}

/// A fixed "now", so that a failure reproduces from its input alone.
fn now() -> DateTime<Utc> {
    Utc.timestamp_opt(1_795_000_000, 0).single().expect("a valid instant")
}

// ---------------------------------------------------------------- envelope

/// The JSON examples of docs/formats.md, the envelopes producers read.
fn envelope_seeds() -> Vec<Vec<u8>> {
    let doc = include_str!("../../docs/formats.md");
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for line in doc.lines() {
        match (&mut block, line.trim_start()) {
            (None, l) if l.starts_with("```json") => block = Some(String::new()),
            (Some(b), l) if l.starts_with("```") => {
                out.push(std::mem::take(b).into_bytes());
                block = None;
            }
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    out
}

fn envelope(raw: &[u8]) -> bool {
    let mut accepted = false;
    let auto = envelope::normalize(raw, None);
    if let Ok(n) = &auto {
        accepted = true;
        // Detected once, the same envelope named in its format reads the same.
        assert_eq!(envelope::normalize(raw, Some(n.format)).as_ref(), Ok(n), "named format disagrees");
        stored(n.clone());
    }
    for f in Format::ALL {
        if let Ok(n) = envelope::normalize(raw, Some(f)) {
            accepted = true;
            stored(n);
        }
        let _ = envelope::producer_id(raw, f);
    }
    // Through an EventBridge bus: detail-type and source as defaults.
    if let Ok(n) = envelope::normalize_with_defaults(raw, None, Some("order.created"), Some("aws.partner/shop")) {
        accepted = true;
        stored(n.with_idempotency_key(Some("k-1")));
    }
    let _ = envelope::normalize_with_defaults(raw, None, Some("bad\ntype"), Some(""));
    match envelope::redact_sensitive(raw) {
        Ok((body, _)) => {
            serde_json::from_slice::<serde::de::IgnoredAny>(&body).expect("redaction keeps the body JSON");
        }
        Err(_) => assert!(auto.is_err(), "normalize accepted what redaction calls malformed"),
    }
    // A batch (`POST /v1/events/batch`): each item on its own.
    if let Ok(items) = serde_json::from_slice::<Vec<&RawValue>>(raw) {
        for item in items.iter().take(100) {
            if let Ok(n) = envelope::normalize(item.get().as_bytes(), None) {
                accepted = true;
                stored(n);
            }
        }
    }
    accepted
}

/// What ingest stores of an accepted envelope, and what must hold of it:
/// the body is JSON, and the record survives the SQLite codec unchanged.
fn stored(n: envelope::Normalized) {
    serde_json::from_slice::<serde::de::IgnoredAny>(&n.body).expect("an accepted body is JSON");
    let record = shared::event::EventRecord::from_normalized(n, now(), config().retention);
    let text = hookline_sqlite::encode(&record);
    let back: shared::event::EventRecord = hookline_sqlite::decode(&text).expect("a stored event decodes");
    assert_eq!(back, record, "a stored event changed through the codec");
}

// ---------------------------------------------------------------- API

fn api_body(body: &[u8]) -> bool {
    hookline_api::fuzzing::bodies(body, config()) > 0
}

fn api_query(input: &[u8]) -> bool {
    // A server hands the API the query as text; the header as bytes.
    let (query, key) = match input.iter().position(|b| *b == b'\n') {
        Some(i) => (&input[..i], Some(&input[i + 1..])),
        None => (input, None),
    };
    let query = String::from_utf8_lossy(query);
    hookline_api::fuzzing::queries(&query, key, config()) > 0
}

// ---------------------------------------------------------------- cursors

/// The filters of real listings, as their handlers fingerprint them.
const FILTERS: &[&str] = &[
    "",
    "reindex",
    "reindex-dead-letters",
    "tenant_id=acme",
    "event_type=task.created",
    r#"["order.*","acme",null,"","","failed","desc"]"#,
    r#"{"subscription_id":null,"event_type":null,"tenant_id":null,"state":"open","since":null,"until":null}"#,
    "action=\nactor=\nsubscription_id=\nsince=0\nuntil=0",
];

/// The fuzzer's deployment secret for cursors (any fixed key: what is
/// fuzzed is the reading, which must refuse whatever was not issued).
const CURSOR_KEY: hookline_api::cursor::CursorKey = [0x5a; 32];

/// Issues a cursor. The one place the fuzzer calls [`hookline_api::cursor::issue`].
fn issue_cursor(after: &str, filters: &str) -> String {
    hookline_api::cursor::issue(&CURSOR_KEY, after, filters)
}

/// Reads a cursor (see [`issue_cursor`]).
fn read_cursor(cursor: &str, filters: &str) -> Result<String, CursorError> {
    hookline_api::cursor::read(&CURSOR_KEY, cursor, filters)
}

/// Cursors the API issues, for positions of every listing's shape.
fn cursor_seeds() -> Vec<Vec<u8>> {
    let afters = ["sub_0192a1b2c3", "1795000000000:dl_01a2", "42", "1795000000000:evt_1", "aud_01:x\ny", "é:%"];
    FILTERS.iter().flat_map(|f| afters.iter().map(move |a| issue_cursor(a, f).into_bytes())).collect()
}

fn cursor(input: &[u8]) -> bool {
    let text = String::from_utf8_lossy(input);
    let mut accepted = false;
    for f in FILTERS {
        if let Ok(after) = read_cursor(&text, f) {
            accepted = true;
            let _ = shared::dead_letter::Position::parse(&after);
        }
    }
    let _ = shared::dead_letter::Position::parse(&text);
    // Any position reads back from the cursor issued for it.
    if !text.is_empty() {
        let f = FILTERS[input.len() % FILTERS.len()];
        assert_eq!(read_cursor(&issue_cursor(&text, f), f).as_deref(), Ok(&*text), "issue -> read");
    }
    accepted
}

// ---------------------------------------------------------------- signatures

/// The secrets receivers verify with: the Standard Webhooks test vector's
/// and a generated-size one.
fn secrets() -> &'static [Secret] {
    static SECRETS: OnceLock<Vec<Secret>> = OnceLock::new();
    SECRETS.get_or_init(|| {
        ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_q+do3dktSphWe6ajSP3mJJFTTx/bJ8XD3/Hy7r9bGVg="]
            .iter()
            .map(|s| Secret::parse(s).expect("a valid secret"))
            .collect()
    })
}

/// Deliveries as Hookline signs them: `id\ntimestamp\nsignature\nbody`.
fn signature_seeds() -> Vec<Vec<u8>> {
    let ts = now().timestamp();
    let bodies: [&[u8]; 3] = [br#"{"test": 2432232314}"#, br#"{"type":"hookline.verification","challenge":"c"}"#, b""];
    let mut out = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let id = format!("msg_p5jXN8AQM9LWM0D4loKWxJe{i}");
        for secrets in [&secrets()[..1], secrets()] {
            let header = signing::signature_header(secrets, &id, ts, body);
            let mut seed = format!("{id}\n{ts}\n{header}\n").into_bytes();
            seed.extend_from_slice(body);
            out.push(seed);
        }
    }
    out.push(b"msg_1\n1614265330\nv1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=\n{\"test\": 2432232314}".to_vec());
    out
}

fn signature(input: &[u8]) -> bool {
    let mut parts = input.splitn(4, |b| *b == b'\n');
    let mut next = || parts.next().map(String::from_utf8_lossy).unwrap_or_default();
    let (id, timestamp, header) = (next(), next(), next());
    let body_at = [id.len(), timestamp.len(), header.len()].iter().map(|n| n + 1).sum::<usize>().min(input.len());
    let body = &input[body_at..];
    let now = now().timestamp();
    let verdict =
        signing::verify(secrets(), &id, &timestamp, &header, body, now, signing::DEFAULT_TOLERANCE_SECS).is_ok();
    for part in [&id, &timestamp, &header] {
        let _ = Secret::parse(part);
    }
    // What Hookline signs verifies, whatever the id and body, with other
    // signatures around it.
    if !id.is_empty() {
        let ts = timestamp.trim().parse::<i64>().ok().filter(|t| now.abs_diff(*t) <= 300).unwrap_or(now);
        let signed = signing::signature_header(secrets(), &id, ts, body);
        let header = format!("{header} {signed} v1a,x");
        let ts = ts.to_string();
        assert_eq!(
            signing::verify(&secrets()[1..], &id, &ts, &header, body, now, signing::DEFAULT_TOLERANCE_SECS),
            Ok(()),
            "a signed delivery must verify"
        );
    }
    verdict
}

// ---------------------------------------------------------------- SQLite records

/// Decodes `text` as `T`; one that decodes must encode and decode again
/// to the same record.
fn round_trip<T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(text: &str) -> bool {
    let Ok(record) = hookline_sqlite::decode::<T>(text) else { return false };
    let encoded = hookline_sqlite::encode(&record);
    let back: T = hookline_sqlite::decode(&encoded).unwrap_or_else(|e| panic!("an encoded record must decode: {e}"));
    assert_eq!(back, record, "a record changed through the codec");
    true
}

fn record(input: &[u8]) -> bool {
    // SQLite hands back text columns as UTF-8; anything else fails before
    // the codec.
    let Ok(text) = std::str::from_utf8(input) else { return false };
    use shared::*;
    [
        round_trip::<event::EventRecord>(text),
        round_trip::<subscription::Subscription>(text),
        round_trip::<saga::Saga>(text),
        round_trip::<attempt::Attempt>(text),
        round_trip::<dead_letter::DeadLetter>(text),
        round_trip::<bulk::Job>(text),
        round_trip::<audit::AuditRecord>(text),
        round_trip::<health::Health>(text),
        round_trip::<message::DeliveryJob>(text),
        round_trip::<message::RetryTimer>(text),
        round_trip::<message::RequeueMessage>(text),
    ]
    .iter()
    .any(|ok| *ok)
}

/// The files of `corpus/<target>/` (seeds kept in the repository: real
/// SQLite rows, valid API bodies and queries, producer envelopes).
pub fn corpus_files(target: &str) -> Vec<Vec<u8>> {
    files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target))
}

/// The files of a directory, in name order (none if it does not exist).
pub fn files(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

// ---------------------------------------------------------------- catalog

/// Schemas of the documented subset (docs/formats.md#event-catalog).
fn catalog_seeds() -> Vec<Vec<u8>> {
    [
        r#"{"type": "object", "required": ["amount"], "additionalProperties": false,
            "properties": {"amount": {"type": "number", "minimum": 0}, "note": {"type": "string", "maxLength": 5}}}"#,
        r#"{"type": ["array", "null"], "minItems": 1, "items": {"enum": [1, "a", null]}}"#,
        r#"{"properties": {"at": {"format": "date-time"}, "id": {"format": "uuid"}}, "additionalProperties": {"const": 1}}"#,
        r#"true"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn catalog(raw: &[u8]) -> bool {
    use shared::catalog::{check_registration, compat, schema, Registration};
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(raw) else { return false };
    let reg = Registration {
        name: "fuzz.type".into(),
        version: 2,
        schema: v.clone(),
        description: None,
        example: Some(v.clone()),
    };
    let registered = check_registration(&reg);
    let Ok(s) = schema::Schema::parse(&v, "schema") else {
        assert!(registered.is_err(), "a schema that does not parse is never registered");
        return false;
    };
    assert!(compat::breaking_changes(&s, &s).is_empty(), "a schema is compatible with itself");
    let violations = s.validate(&v, "data");
    assert!(violations.len() <= schema::MAX_VIOLATIONS, "{} violations", violations.len());
    assert!(violations.iter().all(|x| x.path.starts_with("data")), "{violations:?}");
    if let Err(issues) = registered {
        assert!(!issues.is_empty() && issues.iter().all(|i| !i.field.is_empty()), "every issue names its field");
    }
    true
}
