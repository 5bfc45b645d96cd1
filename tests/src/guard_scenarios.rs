//! Issue 24's guards against hostile producers, subscribers and careless
//! operators, run on both backends (`tests/tests/serve`, `tests/tests/aws`):
//! stored ids no producer can occupy (another tenant's event, an
//! idempotency key, an operational event), cursors authenticated with a
//! server secret, a verification an echoing endpoint cannot pass, at most
//! three signatures per delivery, the small validations, and bounded jobs
//! per tenant.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use shared::ids::{idempotent_event_id, saga_id, stored_event_id, EventId, SubscriptionId};

use crate::pipeline::Pipeline;
use crate::{eventually, Behaviour, Receiver};

/// A fresh suffix, so ids of one run never meet another's.
fn fresh() -> String {
    shared::ids::random_token("")[..12].to_string()
}

/// Posts `body` to `/v1/events`; returns `(event_id, duplicate)`.
async fn post(p: &impl Pipeline, body: &Value) -> (String, bool) {
    let (st, v) = p.post("/v1/events", body).await;
    assert_eq!(st, 202, "{body}: {v}");
    (v["event_id"].as_str().unwrap().to_string(), v["duplicate"].as_bool().unwrap())
}

/// A tenantless producer posting the stored id another tenant's event will
/// get (`tev_…`), the id of an idempotency key (`idk_…`) or a generated
/// shape (`evt_` + 32 hex) occupies none of them: its event is stored
/// under its own `tnx_` id (a retry of it is still a duplicate), and the
/// victims are then stored and delivered as usual. An ordinary tenantless
/// id keeps its text.
pub async fn a_tenantless_producer_cannot_occupy_another_tenants_ids(p: &impl Pipeline) {
    let r = Receiver::start().await;
    let (sub, _) = p.subscribe(json!({"callback_url": r.url("/all", Behaviour::Ok), "event_types": ["gid.*"]})).await;
    let run = fresh();
    let order = format!("order-{run}");
    let key = format!("task:{run}:failed");
    let victim_tev = stored_event_id(Some("acme"), &order);
    let victim_idk = idempotent_event_id(Some("acme"), &key);
    let generated = format!("evt_{}", &shared::ids::random_token("")[..32]);
    for squat in [victim_tev.as_str(), victim_idk.as_str(), generated.as_str()] {
        let body = json!({"id": squat, "type": "gid.squat", "data": {"squat": true}});
        let (id, dup) = post(p, &body).await;
        assert!(!dup, "{squat}");
        assert_ne!(id, squat, "a tenantless post does not occupy {squat}");
        assert!(id.starts_with("tnx_") && id.len() == 36, "{id}");
        assert_eq!(post(p, &body).await, (id.clone(), true), "a retry of the squatter is still a duplicate");
        p.settled_deliveries(&id, 1, 60).await;
    }
    // An ordinary tenantless id is stored as posted.
    let plain = format!("evt_{run}");
    assert_eq!(post(p, &json!({"id": plain, "type": "gid.plain", "data": {}})).await, (plain.clone(), false));
    let (st, v) = p.get(&format!("/v1/events/{plain}")).await;
    assert_eq!((st, v["id"].as_str()), (200, Some(plain.as_str())));

    // The victims: acme's event by id, and by idempotency key.
    let (tev, dup) =
        post(p, &json!({"id": order, "type": "gid.real", "tenant_id": "acme", "data": {"victim": 1}})).await;
    assert_eq!((tev.as_str(), dup), (victim_tev.as_str(), false), "acme's event is stored under its id");
    let contract = json!({"eventId": format!("evt_c_{run}"), "eventType": "gid.task", "version": 1,
        "occurredAt": "2026-02-19T10:10:00Z", "traceId": "req_1", "producer": "worker", "idempotencyKey": key,
        "tenantId": "acme", "payload": {"victim": 2}});
    let (idk, dup) = post(p, &contract).await;
    assert_eq!((idk.as_str(), dup), (victim_idk.as_str(), false), "acme's keyed event is stored under its id");
    for id in [&tev, &idk] {
        let d = p.settled_deliveries(id, 1, 60).await;
        assert_eq!(
            (d[0]["subscription_id"].as_str(), d[0]["status"].as_str()),
            (Some(sub.as_str()), Some("completed"))
        );
    }
    let victims: Vec<Value> = r
        .deliveries("/all")
        .iter()
        .map(|d| d.json())
        .filter(|b| !b["payload"].is_null() || !b["data"]["victim"].is_null())
        .collect();
    assert_eq!(victims.len(), 2, "both victims delivered: {victims:?}");
}

/// The ids of operational events are not computable by producers: a
/// producer that posted, beforehand, events under every id a
/// `hookline.dead_letter.created` used to get (`hookline-dead-letter-<dead
/// letter id>`, the dead letter id itself) suppresses nothing; the ops
/// channel receives it, under a `hop_` id.
pub async fn operational_events_cannot_be_suppressed_by_a_producer(p: &impl Pipeline) {
    let r = Receiver::start().await;
    let (ops, _) =
        p.subscribe(json!({"callback_url": r.url("/ops", Behaviour::Ok), "event_types": ["hookline.*"]})).await;
    let (failing, _) = p
        .subscribe(json!({"callback_url": r.url("/dead", Behaviour::Always(500)), "event_types": ["gop.*"],
                          "dead_letter_on": [500]}))
        .await;
    let event = format!("gop-{}", fresh());
    let dl = saga_id(&EventId::new(&event), &SubscriptionId::new(&failing));
    for squat in [format!("hookline-dead-letter-{dl}"), dl.to_string(), format!("hookline-enabled-{failing}-2")] {
        let (id, dup) = post(p, &json!({"id": squat, "type": "zz.squat", "data": {}})).await;
        assert_eq!((id.as_str(), dup), (squat.as_str(), false));
    }
    post(p, &json!({"id": event, "type": "gop.created", "data": {}})).await;
    let d = p.settled_deliveries(&event, 1, 60).await;
    assert_eq!(d[0]["status"], "dead_lettered", "{d:?}");
    let got = eventually(60, "hookline.dead_letter.created delivered to the ops channel", || async {
        r.deliveries("/ops").into_iter().map(|d| d.json()).find(|b| b["data"]["dead_letter_id"] == dl.as_str())
    })
    .await;
    assert_eq!(got["type"], "hookline.dead_letter.created");
    let id = got["id"].as_str().unwrap();
    assert!(id.starts_with("hop_") && id.len() == 36, "an operational id is keyed: {id}");
    let (st, v) = p.get(&format!("/v1/events/{id}/deliveries")).await;
    assert_eq!(st, 200, "{v}");
    assert!(v["items"].as_array().unwrap().iter().any(|s| s["subscription_id"] == ops.as_str()), "{v}");
    // An operational id, once seen, is still not a producer's to take: a
    // tenantless post of it is stored under its own `tnx_` id.
    let (squat, dup) = post(p, &json!({"id": id, "type": "zz.squat", "data": {}})).await;
    assert!(!dup && squat != id && squat.starts_with("tnx_"), "{squat}");
    let (st, v) = p.get(&format!("/v1/events/{id}")).await;
    assert_eq!((st, v["type"].as_str()), (200, Some("hookline.dead_letter.created")), "{v}");
}

/// The unkeyed cursor layout of before (`c1`, a plain SHA-256 checksum):
/// what anyone could compute.
fn unkeyed_cursor(after: &str, filters: &str) -> String {
    let hex = |parts: &[&str]| -> String {
        let mut h = Sha256::new();
        for p in parts {
            h.update(p.as_bytes());
            h.update([0u8]);
        }
        h.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect()
    };
    let fp = hex(&[filters]);
    let sum = hex(&["c1", &fp, after]);
    URL_SAFE_NO_PAD.encode(format!("c1\n{fp}\n{sum}\n{after}"))
}

/// Forged or edited cursors are `400 invalid_cursor` naming `cursor` on every listing,
/// and reach no store: cursors re-encoded in the old unkeyed layout, every
/// bit of a real cursor flipped in turn (sampled), and cursors issued with
/// another deployment's key. Nothing is logged as a store error.
pub async fn forged_cursors_are_refused_before_the_store(p: &impl Pipeline) {
    let ty = format!("gcur.{}", fresh());
    for n in 0..3 {
        post(p, &json!({"type": ty, "data": {"n": n}})).await;
    }
    let listing = format!("/v1/events?event_type={ty}&limit=1");
    let (st, v) = p.get(&listing).await;
    assert_eq!(st, 200, "{v}");
    let real = v["next_cursor"].as_str().expect("a next page").to_string();
    let (st, v) = p.get(&format!("{listing}&cursor={real}")).await;
    assert_eq!((st, v["items"].as_array().map(Vec::len)), (200, Some(1)), "the real cursor works: {v}");

    let other_key = hookline_api::cursor::issue(&[9; 32], "evt_0", "anything");
    let mut forged = vec![other_key];
    for (after, filters) in [("evt_0", ""), ("\u{0}", ""), ("sub_", "subscriptions"), ("x", "")] {
        forged.push(unkeyed_cursor(after, filters));
        forged.push(hookline_api::cursor::issue(&[0; 32], after, filters));
    }
    let bytes = URL_SAFE_NO_PAD.decode(&real).unwrap();
    for bit in (0..bytes.len() * 8).step_by(7) {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        forged.push(URL_SAFE_NO_PAD.encode(&b));
    }
    let listings = [
        listing.clone(),
        "/v1/subscriptions?limit=1".to_string(),
        "/v1/dead-letters?limit=1".to_string(),
        "/v1/audit?limit=1".to_string(),
    ];
    // The log from here on: on AWS one capture holds every test's lines,
    // so only this window is looked at.
    let logged_before = p.logs().await.len();
    for c in &forged {
        for l in &listings {
            let (st, v) = p.get(&format!("{l}&cursor={c}")).await;
            assert_eq!(
                (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
                (400, Some("invalid_cursor"), Some("cursor")),
                "{l} {c}: {v}"
            );
        }
    }
    let logs = p.logs().await;
    let window = logs.get(logged_before..).unwrap_or_default();
    assert!(
        !window.contains("stored record is corrupt") && !window.contains("store error"),
        "no forged cursor reached a store: {window}"
    );
}

/// An endpoint that echoes the request back (its body, or its headers)
/// does not verify and receives nothing; the documented answer
/// (`{"challenge": "…"}`, the receiver's `Ok`) still verifies.
pub async fn an_echoing_endpoint_does_not_verify(p: &impl Pipeline) {
    let r = Receiver::start().await;
    let (good, _) =
        p.subscribe(json!({"callback_url": r.url("/answers", Behaviour::Ok), "event_types": ["gecho.*"]})).await;
    let mut echoes = Vec::new();
    for (path, b) in [("/echo-body", Behaviour::EchoBody), ("/echo-headers", Behaviour::EchoHeaders)] {
        let (st, v) =
            p.post("/v1/subscriptions", &json!({"callback_url": r.url(path, b), "event_types": ["gecho.*"]})).await;
        assert_eq!(st, 201, "{v}");
        let id = v["id"].as_str().unwrap().to_string();
        let v = eventually(20, "the verification failure recorded", || async {
            let (_, v) = p.get(&format!("/v1/subscriptions/{id}")).await;
            (!v["verification_error"].is_null()).then_some(v)
        })
        .await;
        assert_eq!(v["verified"], false, "{path}: {v}");
        assert!(v["verification_error"].as_str().unwrap().contains("challenge"), "{v}");
        // The echo did carry the challenge: it is refused for its shape.
        let asked = r.requests(path);
        assert!(asked.iter().any(|d| d.is_verification()), "{path} was asked");
        echoes.push((path, id));
    }
    let (event, _) = post(p, &json!({"type": "gecho.created", "data": {}})).await;
    let d = p.settled_deliveries(&event, 1, 60).await;
    assert_eq!(d[0]["subscription_id"], good.as_str());
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (path, _) in &echoes {
        assert!(r.deliveries(path).is_empty(), "{path} received nothing");
    }
}

/// 300 rotations: a delivery carries at most three signatures (the current
/// secret's first), and the current secret verifies it.
pub async fn rotations_keep_at_most_three_signatures(p: &impl Pipeline) {
    let r = Receiver::start().await;
    let (id, _) = p.subscribe(json!({"callback_url": r.url("/rot", Behaviour::Ok), "event_types": ["grot.*"]})).await;
    let mut current = String::new();
    for _ in 0..300 {
        let (st, v) = p.post(&format!("/v1/subscriptions/{id}/rotate-secret"), &json!({})).await;
        assert_eq!(st, 200, "{v}");
        current = v["secret"].as_str().unwrap().to_string();
    }
    let (event, _) = post(p, &json!({"type": "grot.created", "data": {}})).await;
    p.settled_deliveries(&event, 1, 60).await;
    let d = r.deliveries("/rot");
    let sig = d.last().unwrap().header("webhook-signature").to_string();
    let n = sig.split(' ').filter(|s| s.starts_with("v1,")).count();
    assert_eq!(n, shared::subscription::MAX_SIGNING_SECRETS, "{sig}");
    let secret = shared::signing::Secret::parse(&current).unwrap();
    let first = sig.split(' ').next().unwrap();
    let msg = d.last().unwrap();
    let ts: i64 = msg.header("webhook-timestamp").parse().unwrap();
    assert_eq!(
        first,
        shared::signing::sign(&secret, msg.header("webhook-id"), ts, &msg.body),
        "the current secret first"
    );
}

/// The small validations, each a clear error naming the field that writes
/// nothing: a `reason` with control characters or too long; time bounds
/// outside the retention (year 1, year 9999); representation headers as
/// custom headers.
pub async fn the_small_validations_name_the_field_and_write_nothing(p: &impl Pipeline) {
    let r = Receiver::start().await;
    let (sub, _) = p.subscribe(json!({"callback_url": r.url("/val", Behaviour::Ok), "event_types": ["gval.*"]})).await;
    let (event, _) = post(p, &json!({"type": "gval.created", "data": {}})).await;
    p.settled_deliveries(&event, 1, 60).await;
    let (_, before) = p.get(&format!("/v1/audit?subscription_id={sub}&limit=1000")).await;
    let audit_before = before["items"].as_array().map(Vec::len);

    let long = "x".repeat(1001);
    for reason in ["fixed\u{1b}[31m", "fixed\r\nactor: root", "fixed\nnext", "a\u{202e}b", long.as_str()] {
        for (path, body) in [
            (format!("/v1/events/{event}/replay"), json!({"reason": reason})),
            ("/v1/replays".to_string(), json!({"event_id": event, "reason": reason})),
            ("/v1/dead-letters/requeue".to_string(), json!({"filter": {"subscription_id": sub}, "reason": reason})),
            ("/v1/dead-letters/skip".to_string(), json!({"filter": {}, "reason": reason})),
        ] {
            let (st, v) = p.post(&path, &body).await;
            assert_eq!(
                (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
                (422, Some("invalid_field"), Some("reason")),
                "{path} {reason:?}: {v}"
            );
        }
    }
    for t in ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"] {
        let q = t.replace(':', "%3A");
        for (path, field) in [
            (format!("/v1/events?since={q}"), "since"),
            (format!("/v1/events?until={q}"), "until"),
            (format!("/v1/dead-letters?since={q}"), "since"),
            (format!("/v1/audit?until={q}"), "until"),
        ] {
            let (st, v) = p.get(&path).await;
            assert_eq!((st, v["error"]["field"].as_str()), (422, Some(field)), "{path}: {v}");
        }
        let (st, v) = p.post("/v1/replays", &json!({"since": t, "until": t, "reason": "x"})).await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some("since")), "{v}");
        let (st, v) = p.post("/v1/dead-letters/requeue", &json!({"filter": {"until": t}, "reason": "x"})).await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some("filter.until")), "{v}");
    }
    let (_, subs_before) = p.get("/v1/subscriptions?limit=1000").await;
    for name in ["Content-Encoding", "content-range", "Content-Language", "Digest", "Content-Type", "Transfer-Encoding"]
    {
        let body =
            json!({"callback_url": r.url("/hdr", Behaviour::Ok), "event_types": ["gval.*"], "headers": {name: "gzip"}});
        let (st, v) = p.post("/v1/subscriptions", &body).await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some(format!("headers.{name}").as_str())), "{v}");
        let (st, v) = p
            .call(
                "PATCH",
                &format!("/v1/subscriptions/{sub}"),
                Some(json!({"headers": {name: "gzip"}}).to_string().as_bytes()),
            )
            .await;
        assert_eq!((st, v["error"]["field"].as_str()), (422, Some(format!("headers.{name}").as_str())), "{v}");
    }
    let (_, subs_after) = p.get("/v1/subscriptions?limit=1000").await;
    assert_eq!(subs_before["items"].as_array().map(Vec::len), subs_after["items"].as_array().map(Vec::len));
    let (_, s) = p.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!(s["headers"], json!({}), "nothing patched");
    let (_, after) = p.get(&format!("/v1/audit?subscription_id={sub}&limit=1000")).await;
    assert_eq!(after["items"].as_array().map(Vec::len), audit_before, "no audit record: nothing was done");
    assert!(r.deliveries("/val").len() == 1, "no replay happened");
}

/// Waits until `sub` has `n` open dead letters.
async fn open_dead_letters(p: &impl Pipeline, sub: &str, n: usize) {
    eventually(90, &format!("{n} open dead letters"), || async {
        let (_, v) = p.get(&format!("/v1/dead-letters?subscription_id={sub}&state=open&limit=100")).await;
        (v["items"].as_array().map(Vec::len) == Some(n)).then_some(())
    })
    .await;
}

/// Jobs are bounded per tenant (`JOBS_PER_TENANT` 2, `JOB_MAX_ITEMS` 5):
/// a job is counted before it starts (`items` in its `202` and on `GET
/// /v1/jobs/{id}`); one taking more than 5 is `422 job_too_large` naming
/// `filter`, nothing started; a third running job of one tenant is `429
/// too_many_jobs` with `Retry-After`, naming the cap, while another tenant
/// still starts its own; a tenant's finished jobs free their slots.
pub async fn jobs_are_bounded_per_tenant(p: &mut impl Pipeline) {
    let hold = format!("hold{}", fresh());
    // The jobs of tenant `hold` stay running: their first page fails to plan.
    p.inject_failures(&[(&format!("bulk.plan@{hold}"), 1000)]).await;
    let r = Receiver::start().await;
    let mut subs = Vec::new();
    let mut events = Vec::new();
    for tenant in [hold.as_str(), "gfree"] {
        let (sub, _) = p
            .subscribe(
                json!({"callback_url": r.url(&format!("/{tenant}"), Behaviour::Always(500)), "event_types": ["gjob.*"],
                              "tenant_id": tenant, "dead_letter_on": [500]}),
            )
            .await;
        for n in 0..6 {
            let ty = if n < 3 { "gjob.a" } else { "gjob.b" };
            events.push(post(p, &json!({"type": ty, "tenant_id": tenant, "data": {"n": n}})).await.0);
        }
        open_dead_letters(p, &sub, 6).await;
        subs.push(sub);
    }
    let (held, free) = (&subs[0], &subs[1]);

    // Too large: 6 > 5, refused, nothing started.
    let (st, v) = p.post("/v1/dead-letters/skip", &json!({"filter": {"subscription_id": held}, "reason": "x"})).await;
    assert_eq!(
        (st, v["error"]["code"].as_str(), v["error"]["field"].as_str()),
        (422, Some("job_too_large"), Some("filter")),
        "{v}"
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("JOB_MAX_ITEMS = 5"), "{v}");

    // Counted: 3 each; both stay running (their planning fails).
    let job_of =
        |ty: &str, sub: &str| json!({"filter": {"subscription_id": sub, "event_type": ty}, "reason": "endpoint fixed"});
    let (st, v) = p.post("/v1/dead-letters/skip", &job_of("gjob.a", held)).await;
    assert_eq!((st, v["items"].as_u64()), (202, Some(3)), "{v}");
    let (st, v) = p.post("/v1/dead-letters/skip", &job_of("gjob.b", held)).await;
    assert_eq!((st, v["items"].as_u64()), (202, Some(3)), "{v}");
    let (st, job) = p.get(&format!("/v1/jobs/{}", v["job_id"].as_str().unwrap())).await;
    assert_eq!(
        (st, job["items"].as_u64(), job["tenant_id"].as_str(), job["state"].as_str()),
        (200, Some(3), Some(hold.as_str()), Some("running")),
        "{job}"
    );

    // The third running job of the tenant: 429 with Retry-After.
    let body = serde_json::to_vec(&job_of("gjob.a", held)).unwrap();
    let (st, v, headers) = p.call_full("POST", "/v1/dead-letters/requeue", Some(&body), &[]).await;
    assert_eq!((st, v["error"]["code"].as_str()), (429, Some("too_many_jobs")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("JOBS_PER_TENANT = 2"), "{v}");
    assert_eq!(headers.get("retry-after").map(String::as_str), Some("30"), "{headers:?}");
    // A replay of one of its events is the event's tenant's job.
    let (st, v) = p.post("/v1/replays", &json!({"event_id": events[0], "reason": "x"})).await;
    assert_eq!((st, v["error"]["code"].as_str()), (429, Some("too_many_jobs")), "a replay counts too: {v}");
    let (_, dls) = p.get(&format!("/v1/dead-letters?subscription_id={held}&state=open&limit=100")).await;
    assert_eq!(dls["items"].as_array().map(Vec::len), Some(6), "nothing was skipped or requeued");

    // Another tenant is not held up, and its finished jobs free their slots.
    for ty in ["gjob.a", "gjob.b", "gjob.a"] {
        let (st, v) = p.post("/v1/dead-letters/skip", &job_of(ty, free)).await;
        assert_eq!(st, 202, "{v}");
        let id = v["job_id"].as_str().unwrap().to_string();
        eventually(90, "the job completed", || async {
            let (_, j) = p.get(&format!("/v1/jobs/{id}")).await;
            (j["state"] == "completed").then_some(())
        })
        .await;
    }
    let (_, dls) = p.get(&format!("/v1/dead-letters?subscription_id={free}&state=open&limit=100")).await;
    assert_eq!(dls["items"].as_array().map(Vec::len), Some(0), "the free tenant's jobs ran");
    // Only job ids are jobs.
    let (st, _) = p.get(&format!("/v1/jobs/slots%23t%3A{hold}")).await;
    assert_eq!(st, 404);
}

/// The scenarios of this module for one backend.
#[macro_export]
macro_rules! guard_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, guard_scenarios;
            a_tenantless_producer_cannot_occupy_another_tenants_ids,
            operational_events_cannot_be_suppressed_by_a_producer,
            forged_cursors_are_refused_before_the_store,
            an_echoing_endpoint_does_not_verify,
            rotations_keep_at_most_three_signatures,
            the_small_validations_name_the_field_and_write_nothing,
            jobs_are_bounded_per_tenant; $crate::pipeline::Settings::default().job_bounds(2, 5),
        );
    };
}
