//! Ordered delivery (`ordering: "partition"`): sequence under random
//! failures, blocking or continuing behind a dead letter, and crashes in
//! the middle.

use super::*;

/// The receiver's view of one ordered partition: for each delivery in
/// arrival order, its `hookline-sequence` and whether it succeeded.
fn sequences_by_partition(deliveries: &[crate::Delivery]) -> std::collections::BTreeMap<String, Vec<(u64, bool)>> {
    let mut by: std::collections::BTreeMap<String, Vec<(u64, bool)>> = Default::default();
    for d in deliveries {
        let seq =
            d.header("hookline-sequence").parse::<u64>().unwrap_or_else(|_| panic!("no hookline-sequence: {d:?}"));
        by.entry(d.header("hookline-partition-key").to_string())
            .or_default()
            .push((seq, (200..300).contains(&d.status)));
    }
    by
}

/// Checks one partition's deliveries: numbers 1, 2, 3… each attempted only
/// once the one before succeeded (retries repeat a number, nothing goes
/// ahead or back), `expected` of them delivered, no gap, none twice.
fn assert_in_order(partition: &str, seen: &[(u64, bool)], expected: u64) {
    let mut next = 1;
    for (seq, ok) in seen {
        assert_eq!(
            *seq, next,
            "partition {partition}: number {seq} attempted while {next} was not delivered: {seen:?}"
        );
        if *ok {
            next += 1;
        }
    }
    assert_eq!(next - 1, expected, "partition {partition}: {} of {expected} delivered", next - 1);
}

/// Ordered delivery (`ordering: "partition"`) under random failures:
/// `events` events over 10 partitions, posted in turn, to a receiver that
/// fails 20% of requests. Every partition's deliveries are its events in
/// acceptance order (`hookline-sequence` 1, 2, 3…, the next attempted only
/// after the one before succeeded), none lost, none twice; different
/// partitions proceed side by side.
pub async fn ordered_partitions_deliver_in_sequence_under_random_failures<P: Pipeline>(s: &P, events: usize) {
    let r = Receiver::start().await;
    let (sub, _) = s
        .subscribe(
            json!({"callback_url": r.url("/ord", Behaviour::Ok), "event_types": ["ord.*"], "ordering": "partition",
                          "retry_policy": {"max_attempts": 50, "base_delay_ms": 10, "max_delay_ms": 40}}),
        )
        .await;
    let (_, v) = s.get(&format!("/v1/subscriptions/{sub}")).await;
    assert_eq!((v["ordering"].as_str(), v["on_dead_letter"].as_str()), (Some("partition"), Some("continue")), "{v}");
    r.set("/ord", Behaviour::FailRandomly(0.2, 500));
    let partitions = 10;
    for i in 0..events / partitions {
        for p in 0..partitions {
            let (st, v) = s
                .post(
                    "/v1/events",
                    &json!({"type": "ord.changed", "partition_key": format!("p{p}"), "data": {"p": p, "i": i}}),
                )
                .await;
            assert_eq!(st, 202, "{v}");
        }
    }
    let per = (events / partitions) as u64;
    crate::eventually(600, "every event delivered", || async { (r.successes("/ord").len() >= events).then_some(()) })
        .await;
    let all = r.deliveries("/ord");
    let failed = all.iter().filter(|d| d.status != 200).count();
    assert!(failed > 0, "the receiver failed none of {} requests", all.len());
    let by = sequences_by_partition(&all);
    assert_eq!(by.len(), partitions, "{:?}", by.keys());
    let report: Vec<String> = by
        .iter()
        .map(|(p, seen)| {
            format!("{p}: {} requests, {} delivered", seen.len(), seen.iter().filter(|(_, ok)| *ok).count())
        })
        .collect();
    for (p, seen) in &by {
        assert!(
            std::panic::catch_unwind(|| assert_in_order(p, seen, per)).is_ok(),
            "partition {p} out of order; all partitions: {report:?}"
        );
    }
    // The body is the event posted at that place: acceptance order.
    for d in r.successes("/ord") {
        let seq: u64 = d.header("hookline-sequence").parse().unwrap();
        assert_eq!(d.json()["data"]["i"].as_u64(), Some(seq - 1), "{}", String::from_utf8_lossy(&d.body));
    }
}

/// The id of the open dead letter of subscription `sub`, once there is one.
async fn open_dead_letter_of<P: Pipeline>(s: &P, sub: &str) -> String {
    crate::eventually(30, "the subscription's open dead letter", || async {
        let (_, v) = s.get("/v1/dead-letters?state=open").await;
        v["items"].as_array().and_then(|items| {
            items.iter().find(|d| d["subscription_id"] == sub).map(|d| d["id"].as_str().unwrap().to_string())
        })
    })
    .await
}

/// Behind a dead letter an ordered partition continues or blocks, as its
/// subscription says; requeuing (and delivering) or skipping the dead
/// letter releases a blocked partition, in order. An unordered subscription
/// on the same events is not held by the blocked partition, nor is another
/// partition of the blocking subscription.
pub async fn ordered_partition_blocks_or_continues_behind_a_dead_letter<P: Pipeline>(s: &P) {
    let r = Receiver::start().await;
    let ordered = |path: &str, on_dead_letter: &str| {
        json!({"callback_url": r.url(path, Behaviour::FailMatching("\"poison\":true".into(), 500)), "event_types": ["blk.*"],
               "ordering": "partition", "on_dead_letter": on_dead_letter, "retry_policy": fast_retry(2)})
    };
    let (block, _) = s.subscribe(ordered("/block", "block")).await;
    s.subscribe(ordered("/continue", "continue")).await;
    s.subscribe(json!({"callback_url": r.url("/free", Behaviour::Ok), "event_types": ["blk.*"]})).await;
    let post = |key: &'static str, i: u32, poison: bool| async move {
        let (st, v) = s
            .post("/v1/events", &json!({"type": "blk.x", "partition_key": key, "data": {"i": i, "poison": poison}}))
            .await;
        assert_eq!(st, 202, "{v}");
    };
    post("a", 0, false).await;
    post("a", 1, true).await;
    post("a", 2, false).await;
    post("a", 3, false).await;
    post("b", 0, false).await;
    let numbers = |path: &str| -> Vec<(String, u64)> {
        r.successes(path)
            .iter()
            .map(|d| (d.header("hookline-partition-key").to_string(), d.header("hookline-sequence").parse().unwrap()))
            .collect()
    };
    let pair = |k: &str, n: u64| (k.to_string(), n);
    // continue: the dead letter is passed over.
    crate::eventually(60, "the continuing partition past its dead letter", || async {
        let got = numbers("/continue");
        (got.contains(&pair("a", 4)) && got.contains(&pair("b", 1))).then_some(())
    })
    .await;
    let a: Vec<u64> = numbers("/continue").into_iter().filter(|(k, _)| k == "a").map(|(_, n)| n).collect();
    assert_eq!(a, [1, 3, 4], "continue: 2 dead-lettered, the rest in order");
    // The unordered subscription got every event, and the blocking one its
    // other partition, while partition a is held.
    crate::eventually(30, "the unordered subscription's deliveries", || async {
        (r.successes("/free").len() == 5 && numbers("/block").contains(&pair("b", 1))).then_some(())
    })
    .await;
    // block: 2 dead-lettered, 3 and 4 wait (and are never attempted).
    let dead_letter = open_dead_letter_of(s, &block).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let held: Vec<u64> = r
        .deliveries("/block")
        .iter()
        .filter(|d| d.header("hookline-partition-key") == "a")
        .map(|d| d.header("hookline-sequence").parse().unwrap())
        .collect();
    assert!(held.iter().all(|n| *n <= 2), "block: nothing after the dead letter was attempted: {held:?}");
    // Requeue it with the endpoint fixed: 2, then 3 and 4, in order.
    r.set("/block", Behaviour::Ok);
    let (st, v) = s
        .call("POST", &format!("/v1/dead-letters/{dead_letter}/requeue"), Some(br#"{"reason": "endpoint fixed"}"#))
        .await;
    assert!(st == 200 || st == 202, "{st} {v}");
    crate::eventually(60, "the released partition", || async {
        numbers("/block").contains(&pair("a", 4)).then_some(())
    })
    .await;
    let a: Vec<u64> = numbers("/block").into_iter().filter(|(k, _)| k == "a").map(|(_, n)| n).collect();
    assert_eq!(a, [1, 2, 3, 4], "block: released in order by the requeue");

    // Skip releases too: 5 dies, 6 waits until the dead letter is skipped.
    r.set("/block", Behaviour::FailMatching("\"poison\":true".into(), 500));
    post("a", 4, true).await;
    post("a", 5, false).await;
    let dead_letter = open_dead_letter_of(s, &block).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!numbers("/block").contains(&pair("a", 6)), "6 waits behind the dead letter");
    let (st, v) =
        s.call("POST", &format!("/v1/dead-letters/{dead_letter}/skip"), Some(br#"{"reason": "not needed"}"#)).await;
    assert_eq!(st, 200, "{v}");
    crate::eventually(60, "the partition after the skip", || async {
        numbers("/block").contains(&pair("a", 6)).then_some(())
    })
    .await;
    let a: Vec<u64> = numbers("/block").into_iter().filter(|(k, _)| k == "a").map(|(_, n)| n).collect();
    assert_eq!(a, [1, 2, 3, 4, 6], "skip: 5 passed over, 6 released");

    // A replay goes through the lane too, under the event's own number and
    // webhook-id.
    let first = r.successes("/block").into_iter().find(|d| d.header("hookline-sequence") == "2").unwrap();
    let event_id = {
        let (_, list) = s.get(&format!("/v1/subscriptions/{block}")).await;
        assert_eq!(list["on_dead_letter"], "block");
        let (_, v) = s.get("/v1/dead-letters?state=requeued").await;
        v["items"].as_array().unwrap().iter().find(|d| d["subscription_id"] == block.as_str()).unwrap()["event_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    r.set("/block", Behaviour::Ok);
    let (st, v) = s
        .call(
            "POST",
            &format!("/v1/events/{event_id}/replay"),
            Some(format!(r#"{{"reason": "re-sync", "subscription_id": "{block}"}}"#).as_bytes()),
        )
        .await;
    assert!(st == 200 || st == 202, "{st} {v}");
    let again = crate::eventually(30, "the replayed delivery", || async {
        let ok = r.successes("/block");
        (ok.iter().filter(|d| d.header("hookline-sequence") == "2").count() == 2).then(|| ok.last().unwrap().clone())
    })
    .await;
    assert_eq!(again.header("hookline-sequence"), "2");
    assert_eq!(again.header("webhook-id"), first.header("webhook-id"));
}

/// Ordered delivery through crashes, under a `max_in_flight` of 3: for
/// each failpoint, the stage that reaches it next crashes there (`hookline serve` is killed, a Lambda
/// invocation fails and is retried), in the middle of events over 5
/// partitions (25 first, then 20 after each crash) whose receiver fails 20%
/// of requests. Every partition is
/// still delivered in order, nothing lost; a crash after a POST may repeat
/// that delivery (same number, at least once), never an earlier one or a
/// later one ahead of time.
pub async fn ordered_delivery_survives_crashes_in_the_middle<P: Pipeline>(s: &mut P, failpoints: &[&str]) {
    let r = Receiver::start().await;
    // With a max_in_flight: ordering and the per-subscription limits together.
    s.subscribe(json!({"callback_url": r.url("/oc", Behaviour::Ok), "event_types": ["oc.*"], "ordering": "partition",
                       "max_in_flight": 3, "retry_policy": {"max_attempts": 50, "base_delay_ms": 10, "max_delay_ms": 40}}))
        .await;
    r.set("/oc", Behaviour::FailRandomly(0.2, 500));
    let partitions = 5;
    let mut posted = vec![0u64; partitions];
    fn event(posted: &mut [u64], p: usize) -> Value {
        let body = json!({"id": format!("oc-{p}-{}", posted[p]), "type": "oc.changed", "partition_key": format!("k{p}"),
                          "data": {"i": posted[p]}});
        posted[p] += 1;
        body
    }
    async fn post<P: Pipeline>(s: &P, posted: &mut [u64], p: usize) {
        let (st, v) = s.post("/v1/events", &event(posted, p)).await;
        assert_eq!(st, 202, "{v}");
    }
    for p in 0..partitions * 5 {
        post(s, &mut posted, p % partitions).await;
    }
    let delivered = |posted: Vec<u64>| {
        let r = &r;
        async move {
            let by = sequences_by_partition(&r.successes("/oc"));
            let up_to =
                |p: usize| by.get(&format!("k{p}")).and_then(|seen| seen.iter().map(|(n, _)| *n).max()).unwrap_or(0);
            (0..posted.len()).all(|p| up_to(p) >= posted[p]).then_some(())
        }
    };
    for fp in failpoints {
        // Quiet first, so that the one event posted next is what reaches
        // the failpoint (not a request of the ones before, while the POST
        // is in flight).
        crate::eventually(300, "the events so far delivered", || delivered(posted.clone())).await;
        // And no retry still on its way: a second of no request at all (a
        // retry waits 40 ms at most), or a retry, not the event posted
        // next, would reach the failpoint while that POST is in flight.
        crate::eventually(60, "the receiver quiet for a second", || async {
            let before = r.deliveries("/oc").len();
            tokio::time::sleep(Duration::from_secs(1)).await;
            (r.deliveries("/oc").len() == before).then_some(())
        })
        .await;
        s.crash_at(fp).await;
        let body = event(&mut posted, 0);
        let answered = s.post_racing_a_crash("/v1/events", &body).await;
        s.recover().await;
        // A producer that lost its answer posts again (the same id).
        let (st, v) = match answered {
            Some(a) => a,
            None => s.post("/v1/events", &body).await,
        };
        assert_eq!(st, 202, "{v}");
        for p in 0..partitions * 4 {
            post(s, &mut posted, p % partitions).await;
        }
    }
    let total: u64 = posted.iter().sum();
    let delivered = || {
        let by = sequences_by_partition(&r.successes("/oc"));
        (0..partitions)
            .map(|p| by.get(&format!("k{p}")).and_then(|seen| seen.iter().map(|(n, _)| *n).max()).unwrap_or(0))
            .collect::<Vec<u64>>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while delivered().iter().sum::<u64>() < total {
        if std::time::Instant::now() > deadline {
            // Where each partition stopped, and the state of the saga it waits on.
            let mut report = Vec::new();
            for (p, n) in delivered().iter().enumerate() {
                if *n < posted[p] {
                    let (_, list) = s.get("/v1/dead-letters?state=open").await;
                    report.push(format!("k{p}: delivered up to {n} of {}; open dead letters: {list}", posted[p]));
                }
            }
            panic!(
                "not every event delivered after the crashes {failpoints:?}: {report:?}\nlogs:\n{}",
                s.logs()
                    .await
                    .lines()
                    .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (p, seen) in sequences_by_partition(&r.deliveries("/oc")) {
        let k: usize = p.trim_start_matches('k').parse().unwrap();
        let mut next = 1;
        for (seq, ok) in &seen {
            assert!(*seq == next || *seq + 1 == next, "partition {p}: number {seq} while {next} was next: {seen:?}");
            if *seq == next && *ok {
                next += 1;
            }
        }
        assert_eq!(next - 1, posted[k], "partition {p}: all delivered");
    }
    assert!(r.max_concurrent("/oc") <= 3, "max_in_flight 3, yet {} at once", r.max_concurrent("/oc"));
}
