//! Ordered lanes cannot wedge (docs/delivery.md#lanes-that-cannot-wedge),
//! on both backends: a missing head is taken out, a lost routing is looked
//! at with a doubling wait and passed automatically (its event expired) or
//! by ops (`POST /v1/subscriptions/{id}/lanes/{key}/skip`), a blocked lane
//! shows in `GET /v1/subscriptions/{id}`, sagas behind a blocking dead letter
//! are waiting (not stalled) for the reconciler, and deleting the
//! subscription ends them.
//!
//! What retention and time do is simulated through [`Retention`]: removing
//! a saga or an event as TTL or the purge would, and moving a waiting
//! saga's due time an hour back (as an hour of waiting would).

use std::time::Duration;

use serde_json::{json, Value};

use crate::pipeline::Pipeline;
use crate::{Behaviour, Receiver};

/// What retention and the passing of time do to stored records, done now.
pub trait Retention {
    /// Removes every saga of an event, as its retention would.
    fn expire_sagas(&self, event_id: &str) -> impl std::future::Future<Output = ()> + Send;
    /// Removes an event, as its retention would.
    fn expire_event(&self, event_id: &str) -> impl std::future::Future<Output = ()> + Send;
    /// Moves the due time of an event's watched sagas an hour back.
    fn age_sagas(&self, event_id: &str) -> impl std::future::Future<Output = ()> + Send;
}

const HOUR_MS: i64 = 3_600_000;

impl Retention for crate::Server {
    async fn expire_sagas(&self, event_id: &str) {
        let c = rusqlite::Connection::open(&self.db).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        assert!(c.execute("DELETE FROM sagas WHERE event_id = ?1", [event_id]).unwrap() > 0, "sagas of {event_id}");
    }

    async fn expire_event(&self, event_id: &str) {
        let c = rusqlite::Connection::open(&self.db).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(c.execute("DELETE FROM events WHERE id = ?1", [event_id]).unwrap(), 1, "event {event_id}");
    }

    async fn age_sagas(&self, event_id: &str) {
        let c = rusqlite::Connection::open(&self.db).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        c.execute(
            "UPDATE sagas SET due_at = due_at - ?2 WHERE event_id = ?1 AND due_at IS NOT NULL",
            rusqlite::params![event_id, HOUR_MS],
        )
        .unwrap();
    }
}

/// A client outside the strict checker: these are the emulator's own doing
/// (TTL), not a function's request.
async fn raw_dynamodb() -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&crate::emulator::aws_config().await)
}

async fn saga_keys(p: &crate::aws_pipeline::AwsPipeline, event_id: &str) -> Vec<(String, Option<i64>)> {
    use aws_sdk_dynamodb::types::AttributeValue;
    let out = raw_dynamodb()
        .await
        .query()
        .table_name(&p.backend.names.sagas_table)
        .key_condition_expression("event_id = :e")
        .expression_attribute_values(":e", AttributeValue::S(event_id.to_string()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    out.items()
        .iter()
        .map(|i| {
            let id = i["id"].as_s().unwrap().clone();
            let due = i.get("due_at").and_then(|d| d.as_n().ok()).and_then(|n| n.parse().ok());
            (id, due)
        })
        .collect()
}

impl Retention for crate::aws_pipeline::AwsPipeline {
    async fn expire_sagas(&self, event_id: &str) {
        use aws_sdk_dynamodb::types::AttributeValue;
        let keys = saga_keys(self, event_id).await;
        assert!(!keys.is_empty(), "sagas of {event_id}");
        for (id, _) in keys {
            raw_dynamodb()
                .await
                .delete_item()
                .table_name(&self.backend.names.sagas_table)
                .key("event_id", AttributeValue::S(event_id.to_string()))
                .key("id", AttributeValue::S(id))
                .send()
                .await
                .unwrap();
        }
    }

    async fn expire_event(&self, event_id: &str) {
        use aws_sdk_dynamodb::types::AttributeValue;
        raw_dynamodb()
            .await
            .delete_item()
            .table_name(&self.backend.names.events_table)
            .key("id", AttributeValue::S(event_id.to_string()))
            .send()
            .await
            .unwrap();
    }

    async fn age_sagas(&self, event_id: &str) {
        use aws_sdk_dynamodb::types::AttributeValue;
        for (id, due) in saga_keys(self, event_id).await {
            let Some(due) = due else { continue };
            raw_dynamodb()
                .await
                .update_item()
                .table_name(&self.backend.names.sagas_table)
                .key("event_id", AttributeValue::S(event_id.to_string()))
                .key("id", AttributeValue::S(id))
                .update_expression("SET due_at = :d")
                .expression_attribute_values(":d", AttributeValue::N((due - HOUR_MS).to_string()))
                .send()
                .await
                .unwrap();
        }
    }
}

/// A partition key no other test uses (the AWS tests share one log).
fn unique(tag: &str) -> String {
    format!("{tag}-{}", shared::ids::new_subscription_id().as_str().trim_start_matches("sub_"))
}

async fn post_event<P: Pipeline>(p: &P, body: Value) -> String {
    let (st, v) = p.post("/v1/events", &body).await;
    assert_eq!(st, 202, "{v}");
    v["event_id"].as_str().unwrap().to_string()
}

/// The one saga of an event for `sub`, once it has this status.
async fn saga_with_status<P: Pipeline>(p: &P, event_id: &str, status: &str, secs: u64) -> Value {
    let path = format!("/v1/events/{event_id}/deliveries");
    crate::eventually(secs, &format!("{event_id} {status}"), || async {
        let (_, v) = p.get(&path).await;
        v["items"].as_array().and_then(|d| d.iter().find(|s| s["status"] == status).cloned())
    })
    .await
}

/// The `hookline-sequence` numbers delivered to `path` for partition `key`.
fn delivered(r: &Receiver, path: &str, key: &str) -> Vec<u64> {
    r.successes(path)
        .iter()
        .filter(|d| d.header("hookline-partition-key") == key)
        .map(|d| d.header("hookline-sequence").parse().unwrap())
        .collect()
}

async fn ordered<P: Pipeline>(p: &P, r: &Receiver, path: &str, extra: Value) -> String {
    let mut body = json!({"callback_url": r.url(path, Behaviour::FailMatching("\"poison\":true".into(), 500)),
                          "event_types": ["lane.*"], "ordering": "partition"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    p.subscribe(body).await.0
}

/// A lane whose head's saga expired while later events waited heals: the
/// next event that looks at the lane takes the missing head out and the
/// waiting ones go, in order; with no further event, the reconciler does it
/// (the waiting saga past its due time finds its head missing).
pub async fn missing_head_is_taken_out<P: Pipeline + Retention>(p: &P) {
    let r = Receiver::start().await;
    // The poisoned head retries slowly: it is PendingRetry when it expires.
    let policy = json!({"retry_policy": {"max_attempts": 5, "base_delay_ms": 120000, "max_delay_ms": 120000}});
    ordered(p, &r, "/mh", policy).await;
    for (key, heal_by_event) in [(unique("mh-next"), true), (unique("mh-rec"), false)] {
        let post = |i: u32, poison: bool| {
            post_event(p, json!({"type": "lane.x", "partition_key": key, "data": {"i": i, "poison": poison}}))
        };
        let head = post(1, true).await;
        saga_with_status(p, &head, "pending_retry", 30).await;
        let second = post(2, false).await;
        saga_with_status(p, &second, "waiting", 30).await;
        p.expire_sagas(&head).await;
        if heal_by_event {
            post(3, false).await;
            crate::eventually(30, "the lane healed by its next event", || async {
                (delivered(&r, "/mh", &key) == [2, 3]).then_some(())
            })
            .await;
        } else {
            p.age_sagas(&second).await;
            crate::eventually(30, "the lane healed by the reconciler", || async {
                p.reconcile().await;
                (delivered(&r, "/mh", &key) == [2]).then_some(())
            })
            .await;
        }
    }
}

/// The `next_look_ms` of each "waits for … routed" line logged for `key`.
fn routing_looks(logs: &str, key: &str) -> Vec<u64> {
    logs.lines()
        .filter(|l| l.contains("to be routed") && l.contains(key))
        .filter_map(|l| {
            let rest = &l[l.find("next_look_ms")? + "next_look_ms".len()..];
            let digits: String =
                rest.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

/// An event whose routing is lost (it fails every time) leaves a gap: the
/// next event of its partition waits, looking again after 1 s, 2 s, 4 s…
/// (never every second), and its lane shows as blocked; ops skip the gap and
/// it goes. In another partition the lost event has expired: the
/// reconciler passes its number by itself.
pub async fn lost_routing_is_looked_at_with_backoff_then_skipped<P: Pipeline + Retention>(p: &mut P) {
    let r = Receiver::start().await;
    let sub = ordered(p, &r, "/gap", json!({})).await;
    let (key, gone) = (unique("gap-ops"), unique("gap-expired"));
    let lost = [format!("lost-{key}"), format!("lost-{gone}")];
    let failures: Vec<String> = lost.iter().map(|id| format!("route.store@{id}")).collect();
    p.inject_failures(&failures.iter().map(|f| (f.as_str(), 100_000)).collect::<Vec<_>>()).await;
    let post = |key: &str, id: Option<&str>, i: u32| {
        let mut body = json!({"type": "lane.x", "partition_key": key, "data": {"i": i}});
        if let Some(id) = id {
            body["id"] = json!(id);
        }
        post_event(p, body)
    };
    let lost_ops = post(&key, Some(&lost[0]), 1).await;
    assert_eq!(lost_ops, lost[0], "the producer's id is the stored id");
    let waiting = post(&key, None, 2).await;
    saga_with_status(p, &waiting, "waiting", 30).await;
    // Looks 1 s, 2 s, 4 s apart: a doubling wait.
    let looks = crate::eventually(30, "three looks at the gap", || async {
        let looks = routing_looks(&p.logs().await, &key);
        (looks.len() >= 3).then_some(looks)
    })
    .await;
    assert!(looks.windows(2).all(|w| w[1] > w[0]), "each look waits longer: {looks:?}");
    assert!(looks[1] >= 1900 && looks[2] >= 3900, "1 s, 2 s, 4 s…, not every second: {looks:?}");
    // The lane shows as blocked, since the wait began.
    let path = format!("/v1/subscriptions/{sub}");
    let lane = crate::eventually(30, "the blocked lane shown", || async {
        let (_, v) = p.get(&path).await;
        v["blocked_lanes"].as_array().and_then(|l| l.iter().find(|b| b["partition_key"] == key.as_str()).cloned())
    })
    .await;
    assert!(lane["since"].is_string() && lane["reason"].as_str().unwrap().contains("not routed"), "{lane}");
    assert!(delivered(&r, "/gap", &key).is_empty(), "nothing goes past the gap");
    // Ops skip it, with a reason; the waiting event goes.
    let skip = format!("/v1/subscriptions/{sub}/lanes/{key}/skip");
    let (st, v) = p.call("POST", &skip, Some(br#"{}"#)).await;
    assert_eq!((st, v["error"]["code"].as_str()), (422, Some("reason_required")), "a reason is required: {v}");
    let (st, v) = p.call("POST", &skip, Some(br#"{"reason": "event lost upstream"}"#)).await;
    assert_eq!((st, &v["skipped"], &v["from_seq"]), (200, &json!("gap"), &json!(1)), "{v}");
    crate::eventually(30, "the event after the skipped gap", || async {
        (delivered(&r, "/gap", &key) == [2]).then_some(())
    })
    .await;
    let (_, v) = p.get(&path).await;
    assert!(!v["blocked_lanes"].as_array().unwrap().iter().any(|b| b["partition_key"] == key.as_str()), "{v}");
    let (_, audit) = p.get(&format!("/v1/audit?action=lane.skipped&subscription_id={sub}")).await;
    let rec = &audit["items"][0];
    assert_eq!((&rec["reason"], &rec["actor"]), (&json!("event lost upstream"), &json!(p.actor())), "{audit}");
    // The saga after the gap was delivered: once it has left its lane, a
    // skip finds nothing to skip. The receiver sees the delivery before the
    // saga stage records it and the saga leaves, so a skip in between may
    // take out that saga's entry, and only that one (it is leaving anyway).
    let (st, v) = p.call("POST", &skip, Some(br#"{"reason": "again"}"#)).await;
    let (st, v) = if st == 200 {
        assert_eq!(v["skipped"], "head", "only the leaving saga's entry may be taken out: {v}");
        let (_, saga) = p.get(&format!("/v1/events/{waiting}/deliveries")).await;
        assert!(saga.to_string().contains(v["saga_id"].as_str().unwrap_or("-")), "{v} is not {saga}");
        p.call("POST", &skip, Some(br#"{"reason": "again"}"#)).await
    } else {
        (st, v)
    };
    assert_eq!(st, 409, "nothing holds the lane any more: {v}");

    // The lost event expired: the reconciler passes its number by itself.
    post(&gone, Some(&lost[1]), 1).await;
    let waiting = post(&gone, None, 2).await;
    saga_with_status(p, &waiting, "waiting", 30).await;
    p.expire_event(&lost[1]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    p.age_sagas(&waiting).await;
    crate::eventually(30, "the gap of an expired event passed by the reconciler", || async {
        p.reconcile().await;
        (delivered(&r, "/gap", &gone) == [2]).then_some(())
    })
    .await;
}

/// Sagas waiting behind a blocking dead letter are shown as a blocked lane,
/// are not stalled for the reconciler (no re-drive, no warning per saga,
/// still Waiting), and end when the subscription is deleted.
pub async fn waiting_behind_a_blocking_dead_letter_is_not_stalled_and_ends_with_the_subscription<
    P: Pipeline + Retention,
>(
    p: &P,
) {
    let r = Receiver::start().await;
    let sub =
        ordered(p, &r, "/blk", json!({"on_dead_letter": "block", "retry_policy": {"max_attempts": 1, "base_delay_ms": 50, "max_delay_ms": 50}}))
            .await;
    let key = unique("blk");
    let post = |i: u32, poison: bool| {
        post_event(p, json!({"type": "lane.x", "partition_key": key, "data": {"i": i, "poison": poison}}))
    };
    let dead = post(1, true).await;
    saga_with_status(p, &dead, "dead_lettered", 30).await;
    let mut waiting = Vec::new();
    for i in 2..=4 {
        let e = post(i, false).await;
        let saga = saga_with_status(p, &e, "waiting", 30).await;
        waiting.push((e, saga["saga_id"].as_str().unwrap().to_string()));
    }
    // Shown as blocked, since the dead letter.
    let (_, v) = p.get(&format!("/v1/subscriptions/{sub}")).await;
    let lane = v["blocked_lanes"].as_array().and_then(|l| l.iter().find(|b| b["partition_key"] == key.as_str()));
    let lane = lane.unwrap_or_else(|| panic!("the blocked lane in {v}"));
    assert!(lane["reason"].as_str().unwrap().contains("dead letter"), "{lane}");
    // An hour later, for the reconciler: waiting, not stalled.
    for (e, _) in &waiting {
        p.age_sagas(e).await;
    }
    for _ in 0..3 {
        p.reconcile().await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let logs = p.logs().await;
    for (e, saga) in &waiting {
        assert!(
            !logs.lines().any(|l| l.contains("stalled saga re-driven") && l.contains(saga.as_str())),
            "{saga} was re-driven as stalled"
        );
        saga_with_status(p, e, "waiting", 5).await;
    }
    assert!(delivered(&r, "/blk", &key).is_empty());
    // Deleted: the waiting sagas end (refused), nothing waits for good.
    let (st, v) = p.call("DELETE", &format!("/v1/subscriptions/{sub}"), None).await;
    assert_eq!(st, 204, "{v}");
    for (e, _) in &waiting {
        let s = saga_with_status(p, e, "dead_lettered", 30).await;
        assert!(s["last_error"].as_str().unwrap_or_default().contains("no longer exists"), "{s}");
    }
    assert!(delivered(&r, "/blk", &key).is_empty(), "nothing delivered for a deleted subscription");
}

/// Every lane scenario, listed once: each backend's test binary runs them
/// all (`hookline_tests::lane_scenario_tests!(aws)`, `(serve)`), with a
/// reconciler every second and a stall margin of 2 s.
#[macro_export]
macro_rules! lane_scenario_tests {
    ($backend:ident) => {
        $crate::scenario_tests!($backend, lane_scenarios;
            missing_head_is_taken_out; $crate::pipeline::Settings::default().fast_reconcile(),
            lost_routing_is_looked_at_with_backoff_then_skipped; $crate::pipeline::Settings::default().fast_reconcile(),
            waiting_behind_a_blocking_dead_letter_is_not_stalled_and_ends_with_the_subscription;
                $crate::pipeline::Settings::default().fast_reconcile(),
        );
    };
}
