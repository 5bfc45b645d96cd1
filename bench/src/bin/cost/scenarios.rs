//! The receiver, the counts, and one scenario's run on the emulator.

use super::*;

// ---------------------------------------------------------------- receiver

/// Counts deliveries by webhook-id (a duplicate delivery shows as a second
/// hit of the same id); answers 200, echoing verification challenges.
#[derive(Clone, Default)]
pub(crate) struct Hits(pub(crate) Arc<Mutex<HashMap<String, u32>>>);

impl Hits {
    pub(crate) fn distinct(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    pub(crate) fn total(&self) -> usize {
        self.0.lock().unwrap().values().map(|n| *n as usize).sum()
    }
}

pub(crate) async fn receiver(hits: Hits) -> std::net::SocketAddr {
    let app = axum::Router::new().fallback(move |_uri: Uri, headers: HeaderMap, body: Bytes| {
        let hits = hits.clone();
        async move {
            let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            if h("hookline-event-type") == "hookline.verification" {
                let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                return (StatusCode::OK, axum::Json(json!({"challenge": v["challenge"]})));
            }
            *hits.0.lock().unwrap().entry(h("webhook-id")).or_insert(0) += 1;
            (StatusCode::OK, axum::Json(json!({})))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

// ------------------------------------------------------------------ counts

pub(crate) fn sub_req(a: &RequestCounts, b: Option<&RequestCounts>) -> RequestCounts {
    let Some(b) = b else { return a.clone() };
    RequestCounts {
        requests: a.requests - b.requests,
        bytes: a.bytes - b.bytes,
        billed: a.billed - b.billed,
        items: a.items - b.items,
    }
}

/// `now - before` of the driver's counts.
pub(crate) fn driver_since(now: &DriverCounts, before: &DriverCounts) -> DriverCounts {
    let functions = now
        .functions
        .iter()
        .map(|(k, f)| {
            let b = before.functions.get(k).cloned().unwrap_or_default();
            let d = FunctionCounts {
                invocations: f.invocations - b.invocations,
                crashed: f.crashed - b.crashed,
                records: f.records - b.records,
                wall: f.wall - b.wall,
                billed_ms: f.billed_ms - b.billed_ms,
                cpu: f.cpu - b.cpu,
            };
            (k.clone(), d)
        })
        .filter(|(_, f)| f.invocations > 0)
        .collect();
    let reqs = |n: &BTreeMap<(String, String), RequestCounts>, b: &BTreeMap<(String, String), RequestCounts>| {
        n.iter().map(|(k, r)| (k.clone(), sub_req(r, b.get(k)))).filter(|(_, r)| r.requests > 0).collect()
    };
    DriverCounts {
        functions,
        sqs: reqs(&now.sqs, &before.sqs),
        streams: reqs(&now.streams, &before.streams),
        api_gateway_requests: now.api_gateway_requests - before.api_gateway_requests,
    }
}

/// What changes only with traffic (not with idle polling).
pub(crate) fn activity(m: &MeterCounts, d: &DriverCounts) -> (u64, u64, u64) {
    let sdk: u64 = m.requests.values().map(|r| r.requests).sum();
    let inv: u64 = d.functions.values().map(|f| f.invocations).sum();
    let esm: u64 = d.sqs.iter().filter(|((_, op), _)| !op.contains("empty")).map(|(_, r)| r.requests).sum();
    (sdk, inv, esm)
}

// --------------------------------------------------------------- scenarios

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Ingest {
    Single,
    Batch(usize),
}

pub(crate) struct Scenario {
    pub(crate) key: char,
    pub(crate) title: String,
    pub(crate) events: usize,
    pub(crate) subscriptions: usize,
    pub(crate) ingest: Ingest,
    /// Dollars per million deliveries this scenario must stay under.
    pub(crate) target: Option<f64>,
    /// Fields added to the body of each subscription created through the API.
    pub(crate) subscription_fields: Value,
    /// Subscriptions no event matches, created through the store port first.
    pub(crate) unmatched: usize,
    /// Partition keys the events are spread over (0: none).
    pub(crate) partitions: usize,
}

impl Scenario {
    /// `events` ingested as `ingest` to one subscription that takes every
    /// delivery at once, nothing else in the tables, no target: scenarios
    /// set what they change.
    pub(crate) fn new(key: char, title: String, events: usize, ingest: Ingest) -> Scenario {
        Scenario {
            key,
            title,
            events,
            subscriptions: 1,
            ingest,
            target: None,
            subscription_fields: json!({}),
            unmatched: 0,
            partitions: 0,
        }
    }

    /// Its `seq`th event: an order of `size` bytes, in partition `seq`
    /// modulo its partitions when it has any (the key taken out of the
    /// order's padding, so the event keeps its size).
    fn event(&self, seq: usize, size: usize) -> Vec<u8> {
        let tag = self.key.to_string();
        if self.partitions == 0 {
            return order_event(&tag, seq, size);
        }
        let keyed = |size: usize| {
            let mut ev: Value = serde_json::from_slice(&order_event(&tag, seq, size)).expect("an order event");
            ev["partition_key"] = Value::from(format!("customer-{:03}", seq % self.partitions));
            serde_json::to_vec(&ev).expect("JSON")
        };
        let over = keyed(size).len().saturating_sub(size);
        keyed(size.saturating_sub(over))
    }
}

pub(crate) struct Measured {
    pub(crate) meter: MeterCounts,
    pub(crate) driver: DriverCounts,
    pub(crate) deliveries: usize,
    pub(crate) duplicates: usize,
    pub(crate) elapsed: Duration,
    pub(crate) idle_receives_per_s: f64,
    /// DynamoDB `Scan`s over the whole scenario (set-up, run and checks) by
    /// (table, issuing function).
    pub(crate) scans: BTreeMap<(String, String), u64>,
    /// Set-up through the store port (scenario D): how long it took.
    pub(crate) unmatched_setup: Option<Duration>,
}

pub(crate) async fn completed_sagas(p: &AwsPipeline) -> usize {
    // Read through the emulator's raw API: not metered, not billed.
    let mut done = 0;
    let mut start: Option<Value> = None;
    loop {
        let mut req = json!({"TableName": p.backend.names.sagas_table, "ProjectionExpression": "#s",
                             "ExpressionAttributeNames": {"#s": "status"}});
        if let Some(k) = start.take() {
            req["ExclusiveStartKey"] = k;
        }
        let page = p.moto.call("dynamodb", "DynamoDB_20120810.Scan", req).await;
        done += page["Items"].as_array().into_iter().flatten().filter(|i| i["status"]["S"] == "Completed").count();
        match page.get("LastEvaluatedKey") {
            Some(k) if k.as_object().is_some_and(|o| !o.is_empty()) => start = Some(k.clone()),
            _ => return done,
        }
    }
}

/// Event types of the global subscriptions no event matches (the events are
/// all `order.created`): other exact types, including `order.` ones, and
/// prefixes of other domains.
pub(crate) const OTHER_TYPES: &[&str] = &[
    "invoice.created",
    "invoice.paid",
    "customer.created",
    "customer.updated",
    "shipment.dispatched",
    "shipment.delivered",
    "payment.succeeded",
    "payment.failed",
    "order.refunded",
    "order.cancelled",
    "refund.*",
    "inventory.*",
];

/// The `i`-th subscription no event matches: even ones scoped to a tenant
/// the events never have (`tenant-other-…`; events have `tenant-0` to
/// `tenant-39`) with the events' type, odd ones global with another type.
/// Active and verified: only the index keeps them out of routing.
pub(crate) fn unmatched_subscription(i: usize, callback: &str, h: &shared::context::Hookline) -> Subscription {
    let now = chrono::Utc::now();
    let (tenant_id, event_types) = if i.is_multiple_of(2) {
        (Some(format!("tenant-other-{}", i / 2 % 1000)), vec!["order.created".to_string()])
    } else {
        (None, vec![OTHER_TYPES[i / 2 % OTHER_TYPES.len()].to_string()])
    };
    Subscription {
        id: new_subscription_id(),
        callback_url: format!("{callback}/unmatched/{i}"),
        event_types,
        tenant_id: tenant_id.map(shared::ids::TenantId::new),
        description: Some(format!("cost scenario D, unmatched {i}")),
        headers: BTreeMap::new(),
        retry_policy: h.config.default_retry_policy.clone(),
        dead_letter_on: vec![],
        payload_format: Default::default(),
        ordering: Default::default(),
        on_dead_letter: Default::default(),
        data_fields: None,
        max_in_flight: None,
        rate_limit: None,
        active: true,
        verified: true,
        verification_error: None,
        disabled_reason: None,
        disabled_at: None,
        signing_keys: vec![SigningKey { secret: Secret::generate(), expires_at: None }],
        created_at: now,
        updated_at: now,
        version: 1,
        auto_requeue: false,
        ack_timeout_secs: None,
        pull: false,
        verification_token: None,
    }
}

/// Creates `n` unmatched subscriptions, `concurrency` requests at once:
/// through the store port (`Stores::subscriptions.create`: one
/// `TransactWriteItems` each), or by writing the same items
/// (`item::subscription_items`, what that transaction writes) with
/// `BatchWriteItem`, 25 at a time. The emulator cannot take the first at
/// this scale: its `TransactWriteItems` deep-copies the whole table for
/// every action (a create of N subscriptions costs O(N^2)), and concurrent
/// ones fail ("dictionary changed size during iteration").
pub(crate) async fn create_unmatched(
    p: &AwsPipeline,
    addr: std::net::SocketAddr,
    n: usize,
    concurrency: usize,
    through_store: bool,
) -> anyhow::Result<()> {
    let callback = format!("http://{addr}");
    let h = p.hookline.clone();
    let subs: Vec<Subscription> = (0..n).map(|i| unmatched_subscription(i, &callback, &h)).collect();
    let subs = Arc::new(subs);
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    // Not the backend's (metered) client: set-up is no request of the backend.
    let client = aws_sdk_dynamodb::Client::new(&hookline_tests::emulator::aws_config().await);
    let table = p.backend.names.subscriptions_table.clone();
    let per_request = if through_store { 1 } else { 25 };
    let batches: Arc<Vec<Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>>> =
        Arc::new(if through_store {
            Vec::new()
        } else {
            let mut items = Vec::new();
            for sub in subs.iter() {
                items
                    .extend(hookline_aws::item::subscription_items(sub, &h.keyring)?.into_iter().map(|a| a.into_sdk()));
            }
            items.chunks(per_request).map(<[_]>::to_vec).collect()
        });
    let jobs = if through_store { n } else { batches.len() };
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.min(jobs.max(1)) {
        let (h, subs, batches, next, done, client, table) =
            (h.clone(), subs.clone(), batches.clone(), next.clone(), done.clone(), client.clone(), table.clone());
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs {
                    return Ok::<_, anyhow::Error>(());
                }
                if through_store {
                    let sub = &subs[i];
                    h.stores.subscriptions.create(sub).await.map_err(|e| anyhow::anyhow!("create {}: {e}", sub.id))?;
                } else {
                    let mut pending: Vec<aws_sdk_dynamodb::types::WriteRequest> = batches[i]
                        .iter()
                        .map(|item| {
                            let put =
                                aws_sdk_dynamodb::types::PutRequest::builder().set_item(Some(item.clone())).build()?;
                            Ok(aws_sdk_dynamodb::types::WriteRequest::builder().put_request(put).build())
                        })
                        .collect::<anyhow::Result<_>>()?;
                    while !pending.is_empty() {
                        let out = client
                            .batch_write_item()
                            .request_items(table.clone(), std::mem::take(&mut pending))
                            .send()
                            .await
                            .map_err(|e| {
                                anyhow::anyhow!("BatchWriteItem: {}", aws_sdk_dynamodb::error::DisplayErrorContext(&e))
                            })?;
                        pending = out.unprocessed_items().and_then(|u| u.get(&table)).cloned().unwrap_or_default();
                    }
                }
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if d % (jobs / 5).max(1) == 0 {
                    eprintln!("  {d} of {jobs} requests of the set-up done");
                }
            }
        });
    }
    while let Some(r) = workers.join_next().await {
        r??;
    }
    // Five of them read back through the store port: stored as written,
    // and found under their route keys in the index.
    let store = &p.hookline.stores.subscriptions;
    for sub in subs.iter().step_by((n / 5).max(1)) {
        let got = store.get(&sub.id).await.map_err(|e| anyhow::anyhow!("get {}: {e}", sub.id))?;
        anyhow::ensure!(got.as_ref() == Some(sub), "subscription {} not stored as written", sub.id);
        let keys = shared::routing::index_keys(sub);
        let found = store.routes(&keys).await.map_err(|e| anyhow::anyhow!("routes: {e}"))?;
        anyhow::ensure!(found.iter().flatten().any(|id| *id == sub.id), "{} not found under {keys:?}", sub.id);
    }
    // Nothing was routed yet, but a cache must never hide a write.
    h.subscription_cache.invalidate().await;
    Ok(())
}

pub(crate) async fn run(s: &Scenario, a: &Args) -> anyhow::Result<Measured> {
    let sdk = hookline_tests::emulator::aws_config().await;
    let meter = Meter::new();
    let p = Arc::new(
        AwsPipeline::start_with_clients(
            &format!("cost{}", s.key),
            meter.dynamodb_client(&sdk),
            meter.sqs_client(&sdk),
            &a.settings(),
        )
        .await,
    );
    let hits = Hits::default();
    let addr = receiver(hits.clone()).await;

    // Setup, not counted: subscriptions no event matches (scenario D, see
    // create_unmatched), then the matching ones created and verified (the API).
    let unmatched_setup = if s.unmatched > 0 {
        let t = Instant::now();
        create_unmatched(&p, addr, s.unmatched, a.setup_concurrency, a.setup_through_store).await?;
        eprintln!("  [{}] {} unmatched subscriptions written in {:.1}s", s.key, s.unmatched, t.elapsed().as_secs_f64());
        Some(t.elapsed())
    } else {
        None
    };
    for j in 0..s.subscriptions {
        let mut body = json!({"callback_url": format!("http://{addr}/s{j}"), "event_types": ["order.created"]});
        for (k, v) in s.subscription_fields.as_object().into_iter().flatten() {
            body[k] = v.clone();
        }
        p.subscribe(body).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Warm-up, not counted: what a warm container does once (a tenant's
    // event type recorded as seen, the subscription cache filled) is not a
    // cost per delivery at a million deliveries.
    if a.warmup > 0 {
        let t = Instant::now();
        let warm = s.events..s.events + a.warmup;
        send(&p, s, a, warm).await?;
        settle(&p, s, &hits, &meter, a.warmup * s.subscriptions, a.timeout).await?;
        eprintln!("  [{}] {} warm-up events delivered in {:.1}s", s.key, a.warmup, t.elapsed().as_secs_f64());
    }
    let (m0, d0) = (meter.snapshot(), p.stats().snapshot());

    // Idle polling rate of the mappings (for the note on empty receives).
    let idle0 = p.stats().snapshot();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle1 = p.stats().snapshot();
    let empty = |d: &DriverCounts| -> u64 {
        d.sqs.iter().filter(|((_, op), _)| op.contains("empty")).map(|(_, r)| r.requests).sum()
    };
    let idle_receives_per_s = (empty(&idle1) - empty(&idle0)) as f64;
    let (m0, d0) =
        if activity(&meter.snapshot(), &idle1) == activity(&m0, &d0) { (m0, d0) } else { (meter.snapshot(), idle1) };

    let started = Instant::now();
    let ids = send(&p, s, a, 0..s.events).await?;
    let deliveries = s.events * s.subscriptions;
    // The receiver counts the warm-up's deliveries too.
    let expected = (a.warmup + s.events) * s.subscriptions;
    eprintln!(
        "  [{}] {} events ingested in {:.1}s; waiting for {deliveries} deliveries ({expected} with the warm-up's)",
        s.key,
        s.events,
        started.elapsed().as_secs_f64()
    );
    let delivered = settle(&p, s, &hits, &meter, expected, a.timeout).await?;
    let elapsed = delivered.duration_since(started);
    let (m1, d1) = (meter.snapshot(), p.stats().snapshot());

    // After the counters are read: the API agrees, for a sample of events.
    anyhow::ensure!(ids.len() == s.events, "{} event ids accepted, {} sent", ids.len(), s.events);
    for id in [&ids[0], &ids[ids.len() / 2], &ids[ids.len() - 1]] {
        let d = p.settled_deliveries(id, s.subscriptions, 30).await;
        anyhow::ensure!(d.iter().all(|x| x["status"] == "completed"), "event {id}: {d:?}");
    }
    let duplicates = hits.total() - hits.distinct();
    anyhow::ensure!(
        hits.distinct() == expected,
        "{} distinct deliveries, {expected} expected with the warm-up's (an unmatched subscription got one?)",
        hits.distinct()
    );
    Ok(Measured {
        meter: m1.since(&m0),
        driver: driver_since(&d1, &d0),
        deliveries,
        duplicates,
        elapsed,
        idle_receives_per_s,
        scans: meter.snapshot().scans,
        unmatched_setup,
    })
}

/// Sends the events of `range` as the scenario ingests them (one per
/// request or in batches), from `--concurrency` producers at `--rate`;
/// answers the accepted event ids.
async fn send(
    p: &Arc<AwsPipeline>,
    s: &Scenario,
    a: &Args,
    range: std::ops::Range<usize>,
) -> anyhow::Result<Vec<String>> {
    let (requests, path): (Vec<Vec<u8>>, _) = match s.ingest {
        Ingest::Single => (range.map(|i| s.event(i, a.payload_bytes)).collect(), "/v1/events"),
        Ingest::Batch(n) => (
            range
                .collect::<Vec<_>>()
                .chunks(n)
                .map(|c| {
                    let items: Vec<Value> =
                        c.iter().map(|i| serde_json::from_slice(&s.event(*i, a.payload_bytes)).unwrap()).collect();
                    serde_json::to_vec(&items).unwrap()
                })
                .collect(),
            "/v1/events/batch",
        ),
    };
    let started = Instant::now();
    let requests = Arc::new(requests);
    let next = Arc::new(AtomicUsize::new(0));
    let ids = Arc::new(Mutex::new(Vec::new()));
    let mut producers = Vec::new();
    let rate = a.rate;
    for _ in 0..a.concurrency {
        let (p, requests, next, ids) = (p.clone(), requests.clone(), next.clone(), ids.clone());
        producers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = requests.get(i) else { return Ok::<_, anyhow::Error>(()) };
                if rate > 0.0 {
                    // Request i is sent no earlier than i / rate after the first.
                    tokio::time::sleep_until((started + Duration::from_secs_f64(i as f64 / rate)).into()).await;
                }
                let (st, v) = p.call("POST", path, Some(body)).await;
                anyhow::ensure!(st == 202, "POST {path} answered {st}: {v}");
                let mut ids = ids.lock().unwrap();
                match v["results"].as_array() {
                    Some(r) => ids.extend(r.iter().filter_map(|x| x["event_id"].as_str().map(str::to_string))),
                    None => ids.extend(v["event_id"].as_str().map(str::to_string)),
                }
            }
        }));
    }
    for t in producers {
        t.await??;
    }
    let ids = ids.lock().unwrap().clone();
    Ok(ids)
}

/// Waits until `deliveries` distinct deliveries arrived and as many sagas
/// are Completed (answering when that was), then until the trailing
/// deletes and transitions are done (no metered activity for 1.5 s).
async fn settle(
    p: &AwsPipeline,
    s: &Scenario,
    hits: &Hits,
    meter: &Meter,
    deliveries: usize,
    timeout: Duration,
) -> anyhow::Result<Instant> {
    let started = Instant::now();
    let deadline = started + timeout;
    let mut last_report = Instant::now();
    loop {
        let got = hits.distinct();
        if got >= deliveries && completed_sagas(p).await >= deliveries {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "timed out: {got} of {deliveries} deliveries");
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!("  [{}] {got}/{deliveries} delivered after {:.0}s", s.key, started.elapsed().as_secs_f64());
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let delivered = Instant::now();
    let mut stable_since = Instant::now();
    let mut last = activity(&meter.snapshot(), &p.stats().snapshot());
    while stable_since.elapsed() < Duration::from_millis(1500) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = activity(&meter.snapshot(), &p.stats().snapshot());
        if now != last {
            last = now;
            stable_since = Instant::now();
        }
    }
    Ok(delivered)
}
