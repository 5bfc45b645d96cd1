//! Every documented error code is reachable, on both backends
//! (`tests/tests/serve`, `tests/tests/aws`): a table from each
//! [`ErrorCode`] to a request that produces it ([`reach`], an exhaustive
//! `match`, so a code added to the table without a case does not compile),
//! each answered with the code's status and the code in the error body.
//! A code no request can produce on a backend names the test that reaches
//! it where it can be (`request_timeout` is `hookline serve`'s listener,
//! behind which the AWS backend has API Gateway).

use serde_json::{json, Value};
use shared::access::Role;

use crate::pipeline::{Credential, Pipeline};
use crate::{eventually, Behaviour, Receiver};
use hookline_api::ErrorCode;

/// What one case came to.
enum Reached {
    /// The answer of the request that should produce the code.
    Answer(u16, Value),
    /// Reached by another test (named), not through this table.
    Elsewhere(&'static str),
}

/// What the cases share: a receiver, a tenant whose bulk jobs stay
/// running, an ordered subscription whose lane a dead letter holds, an
/// unordered one of that tenant with three open dead letters (of types
/// `.a`, `.b`, `.c`), and an event.
struct Fixture {
    receiver_url_ok: String,
    ordered: String,
    held_partition: String,
    resolvable_dead_letter: String,
    unordered: String,
    unordered_dead_letters: usize,
    one_item_type: String,
    event: String,
    store_failing_event: String,
}

/// A fresh suffix.
fn fresh() -> String {
    shared::ids::random_token("").get(..10).unwrap_or_default().to_lowercase()
}

/// POSTs raw bytes with headers.
async fn raw<P: Pipeline>(p: &P, method: &str, path: &str, body: &[u8], headers: &[(&str, &str)]) -> Reached {
    let (st, v) = p.call_with_headers(method, path, Some(body), headers).await;
    Reached::Answer(st, v)
}

/// POSTs JSON.
async fn post<P: Pipeline>(p: &P, path: &str, body: &Value) -> Reached {
    let (st, v) = p.post(path, body).await;
    Reached::Answer(st, v)
}

/// The open dead letters of a subscription.
async fn open_dead_letters<P: Pipeline>(p: &P, sub: &str, n: usize) -> Vec<String> {
    eventually(90, "dead letters", || async {
        let (_, v) = p.get(&format!("/v1/dead-letters?subscription_id={sub}&state=open&limit=100")).await;
        let ids: Vec<String> =
            v["items"].as_array()?.iter().filter_map(|d| d["id"].as_str().map(str::to_string)).collect();
        (ids.len() >= n).then_some(ids)
    })
    .await
}

/// Sets up what the cases share (see [`Fixture`]).
async fn fixture<P: Pipeline>(p: &mut P, r: &Receiver) -> Fixture {
    let tag = fresh();
    let held_tenant = format!("ecjobs{tag}");
    let store_failing_event = format!("ec-store-{tag}");
    // Bulk jobs of `held_tenant` stay running (their planning fails); a
    // read of `store_failing_event` is a storage error.
    p.inject_failures(&[(&format!("bulk.plan@{held_tenant}"), 1000), (&format!("api.store@{store_failing_event}"), 1)])
        .await;
    let failing = r.url(&format!("/ec-fail-{tag}"), Behaviour::Always(500));
    let (ordered, _) = p
        .subscribe(json!({"callback_url": failing, "event_types": [format!("ec{tag}.lane")], "ordering": "partition",
                          "on_dead_letter": "block", "dead_letter_on": [500]}))
        .await;
    let held_partition = format!("pk-{tag}");
    let (st, v) = p
        .post("/v1/events", &json!({"type": format!("ec{tag}.lane"), "partition_key": held_partition, "data": {}}))
        .await;
    assert_eq!(st, 202, "{v}");
    open_dead_letters(p, &ordered, 1).await;

    let (unordered, _) = p
        .subscribe(
            json!({"callback_url": failing, "event_types": [format!("ec{tag}.bulk.*")], "tenant_id": held_tenant,
                          "dead_letter_on": [500]}),
        )
        .await;
    let mut event = String::new();
    for ty in ["a", "b", "c"] {
        let (st, v) = p
            .post("/v1/events", &json!({"type": format!("ec{tag}.bulk.{ty}"), "tenant_id": held_tenant, "data": {}}))
            .await;
        assert_eq!(st, 202, "{v}");
        event = v["event_id"].as_str().unwrap().to_string();
    }
    let unordered_dead_letters = open_dead_letters(p, &unordered, 3).await.len();
    let (_, v) =
        p.get(&format!("/v1/dead-letters?subscription_id={unordered}&event_type=ec{tag}.bulk.c&state=open")).await;
    let resolvable_dead_letter = v["items"][0]["id"].as_str().expect("the dead letter of bulk.c").to_string();
    Fixture {
        receiver_url_ok: r.url(&format!("/ec-ok-{tag}"), Behaviour::Ok),
        ordered,
        held_partition,
        resolvable_dead_letter,
        unordered,
        unordered_dead_letters,
        one_item_type: format!("ec{tag}.bulk.a"),
        event,
        store_failing_event,
    }
}

/// The request that produces `code`.
async fn reach<P: Pipeline>(p: &P, f: &Fixture, code: ErrorCode) -> Reached {
    let sub = |extra: Value| {
        let mut body = json!({"callback_url": f.receiver_url_ok, "event_types": ["ec.*"]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    match code {
        ErrorCode::MalformedJson => raw(p, "POST", "/v1/subscriptions", b"{\"callback_url\": ", &[]).await,
        ErrorCode::NotAnObject => raw(p, "POST", "/v1/subscriptions", b"[1, 2]", &[]).await,
        ErrorCode::MissingField => post(p, "/v1/subscriptions", &json!({"callback_url": f.receiver_url_ok})).await,
        ErrorCode::UnknownField => post(p, "/v1/subscriptions", &sub(json!({"callback": "x"}))).await,
        ErrorCode::InvalidType => post(p, "/v1/subscriptions", &sub(json!({"max_in_flight": "ten"}))).await,
        ErrorCode::UnknownParameter => {
            let (st, v) = p.get("/v1/dead-letters?tenant=acme").await;
            Reached::Answer(st, v)
        }
        ErrorCode::InvalidPath => {
            let (st, v) = p.get("/v1/events/%FF%FE").await;
            Reached::Answer(st, v)
        }
        ErrorCode::UnknownFormat => post(p, "/v1/events?format=yaml", &json!({"type": "ec.x", "data": {}})).await,
        ErrorCode::UnknownEnvelope => post(p, "/v1/events", &json!({"hello": "world"})).await,
        ErrorCode::InvalidBatch => post(p, "/v1/events/batch", &json!([])).await,
        ErrorCode::InvalidCursor => {
            let (st, v) = p.get("/v1/dead-letters?cursor=bm90LWlzc3VlZC1oZXJlLWF0LWFsbA").await;
            Reached::Answer(st, v)
        }
        ErrorCode::Unauthorized if p.actor().starts_with("arn:") => Reached::Elsewhere(
            "nowhere on AWS: API Gateway refuses an unsigned request itself, and a signed one without a grant is 403 \
             forbidden",
        ),
        ErrorCode::Unauthorized => {
            let nobody = Credential {
                id: String::new(),
                actor: String::new(),
                secret: Some("hlk_not_a_key_of_this_deployment".into()),
                principal: None,
            };
            let (st, v) = p.call_as(&nobody, "GET", "/v1/events", None, &[]).await;
            Reached::Answer(st, v)
        }
        ErrorCode::Forbidden => {
            let reader = p.credential(Role::Reader, None).await;
            let body = serde_json::to_vec(&sub(json!({}))).unwrap();
            let (st, v) = p.call_as(&reader, "POST", "/v1/subscriptions", Some(&body), &[]).await;
            Reached::Answer(st, v)
        }
        ErrorCode::NotFound => {
            let (st, v) = p.get(&format!("/v1/events/ec-none-{}", fresh())).await;
            Reached::Answer(st, v)
        }
        ErrorCode::MethodNotAllowed => raw(p, "PUT", "/v1/events", b"{}", &[]).await,
        ErrorCode::RequestTimeout => Reached::Elsewhere(
            "hookline serve's listener: tests/tests/serve/listener.rs a_stalled_body_gets_408_and_the_connection_closes",
        ),
        ErrorCode::Conflict => {
            let path = format!("/v1/dead-letters/{}/skip", f.resolvable_dead_letter);
            let (st, v) = p.post(&path, &json!({"reason": "error-code table"})).await;
            assert_eq!(st, 200, "the first skip: {v}");
            post(p, &path, &json!({"reason": "error-code table"})).await
        }
        ErrorCode::ListingOff => Reached::Elsewhere(
            "a deployment with EVENT_LISTING off: tests/src/scenarios/finding.rs \
             without_the_time_listing_events_are_found_by_id_partition_and_outcome",
        ),
        ErrorCode::LaneNotBlocked => {
            let path = format!("/v1/subscriptions/{}/lanes/pk-never-{}/skip", f.ordered, fresh());
            post(p, &path, &json!({"reason": "error-code table"})).await
        }
        ErrorCode::LaneHeldByDeadLetter => {
            let path = format!("/v1/subscriptions/{}/lanes/{}/skip", f.ordered, f.held_partition);
            post(p, &path, &json!({"reason": "error-code table"})).await
        }
        ErrorCode::NotOrdered => {
            let path = format!("/v1/subscriptions/{}/lanes/pk/skip", f.unordered);
            post(p, &path, &json!({"reason": "error-code table"})).await
        }
        ErrorCode::IdempotencyConflict => {
            let key = format!("ec-idem-{}", fresh());
            let headers = [("Idempotency-Key", key.as_str())];
            let first = serde_json::to_vec(&sub(json!({"description": "first"}))).unwrap();
            let (st, v) = p.call_with_headers("POST", "/v1/subscriptions", Some(&first), &headers).await;
            assert_eq!(st, 201, "the first keyed create: {v}");
            let other = serde_json::to_vec(&sub(json!({"description": "another body"}))).unwrap();
            raw(p, "POST", "/v1/subscriptions", &other, &headers).await
        }
        // Two keyed creates racing over HTTP reach this only by chance; the
        // deterministic case holds the key's claim in the store first and
        // then calls the API (its router, over both backends' real stores).
        ErrorCode::IdempotencyInProgress => Reached::Elsewhere(
            "tests/src/idempotency_scenarios.rs a_running_first_request_holds_its_key_until_its_lease_is_over (both \
             backends: a claim held by a running first request answers 409 idempotency_in_progress with Retry-After)",
        ),
        ErrorCode::PayloadTooLarge => {
            let big = json!({"type": "ec.big", "data": "x".repeat(300 * 1024)});
            post(p, "/v1/events", &big).await
        }
        ErrorCode::InvalidField => post(p, "/v1/subscriptions", &sub(json!({"event_types": ["not a pattern!"]}))).await,
        ErrorCode::InvalidHeader => {
            let key = "k".repeat(300);
            let body = serde_json::to_vec(&json!({"type": "ec.x", "data": {}})).unwrap();
            raw(p, "POST", "/v1/events", &body, &[("Idempotency-Key", &key)]).await
        }
        ErrorCode::ReasonRequired => {
            post(p, "/v1/dead-letters/requeue", &json!({"filter": {"subscription_id": f.unordered}, "reason": "  "})).await
        }
        ErrorCode::InvalidRange => {
            let now = chrono::Utc::now();
            let (since, until) = (now.to_rfc3339(), (now - chrono::Duration::hours(1)).to_rfc3339());
            let path = format!("/v1/events?since={}&until={}", enc(&since), enc(&until));
            let (st, v) = p.get(&path).await;
            Reached::Answer(st, v)
        }
        ErrorCode::InvalidLimit => post(p, "/v1/subscriptions", &sub(json!({"max_in_flight": 0}))).await,
        ErrorCode::InvalidCallbackUrl => {
            post(p, "/v1/subscriptions", &sub(json!({"callback_url": "https://10.1.2.3/hooks"}))).await
        }
        ErrorCode::InvalidRetrySchedule => {
            post(p, "/v1/subscriptions", &sub(json!({"retry_policy": {"schedule_ms": []}}))).await
        }
        ErrorCode::RetryScheduleTooLong => {
            let policy = json!({"max_attempts": 50, "base_delay_ms": 1000, "max_delay_ms": 86_400_000u64});
            post(p, "/v1/subscriptions", &sub(json!({"retry_policy": policy}))).await
        }
        ErrorCode::InvalidDeadLetterOn => post(p, "/v1/subscriptions", &sub(json!({"dead_letter_on": [200]}))).await,
        ErrorCode::JobTooLarge => {
            assert!(f.unordered_dead_letters > 1, "the fixture has more dead letters than JOB_MAX_ITEMS");
            post(p, "/v1/dead-letters/skip", &json!({"filter": {"subscription_id": f.unordered}, "reason": "x"})).await
        }
        ErrorCode::SubscriptionNotMatching => {
            post(p, &format!("/v1/events/{}/replay", f.event), &json!({"reason": "x", "subscription_id": f.ordered}))
                .await
        }
        ErrorCode::TooManyJobs => {
            // JOBS_PER_TENANT is 1 here: a job of the held tenant (over one
            // dead letter) stays running, so the next one is refused.
            let one = json!({"filter": {"subscription_id": f.unordered, "event_type": f.one_item_type}, "reason": "x"});
            let (st, v) = p.post("/v1/dead-letters/skip", &one).await;
            assert_eq!(st, 202, "the job that stays running: {v}");
            post(p, "/v1/dead-letters/skip", &one).await
        }
        ErrorCode::Unavailable => {
            let (st, v) = p.get(&format!("/v1/events/{}", f.store_failing_event)).await;
            Reached::Answer(st, v)
        }
    }
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    crate::input_scenarios::enc(s)
}

/// Every [`ErrorCode`] is answered, with its status and its code, by the
/// request of its case; reports every code that is not.
pub async fn every_documented_error_code_is_reachable<P: Pipeline>(p: &mut P) {
    let r = Receiver::start().await;
    let f = fixture(p, &r).await;
    let mut wrong = Vec::new();
    let mut reached = 0;
    for &code in ErrorCode::ALL {
        match reach(p, &f, code).await {
            Reached::Answer(st, v) => {
                if (st, v["error"]["code"].as_str()) == (code.status(), Some(code.as_str())) {
                    reached += 1;
                } else {
                    wrong.push(format!("{code} (expected {}): got {st} {v}", code.status()));
                }
            }
            Reached::Elsewhere(test) => eprintln!("{code}: reached by {test}"),
        }
    }
    assert!(wrong.is_empty(), "error codes not reached ({reached} were):\n  {}", wrong.join("\n  "));
}

/// The contract is served: `GET /openapi.json` is the document the code
/// generates (every route of the route table in it), `GET /docs` the
/// reference page, both `200` on either backend.
pub async fn the_openapi_document_and_the_reference_page_are_served<P: Pipeline>(p: &mut P) {
    let (st, doc) = p.get("/openapi.json").await;
    assert_eq!(st, 200, "{doc}");
    assert_eq!(doc, serde_json::to_value(hookline_api::openapi::document()).unwrap(), "the served document");
    for r in hookline_api::routes::ROUTES {
        assert!(
            !doc["paths"][r.path][r.method.to_lowercase()].is_null(),
            "{} {} is not in the served document",
            r.method,
            r.path
        );
    }
    let (st, _, headers) = p.call_full("GET", "/docs", None, &[]).await;
    assert_eq!(st, 200);
    assert_eq!(headers.get("content-type").map(String::as_str), Some("text/html; charset=utf-8"));
}

/// The scenarios of this module as tests of one backend
/// (`hookline_tests::error_code_scenario_tests!(aws)`, `(serve)`); the
/// error-code table with one job per tenant and at most one item per job,
/// so a second job and a job over two dead letters are refused.
#[macro_export]
macro_rules! error_code_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, error_code_scenarios;
            every_documented_error_code_is_reachable; $crate::pipeline::Settings::default().job_bounds(1, 1),
            the_openapi_document_and_the_reference_page_are_served,
        );
    };
}
