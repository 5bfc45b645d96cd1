//! Scenarios of hostile or malformed input, run on both backends
//! (`tests/tests/serve`, `tests/tests/aws`): the producer id limit,
//! values that could never be sent in a header, partition keys that could
//! never be stored or sent, ids that need
//! percent-encoding in a path, log-line forging, retry schedules longer than
//! the retention, per-tenant deduplication, and `Idempotency-Key` headers
//! that break the rule.

use std::time::Duration;

use serde_json::{json, Value};
use shared::envelope::{MAX_IDEMPOTENCY_KEY_BYTES, MAX_ID_BYTES, MAX_PARTITION_KEY_BYTES};

use crate::pipeline::Pipeline;
use crate::{eventually, Behaviour, Receiver};

/// Percent-encodes every byte but the RFC 3986 unreserved ones, as a client
/// puts an id into a path segment.
pub fn enc(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The marker a forged log line would start with.
pub const FORGED: &str = "FORGED-LOG-LINE";

/// Asserts no log line starts with [`FORGED`], i.e. no producer value broke a
/// line; returns the logs.
pub async fn assert_no_forged_line<P: Pipeline>(s: &P) -> String {
    let logs = s.logs().await;
    let forged: Vec<&str> = logs.lines().filter(|l| l.trim_start().starts_with(FORGED)).collect();
    assert!(forged.is_empty(), "a producer value forged log lines: {forged:?}");
    logs
}

async fn post_raw<P: Pipeline>(s: &P, path: &str, body: &[u8]) -> (u16, Value) {
    s.call("POST", path, Some(body)).await
}

/// A domain event (docs/formats.md#domain-event) of `tenant` with producer id `id`.
fn domain_event(tenant: &str, id: &str) -> Value {
    json!({"eventId": id, "schemaVersion": 1, "eventType": "RecordUpdated", "occurredAt": "2026-01-10T12:34:56.789Z",
           "tenantId": tenant, "producer": {"service": "core", "instanceId": "p1"}, "correlationId": "c1",
           "sequence": {"partitionKey": "Opportunity:t:r", "recordVersion": "1"}, "payload": {"who": tenant}})
}

/// Asserts a 422 `invalid_field` naming `field`, with no control character in the message.
fn assert_refused(st: u16, v: &Value, field: &str) {
    assert_eq!(st, 422, "{v}");
    assert_eq!(v["error"]["code"], "invalid_field", "{v}");
    assert_eq!(v["error"]["field"], field, "{v}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(!msg.chars().any(char::is_control), "the message carries a raw control character: {msg:?}");
}

/// Item 1: one id limit ([`MAX_ID_BYTES`]) on every ingest route; over it is a
/// 422 naming the field (never a 503 from a store key limit), per item in a
/// batch; an id at the limit is stored and found.
pub async fn producer_ids_over_the_limit_are_refused_naming_the_field<P: Pipeline>(s: &P) {
    let at_limit = format!("lim-{}", "x".repeat(MAX_ID_BYTES - 4));
    let over = format!("{at_limit}y");
    let huge = "h".repeat(3000);
    let (st, v) = s.post("/v1/events", &json!({"id": at_limit, "type": "t", "data": {}})).await;
    assert_eq!((st, v["event_id"].as_str()), (202, Some(at_limit.as_str())), "{v}");
    let (st, v) = s.get(&format!("/v1/events/{}", enc(&at_limit))).await;
    assert_eq!((st, v["id"].as_str()), (200, Some(at_limit.as_str())), "{v}");

    for id in [&over, &huge] {
        let (st, v) = s.post("/v1/events", &json!({"id": id, "type": "t", "data": {}})).await;
        assert_refused(st, &v, "id");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(&format!("the maximum is {MAX_ID_BYTES} bytes")),
            "{v}"
        );
    }
    let (st, v) = s.post("/v1/events", &domain_event("acme", &over)).await;
    assert_refused(st, &v, "eventId");
    let (st, v) = s.post("/v1/events", &domain_event(&over, "d-1")).await;
    assert_refused(st, &v, "tenantId");
    let (st, v) = s.post("/v1/events", &json!({"id": "n-1", "type": "t", "tenant_id": huge, "data": {}})).await;
    assert_refused(st, &v, "tenant_id");

    let batch = json!([{"id": "ok-in-batch", "type": "t", "data": {}}, {"id": huge, "type": "t", "data": {}}]);
    let (st, v) = s.post("/v1/events/batch", &batch).await;
    assert_eq!(st, 207, "{v}");
    assert_eq!(v["results"][0]["status"], 202, "{v}");
    assert_eq!(v["results"][1]["status"], 422, "{v}");
    assert_eq!(v["results"][1]["error"]["field"], "id", "{v}");

    // A path id no stored id can equal is a 404, not a store error.
    for path in
        [format!("/v1/events/{huge}"), format!("/v1/events/{huge}/deliveries"), format!("/v1/subscriptions/{huge}")]
    {
        let (st, v) = s.get(&path).await;
        assert_eq!(st, 404, "{v}");
    }
    let (st, v) = s.post(&format!("/v1/events/{huge}/replay"), &json!({})).await;
    assert_eq!(st, 404, "{v}");
    let (st, _) = s.get(&format!("/v1/events/{}", enc(&over))).await;
    assert_eq!(st, 404);
    let m = s.metrics().await;
    assert!(m.contains("hookline_events_accepted_total 2"), "only the two valid events were stored: {m}");
}

/// Item 2: ids holding `/`, space, `%`, `?`, `#` and non-ASCII are accepted
/// and found by `GET /v1/events/{id}`, `/deliveries` and `/replay` with the
/// id percent-encoded.
pub async fn ids_with_path_characters_are_found_percent_encoded<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/p", Behaviour::Ok), "event_types": ["*"]})).await;
    let ids = ["orders/7", "a b", "100%", "q?x=1", "frag#1", "café-ü", "all /%?#é+&=;", "%2F"];
    for id in ids {
        let (st, v) = s.post("/v1/events", &json!({"id": id, "type": "t", "data": {"id": id}})).await;
        assert_eq!((st, v["event_id"].as_str()), (202, Some(id)), "{v}");
    }
    for id in ids {
        let path = format!("/v1/events/{}", enc(id));
        let (st, v) = s.get(&path).await;
        assert_eq!(st, 200, "GET {path}: {v}");
        assert_eq!(v["id"], id);
        assert_eq!(v["body"]["data"]["id"], id);
        let d = s.settled_deliveries(&enc(id), 1, 30).await;
        assert_eq!(d[0]["status"], "completed", "{id}");
        let (st, v) = s.post(&format!("{path}/replay"), &json!({"reason": "test", "replay_key": "k"})).await;
        assert_eq!(st, 202, "replay {path}: {v}");
        assert_eq!(v["event_id"], id);
        s.settled_deliveries(&enc(id), 2, 30).await;
    }
    // `%2F` as an id is not `/`: the raw id "%2F" and "orders/7" are distinct.
    let (_, v) = s.get("/v1/events/%252F").await;
    assert_eq!(v["id"], "%2F");
    // Each event once and its replay once (the same `webhook-id`; at least
    // once may repeat either on a loaded emulator).
    let got = r.deliveries("/p");
    for id in ids {
        let n = got.iter().filter(|d| d.json()["data"]["id"] == id).count();
        assert!(n >= 2, "{id}: delivered and replayed, {n} requests");
    }
    assert_eq!(r.webhook_ids("/p").len(), ids.len(), "one webhook-id per event");
}

/// Item 2: values that end up in an outgoing header (the trace id as
/// `hookline-trace-id`, the event type as `hookline-event-type`) must be
/// valid header values: otherwise 422 naming the field, per item in a batch;
/// a valid trace id arrives unchanged.
pub async fn header_bound_values_must_be_valid_header_values<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/h", Behaviour::Ok), "event_types": ["*"]})).await;
    for (i, trace) in ["req\r\nX-Injected: 1", "a\u{0}b", "tab-at-end\t", "café", " lead", "x\u{7f}"].iter().enumerate()
    {
        let (st, v) = s
            .post("/v1/events", &json!({"id": format!("bad-trace-{i}"), "type": "t", "trace_id": trace, "data": {}}))
            .await;
        assert_refused(st, &v, "trace_id");
    }
    let mut dom = domain_event("acme", "bad-corr");
    dom["correlationId"] = json!("c\nINFO forged");
    let (st, v) = s.post("/v1/events", &dom).await;
    assert_refused(st, &v, "correlationId");
    let (st, v) = s.post("/v1/events", &json!({"type": "order\ncreated", "data": {}})).await;
    assert_refused(st, &v, "type");
    let batch = json!([{"id": "good-trace", "type": "t", "trace_id": "Root=1-5759e988-bd862e3f;Sampled=1", "data": {}},
                       {"id": "bad-trace-b", "type": "t", "trace_id": "a\rb", "data": {}}]);
    let (st, v) = s.post("/v1/events/batch", &batch).await;
    assert_eq!(st, 207, "{v}");
    assert_eq!(v["results"][1]["error"]["field"], "trace_id", "{v}");
    s.settled_deliveries("good-trace", 1, 20).await;
    let got = r.deliveries("/h");
    assert_eq!(got.len(), 1, "only the valid event was delivered");
    assert_eq!(got[0].header("hookline-trace-id"), "Root=1-5759e988-bd862e3f;Sampled=1");
    for id in ["bad-trace-0", "bad-corr", "bad-trace-b"] {
        assert_eq!(s.get(&format!("/v1/events/{id}")).await.0, 404, "{id} was not stored");
    }
}

/// A partition key becomes DynamoDB keys (behind the tenant scope) and the
/// `hookline-partition-key` header of every delivery, so it has the id rule
/// ([`MAX_PARTITION_KEY_BYTES`] of printable text) in every format that has
/// one: native `partition_key`, domain-event `sequence.partitionKey`, and the
/// change feed's `{entity_type}:{entity_id}`, refused on `entity_id`. Over
/// it (never a 503 from a store key limit) or with a control character: 422
/// naming the producer's field, per item in a batch, nothing stored. At the
/// limit, with a tenant at its own limit, an event is stored, numbered,
/// delivered in order with the key in its header, and found by its
/// partition.
pub async fn partition_keys_that_cannot_be_stored_or_sent_are_refused<P: Pipeline>(s: &P) {
    let tenant = "t".repeat(MAX_ID_BYTES);
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/pk", Behaviour::Ok), "event_types": ["*"], "tenant_id": tenant,
                       "ordering": "partition"}))
        .await;
    let at_limit = format!("order:{}", "k".repeat(MAX_PARTITION_KEY_BYTES - 6));
    let over = format!("{at_limit}x");
    let huge = "h".repeat(3000);
    let native = |id: &str, key: &str| json!({"id": id, "type": "t", "partition_key": key, "data": {}});
    let domain = |id: &str, key: &str| {
        let mut d = domain_event("acme", id);
        d["sequence"]["partitionKey"] = json!(key);
        d
    };
    // `Order:` takes 6 bytes of the change feed's key.
    let change = |id: &str, entity_id: &str| {
        json!({"id": id, "entity_type": "Order", "entity_id": entity_id, "change_type": "created",
               "published_at": "2026-01-10T12:34:56Z",
               "payload": {"actor": "u:1", "after": {}, "diff": {}, "recorded_at": "2026-01-10T12:34:56Z"}})
    };
    let max = format!("the maximum is {MAX_PARTITION_KEY_BYTES} bytes");
    let entity_over = "e".repeat(MAX_PARTITION_KEY_BYTES - 5);
    for (i, key) in [&over, &huge].into_iter().enumerate() {
        for (body, field) in [
            (native(&format!("pk-long-n{i}"), key), "partition_key"),
            (domain(&format!("pk-long-d{i}"), key), "sequence.partitionKey"),
            (change(&format!("pk-long-c{i}"), key), "entity_id"),
        ] {
            let (st, v) = s.post("/v1/events", &body).await;
            assert_refused(st, &v, field);
            assert!(v["error"]["message"].as_str().unwrap().contains(&max), "{v}");
        }
    }
    // An entity id under the limit whose `Order:` prefix takes the key over it.
    let (st, v) = s.post("/v1/events", &change("pk-long-c", &entity_over)).await;
    assert_refused(st, &v, "entity_id");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&format!("{} bytes long", MAX_PARTITION_KEY_BYTES + 1)) && msg.contains(&max), "{v}");

    let forged = format!("k\n{FORGED} level=ERROR");
    for (i, key) in ["a\r\nX-Injected: 1", "a\u{0}b", "a\tb", "a\u{7f}", "a\u{85}", "a\u{2028}b", "a\u{202e}b", &forged]
        .into_iter()
        .enumerate()
    {
        let (st, v) = s.post("/v1/events", &native(&format!("pk-ctl-n{i}"), key)).await;
        assert_refused(st, &v, "partition_key");
        let (st, v) = s.post("/v1/events", &domain(&format!("pk-ctl-d{i}"), key)).await;
        assert_refused(st, &v, "sequence.partitionKey");
        let (st, v) = s.post("/v1/events", &change(&format!("pk-ctl-c{i}"), key)).await;
        assert_refused(st, &v, "entity_id");
    }

    let batch =
        json!([native("pk-batch-ok", &at_limit), native("pk-batch-bad", &huge), domain("pk-batch-bad-d", "p\nq")]);
    let (st, v) = s.post("/v1/events/batch", &batch).await;
    assert_eq!(st, 207, "{v}");
    let results: Vec<(&Value, &Value)> =
        (0..3).map(|i| (&v["results"][i]["status"], &v["results"][i]["error"]["field"])).collect();
    assert_eq!(
        results,
        [
            (&json!(202), &Value::Null),
            (&json!(422), &json!("partition_key")),
            (&json!(422), &json!("sequence.partitionKey"))
        ],
        "{v}"
    );
    for id in ["pk-long-n0", "pk-long-n1", "pk-long-c", "pk-ctl-n0", "pk-ctl-c7", "pk-batch-bad"] {
        assert_eq!(s.get(&format!("/v1/events/{id}")).await.0, 404, "{id} was not stored");
    }
    for id in ["pk-long-d1", "pk-ctl-d7", "pk-batch-bad-d"] {
        let stored = shared::ids::stored_event_id(Some("acme"), id);
        assert_eq!(s.get(&format!("/v1/events/{stored}")).await.0, 404, "{id} was not stored");
    }

    // At the limit, with a tenant at its own: stored, numbered, delivered in
    // order with the key as it was sent, found by partition. A key of
    // two-byte characters is limited in bytes, not characters.
    let wide = "é".repeat(MAX_PARTITION_KEY_BYTES / 2);
    for (id, key) in [("pk-max", &at_limit), ("pk-max-wide", &wide)] {
        let mut body = native(id, key);
        body["tenant_id"] = json!(tenant);
        let (st, v) = s.post("/v1/events", &body).await;
        assert_eq!((st, &v["duplicate"]), (202, &json!(false)), "{v}");
        let stored = v["event_id"].as_str().unwrap();
        assert_eq!(s.settled_deliveries(stored, 1, 30).await[0]["status"], "completed");
        let (st, found) = s.get(&format!("/v1/events?tenant_id={}&partition_key={}", enc(&tenant), enc(key))).await;
        assert_eq!(st, 200, "{found}");
        let items = found["items"].as_array().unwrap();
        assert_eq!((items.len(), items[0]["id"].as_str()), (1, Some(stored)), "{found}");
        assert_eq!(items[0]["partition_key"].as_str(), Some(key.as_str()));
    }
    let (st, v) = s.post("/v1/events", &change("pk-max-c", &"e".repeat(MAX_PARTITION_KEY_BYTES - 6))).await;
    assert_eq!(st, 202, "{v}");
    let (st, v) = s.post("/v1/events", &domain("pk-max-d", &wide)).await;
    assert_eq!(st, 202, "{v}");

    let got = r.deliveries("/pk");
    assert_eq!(got.len(), 2, "the tenant's two events, delivered once each");
    let ascii = got.iter().find(|d| d.json()["id"] == "pk-max").expect("pk-max delivered");
    assert_eq!((ascii.header("hookline-partition-key"), ascii.header("hookline-sequence")), (at_limit.as_str(), "1"));
    let m = s.metrics().await;
    assert!(m.contains("hookline_events_accepted_total 5\n"), "only the five valid events were stored: {m}");
    assert_no_forged_line(s).await;
}

/// Item 2: a subscription's custom headers must be sendable: reserved,
/// hop-by-hop and non-token names and values with control characters or
/// non-ASCII are a 422 naming the header, on create and PATCH, and nothing is
/// written; valid ones arrive on every delivery.
pub async fn custom_headers_that_cannot_be_sent_are_refused<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let url = r.url("/ch", Behaviour::Ok);
    let names = [
        "Upgrade",
        "TE",
        "Trailer",
        "Keep-Alive",
        "Proxy-Connection",
        "Connection",
        "Transfer-Encoding",
        "Content-Length",
        "Host",
        "Content-Type",
        "webhook-id",
        "Webhook-Signature",
        "hookline-attempt",
        "X Team",
        "X:Team",
        "X(1)",
        "X-Tëam",
        "",
    ];
    for name in names {
        let (st, v) = s
            .post("/v1/subscriptions", &json!({"callback_url": url, "event_types": ["*"], "headers": {name: "v"}}))
            .await;
        assert_eq!(st, 422, "{name:?}: {v}");
        assert_eq!(v["error"]["code"], "invalid_header", "{v}");
        assert_eq!(v["error"]["field"], format!("headers.{name}"), "{v}");
    }
    for value in ["a\r\nX-Injected: 1", "a\nb", "a\u{0}b", "a\u{1}b", "a\u{7f}", "caf\u{e9}", " a"] {
        let (st, v) = s
            .post(
                "/v1/subscriptions",
                &json!({"callback_url": url, "event_types": ["*"], "headers": {"X-Team": value}}),
            )
            .await;
        assert_eq!(st, 422, "{value:?}: {v}");
        assert_eq!(v["error"]["field"], "headers.X-Team", "{v}");
        assert!(!v["error"]["message"].as_str().unwrap().chars().any(char::is_control), "{v}");
    }
    let (_, subs) = s.get("/v1/subscriptions").await;
    assert_eq!(subs["items"].as_array().unwrap().len(), 0, "refused subscriptions are not stored");

    let (id, _) = s.subscribe(json!({"callback_url": url, "event_types": ["*"], "headers": {"X-Team": "a\tb c", "X_Empty": "", "X-Tok!#$%&'*+.^_`|~": "1"}})).await;
    let (st, v) =
        s.call("PATCH", &format!("/v1/subscriptions/{id}"), Some(br#"{"headers": {"Upgrade": "h2c"}}"#)).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("headers.Upgrade")), "{v}");
    let (st, v) = s
        .call("PATCH", &format!("/v1/subscriptions/{id}"), Some(b"{\"headers\": {\"X-Team\": \"a\\r\\nHost: evil\"}}"))
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("headers.X-Team")), "{v}");
    let (_, sub) = s.get(&format!("/v1/subscriptions/{id}")).await;
    assert_eq!(sub["headers"]["X-Team"], "a\tb c", "a refused PATCH changes nothing: {sub}");
    let (_, ev) = s.post("/v1/events", &json!({"type": "t", "data": {}})).await;
    let d = s.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 20).await;
    assert_eq!(d[0]["status"], "completed");
    let got = &r.deliveries("/ch")[0];
    assert_eq!(got.header("x-team"), "a\tb c");
    assert_eq!(got.header("x-tok!#$%&'*+.^_`|~"), "1");
}

/// Item 2: a CR or LF in a producer- or caller-supplied value never forges a
/// log line: ids, tenants and trace ids holding them are refused (422 with an
/// escaped message), and so is free text that is logged (a replay's
/// reason).
pub async fn control_characters_cannot_forge_log_lines<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    s.subscribe(json!({"callback_url": r.url("/l", Behaviour::Ok), "event_types": ["*"]})).await;
    let line = format!("\n{FORGED} level=ERROR msg=\"forged\"");
    let (st, v) = s.post("/v1/events", &json!({"id": format!("ev{line}"), "type": "t", "data": {}})).await;
    assert_refused(st, &v, "id");
    let (st, v) =
        s.post("/v1/events", &json!({"id": "lf-1", "type": "t", "tenant_id": format!("acme{line}"), "data": {}})).await;
    assert_refused(st, &v, "tenant_id");
    let (st, v) =
        s.post("/v1/events", &json!({"id": "lf-2", "type": "t", "trace_id": format!("req{line}"), "data": {}})).await;
    assert_refused(st, &v, "trace_id");
    let (st, v) = s.post("/v1/events", &json!({"id": "lf-3", "type": format!("t{line}"), "data": {}})).await;
    assert_refused(st, &v, "type");
    let (st, v) = s.call("POST", &format!("/v1/events?format=x%0A{FORGED}"), Some(br#"{"type":"t","data":1}"#)).await;
    assert_eq!((st, v["error"]["code"].as_str()), (400, Some("unknown_format")), "{v}");
    assert!(!v["error"]["message"].as_str().unwrap().contains('\n'), "{v}");
    let (st, v) = s
        .post(
            "/v1/subscriptions",
            &json!({"callback_url": r.url("/l2", Behaviour::Ok), "event_types": ["*"], format!("x{line}"): 1}),
        )
        .await;
    assert_eq!(st, 400, "{v}");
    assert!(!v["error"]["message"].as_str().unwrap().contains('\n'), "{v}");

    // A valid event: a replay for a reason that holds a line break is
    // refused (422 naming `reason`, nothing replayed); one for a plain
    // reason is done and logged (a body's `actor` is ignored: the caller is
    // the actor).
    let (st, _) = s.post("/v1/events", &json!({"id": "lf-ok", "type": "t", "trace_id": "req-1", "data": {}})).await;
    assert_eq!(st, 202);
    s.settled_deliveries("lf-ok", 1, 20).await;
    let (st, v) = s.post("/v1/events/lf-ok/replay", &json!({"reason": format!("r{line}")})).await;
    assert_refused(st, &v, "reason");
    let (st, v) = s.post("/v1/events/lf-ok/replay", &json!({"reason": "restored from backup"})).await;
    assert_eq!(st, 202, "{v}");
    s.settled_deliveries("lf-ok", 2, 20).await;
    eventually(10, "the replay's log line", || async {
        let logs = s.logs().await;
        logs.lines().any(|l| l.contains("event replayed") && l.contains("lf-ok")).then_some(())
    })
    .await;
    assert_no_forged_line(s).await;
}

/// The `Idempotency-Key` header of `POST /v1/events` is 1 to 255 bytes of
/// printable ASCII (docs/formats.md#idempotency-key): anything else is a 422
/// `invalid_header` naming it, whatever the envelope (with an id of its own
/// or without), and nothing is written; a batch takes no key at all. A key
/// at the limit is taken, and a retry with it is a duplicate.
pub async fn idempotency_keys_that_break_the_rule_are_refused<P: Pipeline>(s: &P) {
    const HEADER: &str = "Idempotency-Key";
    let assert_bad_header = |st: u16, v: &Value, why: &str| {
        assert_eq!(st, 422, "{why}: {v}");
        assert_eq!((v["error"]["code"].as_str(), v["error"]["field"].as_str()), (Some("invalid_header"), Some(HEADER)));
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(HEADER) && !msg.chars().any(char::is_control), "{why}: {msg:?}");
    };
    let no_id: &[u8] = br#"{"type":"t","data":{}}"#;
    let with_id: &[u8] = br#"{"id":"never-stored","type":"t","data":{}}"#;
    let too_long = "k".repeat(MAX_IDEMPOTENCY_KEY_BYTES + 1);
    for (key, why) in [("", "empty"), (too_long.as_str(), "256 bytes"), ("a\tb", "a tab"), ("café", "not ASCII")] {
        for body in [no_id, with_id] {
            let (st, v) = s.call_with_headers("POST", "/v1/events", Some(body), &[(HEADER, key)]).await;
            assert_bad_header(st, &v, why);
        }
    }
    let (st, v) =
        s.call_with_headers("POST", "/v1/events/batch", Some(b"[{\"type\":\"t\",\"data\":1}]"), &[(HEADER, "k")]).await;
    assert_bad_header(st, &v, "a batch");
    assert_eq!(s.get("/v1/events/never-stored").await.0, 404);
    let m = s.metrics().await;
    assert!(m.contains("hookline_events_accepted_total 0\n"), "nothing was written: {m}");

    let at_limit = "k".repeat(MAX_IDEMPOTENCY_KEY_BYTES);
    let (st, a) = s.call_with_headers("POST", "/v1/events", Some(no_id), &[(HEADER, &at_limit)]).await;
    assert_eq!((st, &a["duplicate"]), (202, &json!(false)), "{a}");
    let (st, b) = s.call_with_headers("POST", "/v1/events", Some(no_id), &[(HEADER, &at_limit)]).await;
    assert_eq!((st, &b["duplicate"], &b["event_id"]), (202, &json!(true), &a["event_id"]), "{b}");
}

/// Item 3: a retry policy whose longest schedule ((max_attempts - 1) waits
/// of max_delay_ms, as a Retry-After can stretch every wait) outlasts the
/// event retention (30 days here) is a 422 naming `retry_policy`, on create
/// and PATCH; one that fits is accepted.
pub async fn retry_schedules_longer_than_the_retention_are_refused<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let url = r.url("/rp", Behaviour::Ok);
    let day = 86_400_000u64;
    for (attempts, max_delay) in [(50, day), (32, day), (50, 16 * 3_600_000)] {
        let policy = json!({"max_attempts": attempts, "base_delay_ms": 1000, "max_delay_ms": max_delay});
        let (st, v) = s
            .post("/v1/subscriptions", &json!({"callback_url": url, "event_types": ["*"], "retry_policy": policy}))
            .await;
        assert_eq!(st, 422, "{policy}: {v}");
        assert_eq!(v["error"]["code"], "retry_schedule_too_long", "{v}");
        assert_eq!(v["error"]["field"], "retry_policy", "{v}");
    }
    let (_, subs) = s.get("/v1/subscriptions").await;
    assert_eq!(subs["items"].as_array().unwrap().len(), 0, "refused subscriptions are not stored");
    // 30 waits of a day: exactly the retention, accepted.
    let fits = json!({"max_attempts": 31, "base_delay_ms": 1000, "max_delay_ms": day});
    let (st, v) =
        s.post("/v1/subscriptions", &json!({"callback_url": url, "event_types": ["*"], "retry_policy": fits})).await;
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let patch = br#"{"retry_policy": {"max_attempts": 50, "base_delay_ms": 1000, "max_delay_ms": 86400000}}"#;
    let (st, v) = s.call("PATCH", &format!("/v1/subscriptions/{id}"), Some(patch)).await;
    assert_eq!((st, v["error"]["field"].as_str()), (422, Some("retry_policy")), "{v}");
    let (_, sub) = s.get(&format!("/v1/subscriptions/{id}")).await;
    assert_eq!(sub["retry_policy"]["max_attempts"], 31, "a refused PATCH changes nothing: {sub}");
    let (st, v) = s.call("PATCH", &format!("/v1/subscriptions/{id}"), Some(br#"{"retry_policy": null}"#)).await;
    assert_eq!((st, v["retry_policy"]["max_attempts"].as_u64()), (200, Some(6)), "{v}");
}

/// Item 4: deduplication is per tenant. The same producer id from two
/// tenants is two events, each stored under its own id, delivered to its own
/// tenant's subscribers with the body unchanged; only a repeat by the same
/// tenant is a duplicate (single, batch, every format); an event without a
/// tenant keeps the producer's id; the webhook-id of one (event,
/// subscription) stays the same on replay.
pub async fn deduplication_is_per_tenant<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let (acme_sub, _) = s
        .subscribe(json!({"callback_url": r.url("/acme", Behaviour::Ok), "event_types": ["*"], "tenant_id": "acme"}))
        .await;
    s.subscribe(json!({"callback_url": r.url("/globex", Behaviour::Ok), "event_types": ["*"], "tenant_id": "globex"}))
        .await;
    s.subscribe(json!({"callback_url": r.url("/all", Behaviour::Ok), "event_types": ["*"]})).await;
    let acme: &[u8] = br#"{"id":"shared-1","type":"order.created","tenant_id":"acme","data":{"who":"acme"}}"#;
    let globex: &[u8] =
        br#"{ "id": "shared-1", "type": "order.created", "tenant_id": "globex", "data": {"who": "globex"} }"#;
    let plain: &[u8] = br#"{"id":"shared-1","type":"order.created","data":{"who":"nobody"}}"#;

    let (st, a) = post_raw(s, "/v1/events", acme).await;
    assert_eq!((st, &a["duplicate"]), (202, &json!(false)), "{a}");
    let a_id = a["event_id"].as_str().unwrap().to_string();
    assert_eq!(shared::ids::stored_event_id(Some("acme"), "shared-1"), a_id.as_str());
    let (_, again) = post_raw(s, "/v1/events", acme).await;
    assert_eq!(
        (&again["duplicate"], &again["event_id"]),
        (&json!(true), &a["event_id"]),
        "a repeat by the same tenant is a duplicate"
    );
    let (st, g) = post_raw(s, "/v1/events", globex).await;
    assert_eq!((st, &g["duplicate"]), (202, &json!(false)), "another tenant's event is not a duplicate: {g}");
    let g_id = g["event_id"].as_str().unwrap().to_string();
    assert_ne!(g_id, a_id);
    let (_, p) = post_raw(s, "/v1/events", plain).await;
    assert_eq!(
        (&p["duplicate"], p["event_id"].as_str()),
        (&json!(false), Some("shared-1")),
        "no tenant: the producer's id: {p}"
    );

    for (id, tenant) in [(&a_id, "acme"), (&g_id, "globex")] {
        let (st, ev) = s.get(&format!("/v1/events/{id}")).await;
        assert_eq!(st, 200);
        assert_eq!((ev["tenant_id"].as_str(), ev["producer_id"].as_str()), (Some(tenant), Some("shared-1")), "{ev}");
        assert_eq!(ev["body"]["data"]["who"], tenant);
    }

    // Domain events (tenantId), and a batch mixing a repeat and new pairs.
    let (_, da) = s.post("/v1/events", &domain_event("acme", "dom-1")).await;
    let (_, dg) = s.post("/v1/events", &domain_event("globex", "dom-1")).await;
    let (_, da2) = s.post("/v1/events", &domain_event("acme", "dom-1")).await;
    assert_eq!((&da["duplicate"], &dg["duplicate"], &da2["duplicate"]), (&json!(false), &json!(false), &json!(true)));
    assert_ne!(da["event_id"], dg["event_id"]);
    let batch = format!(
        "[{}, {}, {}]",
        String::from_utf8_lossy(acme),
        r#"{"id":"b-1","type":"t","tenant_id":"globex","data":1}"#,
        r#"{"id":"b-1","type":"t","tenant_id":"acme","data":2}"#
    );
    let (st, b) = post_raw(s, "/v1/events/batch", batch.as_bytes()).await;
    assert_eq!(st, 202, "{b}");
    let dup: Vec<&Value> = (0..3).map(|i| &b["results"][i]["duplicate"]).collect();
    assert_eq!(dup, [&json!(true), &json!(false), &json!(false)], "{b}");
    assert_eq!(b["results"][0]["event_id"], a_id.as_str());
    assert_ne!(b["results"][1]["event_id"], b["results"][2]["event_id"]);

    let mut ids = vec![
        a_id.clone(),
        g_id.clone(),
        da["event_id"].as_str().unwrap().into(),
        dg["event_id"].as_str().unwrap().into(),
    ];
    ids.extend((1..3).map(|i| b["results"][i]["event_id"].as_str().unwrap().to_string()));
    for id in &ids {
        let d = s.settled_deliveries(id, 2, 30).await;
        assert!(d.iter().all(|x| x["status"] == "completed"), "{d:?}");
    }
    s.settled_deliveries("shared-1", 1, 30).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Counted by `webhook-id`: at least once may repeat a delivery (a job
    // that outlived its visibility on a loaded emulator), never an event.
    let events_with = |path: &str, body: &[u8]| {
        let mut ids: Vec<String> = r
            .deliveries(path)
            .into_iter()
            .filter(|d| d.body == body)
            .map(|d| d.header("webhook-id").to_string())
            .collect();
        ids.sort();
        ids.dedup();
        ids.len()
    };
    assert_eq!(
        (events_with("/acme", acme), events_with("/globex", globex)),
        (1, 1),
        "each tenant's subscriber got its own event once, body unchanged"
    );
    assert_eq!(r.webhook_ids("/acme").len(), 3, "acme: shared-1, dom-1, b-1");
    assert_eq!(r.webhook_ids("/globex").len(), 3, "globex: shared-1, dom-1, b-1");
    assert_eq!(r.webhook_ids("/all").len(), 7, "one webhook-id per (event, subscription)");

    // A replay of acme's event keeps its webhook-id for acme's subscription.
    let (st, v) = s
        .post(
            &format!("/v1/events/{a_id}/replay"),
            &json!({"reason": "t", "subscription_id": acme_sub, "replay_key": "k1"}),
        )
        .await;
    assert_eq!(st, 202, "{v}");
    s.settled_deliveries(&a_id, 3, 30).await;
    let to_acme: Vec<_> = r.deliveries("/acme").into_iter().filter(|d| d.body == acme).collect();
    assert!(to_acme.len() >= 2, "the event and its replay: {} requests", to_acme.len());
    assert!(to_acme.iter().all(|d| d.header("webhook-id") == to_acme[0].header("webhook-id")), "one webhook-id");
}

/// A subscription's delivery limits: `max_in_flight` 1 to 1,000 and
/// `rate_limit` from one an hour to 10,000 a second, anything else a 422
/// naming the field, on create and PATCH, with nothing written; GET shows
/// them and PATCH `null` clears them.
pub async fn delivery_limits_that_make_no_sense_are_refused<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let url = r.url("/limits", Behaviour::Ok);
    let bad = [
        json!({"max_in_flight": 0}),
        json!({"max_in_flight": -3}),
        json!({"max_in_flight": 1001}),
        json!({"rate_limit": 0}),
        json!({"rate_limit": -1.5}),
        json!({"rate_limit": 0.0001}),
        json!({"rate_limit": 1000.5}),
        json!({"rate_limit": 20000}),
    ];
    for limit in &bad {
        let field = limit.as_object().unwrap().keys().next().unwrap().clone();
        let mut body = json!({"callback_url": url, "event_types": ["*"]});
        body[&field] = limit[&field].clone();
        let (st, v) = s.post("/v1/subscriptions", &body).await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some(field.as_str())), "{limit}: {v}");
        assert_eq!(v["error"]["code"], "invalid_limit", "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains("between"), "{v}");
    }
    let (id, _) =
        s.subscribe(json!({"callback_url": url, "event_types": ["*"], "max_in_flight": 5, "rate_limit": 0.5})).await;
    let (_, sub) = s.get(&format!("/v1/subscriptions/{id}")).await;
    assert_eq!((sub["max_in_flight"].as_u64(), sub["rate_limit"].as_f64()), (Some(5), Some(0.5)), "{sub}");
    for limit in &bad {
        let (st, v) =
            s.call("PATCH", &format!("/v1/subscriptions/{id}"), Some(&serde_json::to_vec(limit).unwrap())).await;
        assert_eq!(st, 422, "{limit}: {v}");
    }
    let (_, sub) = s.get(&format!("/v1/subscriptions/{id}")).await;
    assert_eq!((sub["max_in_flight"].as_u64(), sub["rate_limit"].as_f64()), (Some(5), Some(0.5)), "unchanged: {sub}");
    let (st, sub) = s
        .call("PATCH", &format!("/v1/subscriptions/{id}"), Some(br#"{"max_in_flight": null, "rate_limit": 1000}"#))
        .await;
    assert_eq!(st, 200, "{sub}");
    assert!(sub["max_in_flight"].is_null(), "null is the default: {sub}");
    assert_eq!(sub["rate_limit"].as_f64(), Some(1000.0), "the ceiling itself is allowed");
}

/// `retry_policy.schedule_ms` and `dead_letter_on` values that make no
/// sense are a 422 naming the member or entry at fault
/// (`retry_policy.schedule_ms[2]`, `dead_letter_on[1]`), on create and
/// PATCH, with nothing written; a wrong type stays a 400. GET shows what was
/// set, what GET shows can be sent back as it is, and `null` resets both.
pub async fn retry_schedules_and_dead_letter_statuses_that_make_no_sense_are_refused<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let url = r.url("/sched", Behaviour::Ok);
    let day = 86_400_000u64;
    let schedule = "invalid_retry_schedule";
    let statuses = "invalid_dead_letter_on";
    let bad = [
        (json!({"retry_policy": {"schedule_ms": []}}), "retry_policy.schedule_ms", schedule),
        (json!({"retry_policy": {"schedule_ms": vec![1000; 51]}}), "retry_policy.schedule_ms", schedule),
        (json!({"retry_policy": {"schedule_ms": [1000, 2000, 0]}}), "retry_policy.schedule_ms[2]", schedule),
        (json!({"retry_policy": {"schedule_ms": [-1]}}), "retry_policy.schedule_ms[0]", schedule),
        (json!({"retry_policy": {"schedule_ms": [1000, day + 1]}}), "retry_policy.schedule_ms[1]", schedule),
        (
            json!({"retry_policy": {"schedule_ms": [1000, 2000], "max_attempts": 6}}),
            "retry_policy.max_attempts",
            schedule,
        ),
        (json!({"retry_policy": {"schedule_ms": [1000], "max_delay_ms": 5000}}), "retry_policy.max_delay_ms", schedule),
        // 31 waits of up to a day: longer than the 30 days events are kept.
        (
            json!({"retry_policy": {"schedule_ms": vec![day; 31]}}),
            "retry_policy.schedule_ms",
            "retry_schedule_too_long",
        ),
        (json!({"dead_letter_on": [422, 99]}), "dead_letter_on[1]", statuses),
        (json!({"dead_letter_on": [600]}), "dead_letter_on[0]", statuses),
        (json!({"dead_letter_on": [204]}), "dead_letter_on[0]", statuses),
        (json!({"dead_letter_on": [422, 400, 422]}), "dead_letter_on[2]", statuses),
        (json!({"dead_letter_on": (400..421).collect::<Vec<u16>>()}), "dead_letter_on", statuses),
    ];
    let with = |v: &Value| {
        let mut body = json!({"callback_url": url, "event_types": ["*"]});
        for (k, x) in v.as_object().unwrap() {
            body[k] = x.clone();
        }
        body
    };
    for (given, field, code) in &bad {
        let (st, v) = s.post("/v1/subscriptions", &with(given)).await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some(*field)), "{given}: {v}");
        assert_eq!(v["error"]["code"], *code, "{given}: {v}");
    }
    let malformed = [
        (json!({"retry_policy": {"schedule_ms": [1000, "x"]}}), "retry_policy.schedule_ms[1]", "invalid_type"),
        (json!({"retry_policy": {"schedule": [1000]}}), "retry_policy.schedule", "unknown_field"),
        (json!({"dead_letter_on": 422}), "dead_letter_on", "invalid_type"),
    ];
    for (given, field, code) in &malformed {
        let (st, v) = s.post("/v1/subscriptions", &with(given)).await;
        assert_eq!(
            (st, v["error"]["field"].as_str(), &v["error"]["code"]),
            (400, Some(*field), &json!(code)),
            "{given}: {v}"
        );
    }
    let (_, subs) = s.get("/v1/subscriptions").await;
    assert_eq!(subs["items"].as_array().unwrap().len(), 0, "refused subscriptions are not stored");

    // The task-event contract's ladder: 1, 2, 5, 15, 30, 60 minutes.
    let ladder = [60_000, 120_000, 300_000, 900_000, 1_800_000, 3_600_000];
    let (id, _) =
        s.subscribe(with(&json!({"retry_policy": {"schedule_ms": ladder}, "dead_letter_on": [400, 422]}))).await;
    let path = format!("/v1/subscriptions/{id}");
    let (_, sub) = s.get(&path).await;
    let policy = json!({"max_attempts": 7, "base_delay_ms": 60_000, "max_delay_ms": 3_600_000, "schedule_ms": ladder});
    assert_eq!((&sub["retry_policy"], &sub["dead_letter_on"]), (&policy, &json!([400, 422])), "{sub}");
    for (given, field, _) in bad.iter().chain(&malformed) {
        let (st, v) = s.call("PATCH", &path, Some(&serde_json::to_vec(given).unwrap())).await;
        assert!(st == 422 || st == 400, "{given}: {v}");
        assert_eq!(v["error"]["field"].as_str(), Some(*field), "{given}: {v}");
    }
    let (_, after) = s.get(&path).await;
    assert_eq!(
        (&after["retry_policy"], &after["dead_letter_on"], &after["updated_at"]),
        (&policy, &json!([400, 422]), &sub["updated_at"]),
        "refused PATCHes change nothing: {after}"
    );
    // What GET shows can be sent back.
    let (st, v) = s
        .call(
            "PATCH",
            &path,
            Some(&serde_json::to_vec(&json!({"retry_policy": policy, "dead_letter_on": [422]})).unwrap()),
        )
        .await;
    assert_eq!((st, &v["retry_policy"], &v["dead_letter_on"]), (200, &policy, &json!([422])), "{v}");
    // A policy without schedule_ms replaces the schedule; null resets both.
    let (st, v) = s.call("PATCH", &path, Some(br#"{"retry_policy": {"max_attempts": 3}}"#)).await;
    assert_eq!(
        (st, &v["retry_policy"]["schedule_ms"], &v["retry_policy"]["max_attempts"]),
        (200, &Value::Null, &json!(3)),
        "{v}"
    );
    let (st, v) = s.call("PATCH", &path, Some(br#"{"retry_policy": null, "dead_letter_on": null}"#)).await;
    assert_eq!(st, 200, "{v}");
    let reset = (&v["retry_policy"]["schedule_ms"], &v["retry_policy"]["max_attempts"], &v["dead_letter_on"]);
    assert_eq!(reset, (&Value::Null, &json!(6), &json!([])), "the configured default, and no statuses: {v}");
}

/// Every input scenario, listed once: each backend's test binary runs
/// them all (`hookline_tests::input_scenario_tests!(aws)`, `(serve)`).
#[macro_export]
macro_rules! input_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, input_scenarios;
            producer_ids_over_the_limit_are_refused_naming_the_field,
            ids_with_path_characters_are_found_percent_encoded,
            header_bound_values_must_be_valid_header_values,
            partition_keys_that_cannot_be_stored_or_sent_are_refused,
            custom_headers_that_cannot_be_sent_are_refused,
            control_characters_cannot_forge_log_lines,
            retry_schedules_longer_than_the_retention_are_refused,
            deduplication_is_per_tenant,
            delivery_limits_that_make_no_sense_are_refused,
            retry_schedules_and_dead_letter_statuses_that_make_no_sense_are_refused,
            idempotency_keys_that_break_the_rule_are_refused,
        );
    };
}
