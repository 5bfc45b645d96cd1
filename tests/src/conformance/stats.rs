//! Conformance of [`shared::ports::StatsStore`]: a minute's tally is added
//! to its minute and hour points; adds to one point sum up (also from two
//! writers, each with its own aggregator, as two Lambda containers or two
//! processes flush); a read returns one series' points of one width in
//! `[since, until)`, oldest first.

use chrono::{DateTime, Duration, Utc};
use shared::context::Stores;
use shared::ids::SubscriptionId;
use shared::stats::{Histogram, Sample, Series, StatsAggregator, Tally, Width};

/// A subscription id unique to this run.
fn unique_sub() -> SubscriptionId {
    SubscriptionId::new(format!("sub_stats_{}", shared::ids::random_token("")))
}

/// The start of the hour two hours ago (inside the retention, whole hours).
fn base() -> DateTime<Utc> {
    Width::Hour.start_of(Utc::now() - Duration::hours(2))
}

fn tally(succeeded: u64, failed: u64, dead_lettered: u64, latencies: &[u64]) -> Tally {
    let mut latency = Histogram::default();
    for ms in latencies {
        latency.observe(*ms);
    }
    Tally { succeeded, failed, dead_lettered, latency }
}

/// Three minutes in two hours: each minute read back as added, the hours
/// as the sums of their minutes; the range is `[since, until)`; another
/// series and the other width are not mixed in.
pub async fn stats_minutes_and_hours_add_up(s: &Stores) {
    let store = &s.stats;
    let series = Series::Subscription(unique_sub());
    let other = Series::Tenant(format!("t_{}", shared::ids::random_token("")));
    let h0 = base();
    let (m1, m2, m3) = (h0 + Duration::minutes(1), h0 + Duration::minutes(2), h0 + Duration::minutes(65));
    let (t1, t2, t3) = (tally(3, 1, 0, &[10, 12, 40]), tally(0, 2, 1, &[900]), tally(5, 0, 0, &[3, 3, 3, 3, 70_000]));
    store.add(&series, m1, &t1).await.unwrap();
    store.add(&series, m2, &t2).await.unwrap();
    store.add(&series, m3, &t3).await.unwrap();
    store.add(&other, m1, &tally(100, 0, 0, &[])).await.unwrap();

    let minutes = store.read(&series, Width::Minute, h0, h0 + Duration::hours(2)).await.unwrap();
    let got: Vec<(DateTime<Utc>, Tally)> = minutes.iter().map(|p| (p.at, p.tally)).collect();
    assert_eq!(got, vec![(m1, t1), (m2, t2), (m3, t3)], "each minute as added, oldest first");

    let hours = store.read(&series, Width::Hour, h0, h0 + Duration::hours(2)).await.unwrap();
    let mut first = t1;
    first.merge(&t2);
    let got: Vec<(DateTime<Utc>, Tally)> = hours.iter().map(|p| (p.at, p.tally)).collect();
    assert_eq!(got, vec![(h0, first), (h0 + Duration::hours(1), t3)], "hours are the sums of their minutes");

    let between = store.read(&series, Width::Minute, m2, m3).await.unwrap();
    assert_eq!(between.iter().map(|p| p.at).collect::<Vec<_>>(), vec![m2], "since inclusive, until exclusive");
    let none = store.read(&series, Width::Minute, h0 - Duration::hours(1), h0).await.unwrap();
    assert!(none.is_empty(), "nothing before: {none:?}");
    let theirs = store.read(&other, Width::Minute, h0, h0 + Duration::hours(2)).await.unwrap();
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0].tally.succeeded, 100, "another series is its own");
}

/// Two writers (two processes' aggregators) count attempts of one
/// subscription in the same minute and each flushes its tally: the stored
/// minute and hour hold the sum of both, and the percentiles read from it
/// cover both writers' latencies.
pub async fn stats_two_writers_add_to_one_minute(s: &Stores) {
    let store = &s.stats;
    let sub = unique_sub();
    let minute = base() + Duration::minutes(7) + Duration::seconds(20);
    let (a, b) = (StatsAggregator::default(), StatsAggregator::default());
    let ok = |ms| Sample { succeeded: true, dead_lettered: false, latency_ms: Some(ms) };
    let failed = Sample { succeeded: false, dead_lettered: true, latency_ms: Some(2_000) };
    for _ in 0..9 {
        assert!(a.record(&sub, Some("acme"), &ok(20), minute));
    }
    assert!(b.record(&sub, Some("acme"), &ok(25), minute));
    assert!(b.record(&sub, Some("acme"), &failed, minute));
    for agg in [&a, &b] {
        let closed = agg.take_closed(Utc::now(), false);
        assert_eq!(closed.len(), 3, "subscription, tenant, system");
        for c in closed {
            store.add(&c.series, c.minute, &c.tally).await.unwrap();
        }
    }
    let m = Width::Minute.start_of(minute);
    for width in [Width::Minute, Width::Hour] {
        let points = store.read(&Series::Subscription(sub.clone()), width, base(), base() + Duration::hours(1)).await;
        let points = points.unwrap();
        assert_eq!(points.len(), 1, "{width:?}: {points:?}");
        let t = points[0].tally;
        assert_eq!((t.succeeded, t.failed, t.dead_lettered, t.latency.count()), (10, 1, 1, 11), "{width:?}");
        let p50 = t.latency.percentile(0.5).unwrap();
        assert!((12.0..=25.0).contains(&p50), "{width:?} p50 {p50}");
        let p99 = t.latency.percentile(0.99).unwrap();
        assert!((1_500.0..=2_500.0).contains(&p99), "{width:?} p99 {p99}: the failed attempt's latency");
        assert_eq!(points[0].at, if width == Width::Minute { m } else { base() });
    }
    let tenant = store.read(&Series::Tenant("acme".into()), Width::Minute, m, m + Duration::minutes(1)).await;
    assert!(tenant.unwrap()[0].tally.succeeded >= 10, "the tenant's series has both writers' attempts");
}

/// Eight adds of one minute at once all count (each store adds atomically).
pub async fn stats_concurrent_adds_sum_up(s: &Stores) {
    let series = Series::Subscription(unique_sub());
    let minute = base() + Duration::minutes(30);
    let one = tally(1, 0, 0, &[5]);
    let adds: Vec<_> = (0..8)
        .map(|_| {
            let (store, series) = (s.stats.clone(), series.clone());
            tokio::spawn(async move { store.add(&series, minute, &one).await.unwrap() })
        })
        .collect();
    for a in adds {
        a.await.unwrap();
    }
    let points = s.stats.read(&series, Width::Minute, minute, minute + Duration::minutes(1)).await.unwrap();
    assert_eq!(points.len(), 1);
    assert_eq!((points[0].tally.succeeded, points[0].tally.latency.count()), (8, 8));
}
