//! Stage scenarios of recovery without an operator (issue 27, part D),
//! listed with the others ([`crate::for_each_stage_scenario`], re-exported
//! from [`crate::stages`]) and run on both backends.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use shared::context::Hookline;
use shared::ids::EventId;
use shared::stage::requeue_queue;
use shared::subscription::Subscription;

use crate::stages::{subscription, Rig};

/// Issue 27, part D. One outage's automatic requeue asked three times (the
/// breaker of two containers closing, then a re-enable of the same outage)
/// starts one job, by `system`, whose filter takes only the subscription's
/// open dead letters created during the outage; a subscription without
/// `auto_requeue` gets none.
pub async fn an_automatic_requeue_starts_one_job_per_outage(rig: &Rig) {
    use shared::bulk::{JobState, JobStep};
    use shared::dead_letter::{DeadLetter, DeadLetterState};
    use shared::message::RequeueMessage;
    use shared::recovery::{self, AutoRequeue, Trigger};
    use shared::stage::bulk;

    let (a, b) = (rig.container(Duration::from_secs(5)), rig.container(Duration::from_secs(5)));
    let auto = Subscription { auto_requeue: true, ..subscription("https://example.com/auto", true) };
    let manual = subscription("https://example.com/manual", true);
    rig.stores.subscriptions.create(&auto).await.unwrap();
    rig.stores.subscriptions.create(&manual).await.unwrap();
    let since = Utc::now() - chrono::Duration::minutes(10);
    let until = since + chrono::Duration::minutes(5);
    let at = |m: i64| since + chrono::Duration::minutes(m);
    // (subscription, created minutes after the outage began, in the outage?)
    let cases = [(&auto, 1, true), (&auto, 2, true), (&auto, 4, true), (&auto, -1, false), (&auto, 6, false)];
    let mut dls: Vec<(DeadLetter, bool)> = cases
        .iter()
        .enumerate()
        .map(|(i, (s, m, inside))| {
            let d = DeadLetter {
                subscription_id: s.id.clone(),
                event_id: EventId::new(format!("evt-auto-{i}")),
                ..crate::conformance::dead_letter(&format!("sag_auto_{i:02}"), at(*m))
            };
            (d, *inside)
        })
        .collect();
    let other = DeadLetter {
        subscription_id: manual.id.clone(),
        event_id: EventId::new("evt-manual"),
        ..crate::conformance::dead_letter("sag_manual_00", at(1))
    };
    dls.push((other, false));
    for (d, _) in &dls {
        rig.stores.dead_letters.put(d).await.unwrap();
    }
    let req =
        |s: &Subscription, trigger| AutoRequeue { subscription_id: s.id.clone(), trigger, since, until, waits: 0 };
    let handle = |h: &Arc<Hookline>, r: AutoRequeue| {
        let h = h.clone();
        async move { requeue_queue::handle(&h, RequeueMessage::AutoRequeue { auto_requeue: r }, 1).await.unwrap() }
    };
    tokio::join!(handle(&a, req(&auto, Trigger::BreakerClosed)), handle(&b, req(&auto, Trigger::BreakerClosed)));
    handle(&b, AutoRequeue { until: until + chrono::Duration::minutes(1), ..req(&auto, Trigger::ReEnabled) }).await;
    handle(&a, req(&manual, Trigger::BreakerClosed)).await;
    let job_of = |r: &AutoRequeue| {
        let cause = r.cause();
        recovery::job_id(&rig.keyring.mac(&cause.iter().map(String::as_str).collect::<Vec<_>>()))
    };
    assert!(rig.stores.jobs.get(&job_of(&req(&manual, Trigger::BreakerClosed))).await.unwrap().is_none());
    let id = job_of(&req(&auto, Trigger::BreakerClosed));
    let job = rig.stores.jobs.get(&id).await.unwrap().expect("the outage's job");
    assert_eq!((job.actor.as_str(), job.reason.as_str()), ("system", "automatic requeue: breaker closed"));
    assert_eq!(job.items, Some(3), "{job:?}");
    // Its pages, through the queue: started once (one message of page 0).
    let mut first_pages = 0;
    for _ in 0..100 {
        let got = rig.stores.requeues.raw().receive(10, Duration::from_secs(60)).await.unwrap();
        for m in &got {
            match serde_json::from_str(&m.body) {
                Ok(RequeueMessage::Job { job: step }) if step.job_id == id => {
                    first_pages += usize::from(step.page == 0);
                    bulk::run(&a, &step).await.unwrap();
                }
                _ => {}
            }
        }
        let receipts: Vec<String> = got.iter().map(|m| m.receipt.clone()).collect();
        rig.stores.requeues.raw().delete(&receipts).await.unwrap();
        if rig.stores.jobs.get(&id).await.unwrap().unwrap().state != JobState::Running && got.is_empty() {
            break;
        }
    }
    assert_eq!(first_pages, 1, "one job started");
    let done = rig.stores.jobs.get(&id).await.unwrap().unwrap();
    assert_eq!((done.state, done.matched, done.done, done.failed), (JobState::Completed, 3, 3, 0), "{done:?}");
    bulk::run(&a, &JobStep { job_id: id.clone(), page: 0 }).await.unwrap();
    for (d, inside) in &dls {
        let now = rig.stores.dead_letters.get(&d.id).await.unwrap().unwrap();
        let want = if *inside { DeadLetterState::Requeued } else { DeadLetterState::Open };
        assert_eq!(now.state, want, "{}", d.id);
        if *inside {
            let r = now.resolution.expect("resolved");
            assert_eq!((r.actor.as_str(), r.job_id.as_deref()), ("system", Some(id.as_str())));
        }
    }
}
