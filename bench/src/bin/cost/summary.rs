//! The report of a run (requests, units, invocations and their cost per
//! delivery) and the comparison of two runs.

use super::*;

// ------------------------------------------------------------------ report

pub(crate) struct Line {
    pub(crate) group: &'static str,
    pub(crate) item: String,
    pub(crate) per_delivery: f64,
    pub(crate) usd_per_unit: f64,
}

impl Line {
    pub(crate) fn usd_per_million(&self) -> f64 {
        self.per_delivery * self.usd_per_unit * 1e6
    }
}

/// What the comparisons between scenarios need, per delivery.
pub(crate) struct Summary {
    /// Dollars per million deliveries.
    pub(crate) total: f64,
    /// Of which Lambda duration (wall time here: the noisy part).
    pub(crate) duration: f64,
    /// DynamoDB (requests, WRU, RRU, conditional failures) by (table or
    /// `Table[index]`, operation).
    pub(crate) dynamodb: BTreeMap<(String, String), (f64, f64, f64, f64)>,
    /// SQS requests as billed (the functions' and the mappings').
    pub(crate) sqs: f64,
    /// Lambda invocations.
    pub(crate) invocations: f64,
    /// DynamoDB `Scan`s over the whole scenario.
    pub(crate) scans: u64,
}

impl Summary {
    pub(crate) fn dynamodb_totals(&self) -> (f64, f64, f64) {
        self.dynamodb.values().fold((0.0, 0.0, 0.0), |(r, w, u), x| (r + x.0, w + x.1, u + x.2))
    }
}

pub(crate) fn report(
    s: &Scenario,
    m: &Measured,
    prices: &Prices,
    functions: &BTreeMap<String, FunctionConfig>,
) -> Summary {
    let n = m.deliveries as f64;
    let per = |x: f64| x / n;
    println!();
    println!("== Scenario {}: {} ==", s.key, s.title);
    println!(
        "   {} events x {} subscription(s) = {} deliveries, all Completed; {:.1}s from the first ingest request to the last \
         Completed saga; duplicate deliveries: {}",
        s.events, s.subscriptions, m.deliveries, m.elapsed.as_secs_f64(), m.duplicates
    );
    if let Some(t) = m.unmatched_setup {
        println!(
            "   set-up (not counted): {} subscriptions no event matches written in {:.1}s (see the title), none \
             delivered to; a sample read back through the store port (get, and routes under its own keys)",
            s.unmatched,
            t.as_secs_f64()
        );
    }
    let scans: u64 = m.scans.values().sum();
    println!(
        "   DynamoDB Scan requests over the whole scenario (set-up, run and checks, every request of the backend's \
         client): {scans}"
    );
    for ((table, origin), k) in &m.scans {
        println!("     {k} Scan(s) of {table}, issued by {origin}");
    }
    println!();
    println!("   Counts per delivered event");
    println!(
        "   {:<10} {:<38} {:<22} {:>9} {:>8} {:>8} {:>10}",
        "service", "operation", "resource / function", "requests", "WRU", "RRU", "avg item B"
    );
    println!("   {}", "-".repeat(112));
    let row = |svc: &str, op: &str, res: &str, req: Option<f64>, w: Option<f64>, r: Option<f64>, b: Option<f64>| {
        let f = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.4}"));
        let b = b.map_or(String::new(), |b| format!("{b:.0}"));
        println!("   {svc:<10} {op:<38} {res:<22} {:>9} {:>8} {:>8} {b:>10}", f(req), f(w), f(r));
    };
    row(
        "APIGW",
        "HTTP API request",
        "-> IngestFunction",
        Some(per(m.driver.api_gateway_requests as f64)),
        None,
        None,
        None,
    );
    // DynamoDB by table and operation (index writes on their own rows).
    let mut ddb_req: BTreeMap<(String, String), u64> = BTreeMap::new();
    for ((svc, op, res), r) in &m.meter.requests {
        if svc == "DynamoDB" {
            *ddb_req.entry((res.clone(), op.clone())).or_default() += r.requests;
        }
    }
    let mut ddb_keys: Vec<&(String, String)> = m.meter.dynamodb.keys().collect();
    ddb_keys.sort();
    for k in ddb_keys {
        let u = &m.meter.dynamodb[k];
        let (table, op) = k;
        let is_index = table.contains('[');
        let label = if is_index && (op == "PutItem" || op == "UpdateItem" || op == "DeleteItem") {
            format!("{op} (index write)")
        } else if u.condition_failed > 0 {
            format!("{op} ({:.4} cond. failed)", per(u.condition_failed as f64))
        } else {
            op.clone()
        };
        let reqs = if is_index && u.requests == 0 {
            None
        } else {
            Some(per(ddb_req.get(k).copied().unwrap_or(u.requests) as f64))
        };
        // Average billed item size per write (per request for reads: the sum returned).
        // (Index rows: reads per request, index writes per write unit.)
        let writes = if is_index && u.requests == 0 { u.wru.max(1.0) } else { u.requests.max(1) as f64 };
        let avg = (u.bytes > 0).then(|| u.bytes as f64 / writes);
        row("DynamoDB", &label, table, reqs, (u.wru > 0.0).then(|| per(u.wru)), (u.rru > 0.0).then(|| per(u.rru)), avg);
    }
    for ((svc, op, res), r) in &m.meter.requests {
        // Requests on an index are metered under `Table[index]` (above).
        let on_index = m.meter.dynamodb.keys().any(|(t, o)| o == op && t.starts_with(&format!("{res}[")));
        if svc == "DynamoDB" && !on_index && !m.meter.dynamodb.contains_key(&(res.clone(), op.clone())) {
            row(
                "DynamoDB",
                &format!("{op} (errors: {})", r.errors),
                res,
                Some(per(r.requests as f64)),
                None,
                None,
                None,
            );
        }
    }
    for ((svc, op, res), r) in &m.meter.requests {
        if svc == "SQS" {
            let mut op =
                if r.billed != r.requests { format!("{op} (billed {:.4})", per(r.billed as f64)) } else { op.clone() };
            if r.errors > 0 {
                op = format!("{op} ({} errors)", r.errors);
            }
            row("SQS", &op, res, Some(per(r.requests as f64)), None, None, None);
        }
    }
    for ((function, op), r) in &m.driver.sqs {
        if op.contains("empty") {
            continue;
        }
        row(
            "SQS (ESM)",
            &format!("{op} ({:.1} msg/req)", r.items as f64 / r.requests as f64),
            function,
            Some(per(r.requests as f64)),
            None,
            None,
            None,
        );
    }
    for ((function, op), r) in &m.driver.streams {
        if op == "GetRecords" {
            row(
                "Streams",
                &format!("GetRecords, free ({:.1} rec/req)", r.items as f64 / r.requests as f64),
                function,
                Some(per(r.requests as f64)),
                None,
                None,
                None,
            );
        }
    }
    println!();
    println!(
        "   {:<18} {:>7} {:>12} {:>12} {:>12} {:>12} {:>14}",
        "Lambda function", "MB", "invocations", "records/inv", "avg ms/inv", "cpu ms/inv", "GB-s"
    );
    println!("   {}", "-".repeat(93));
    let mut gbs_total = 0.0;
    let mut inv_total = 0.0;
    let mut gbs_by: Vec<(String, f64)> = Vec::new();
    for (f, c) in &m.driver.functions {
        let cfg = functions.get(f).cloned().unwrap_or(FunctionConfig { memory_mb: 128, architecture: "?".into() });
        let gbs = c.billed_ms as f64 / 1000.0 * cfg.memory_mb as f64 / 1024.0;
        gbs_total += gbs;
        inv_total += c.invocations as f64;
        gbs_by.push((f.clone(), gbs));
        println!(
            "   {:<18} {:>7} {:>12.4} {:>12.1} {:>12.1} {:>12.3} {:>14.7}{}",
            f,
            cfg.memory_mb,
            per(c.invocations as f64),
            c.records as f64 / c.invocations as f64,
            c.wall.as_secs_f64() * 1000.0 / c.invocations as f64,
            c.cpu.as_secs_f64() * 1000.0 / c.invocations as f64,
            per(gbs),
            if c.crashed > 0 { format!("  ({} crashed)", c.crashed) } else { String::new() }
        );
    }
    println!(
        "   {:<18} {:>7} {:>12.4} {:>12} {:>12} {:>12} {:>14.7}",
        "all",
        "",
        per(inv_total),
        "",
        "",
        "",
        per(gbs_total)
    );
    if !m.meter.unmetered.is_empty() {
        println!("   WARNING: DynamoDB operations whose units are not metered: {:?}", m.meter.unmetered);
    }
    if m.meter.no_response > 0 {
        println!("   note: {} SDK attempts got no response (not billed)", m.meter.no_response);
    }

    // Dollars.
    let mut lines = vec![Line {
        group: "API Gateway",
        item: "HTTP API requests".into(),
        per_delivery: per(m.driver.api_gateway_requests as f64),
        usd_per_unit: prices.unit("apigw_http_api_request"),
    }];
    lines.push(Line {
        group: "Lambda",
        item: "requests (all functions)".into(),
        per_delivery: per(inv_total),
        usd_per_unit: prices.unit("lambda_request"),
    });
    for (f, gbs) in &gbs_by {
        lines.push(Line {
            group: "Lambda",
            item: format!("duration arm64, {f}"),
            per_delivery: per(*gbs),
            usd_per_unit: prices.unit("lambda_arm64_gb_second"),
        });
    }
    let mut wru_by: BTreeMap<String, f64> = BTreeMap::new();
    let mut rru_by: BTreeMap<String, f64> = BTreeMap::new();
    for ((table, _), u) in &m.meter.dynamodb {
        if u.wru > 0.0 {
            *wru_by.entry(table.clone()).or_default() += u.wru;
        }
        if u.rru > 0.0 {
            *rru_by.entry(table.clone()).or_default() += u.rru;
        }
    }
    for (t, w) in &wru_by {
        lines.push(Line {
            group: "DynamoDB",
            item: format!("write units, {t}"),
            per_delivery: per(*w),
            usd_per_unit: prices.unit("dynamodb_write_request_unit"),
        });
    }
    for (t, r) in &rru_by {
        lines.push(Line {
            group: "DynamoDB",
            item: format!("read units, {t}"),
            per_delivery: per(*r),
            usd_per_unit: prices.unit("dynamodb_read_request_unit"),
        });
    }
    let mut sqs_by: BTreeMap<String, u64> = BTreeMap::new();
    for ((svc, op, res), r) in &m.meter.requests {
        if svc == "SQS" {
            *sqs_by.entry(format!("{op} {res}")).or_default() += r.billed;
        }
    }
    for (k, b) in &sqs_by {
        lines.push(Line {
            group: "SQS",
            item: format!("requests, {k}"),
            per_delivery: per(*b as f64),
            usd_per_unit: prices.unit("sqs_standard_request"),
        });
    }
    for ((function, op), r) in &m.driver.sqs {
        if !op.contains("empty") {
            lines.push(Line {
                group: "SQS",
                item: format!("requests, ESM {op} ({function})"),
                per_delivery: per(r.billed as f64),
                usd_per_unit: prices.unit("sqs_standard_request"),
            });
        }
    }
    let get_records: u64 =
        m.driver.streams.iter().filter(|((_, op), _)| op == "GetRecords").map(|(_, r)| r.requests).sum();
    lines.push(Line {
        group: "DDB Streams",
        item: "GetRecords by Lambda, non-empty (free)".into(),
        per_delivery: per(get_records as f64),
        usd_per_unit: prices.unit("dynamodb_streams_read_request_lambda"),
    });
    lines.push(Line {
        group: "EventBridge",
        item: "custom events (not used here)".into(),
        per_delivery: 0.0,
        usd_per_unit: prices.unit("eventbridge_custom_event"),
    });

    let total: f64 = lines.iter().map(Line::usd_per_million).sum();
    println!();
    println!("   Dollars per million deliveries (prices as of {}, {})", prices.as_of, prices.region);
    println!("   {:<12} {:<52} {:>12} {:>10} {:>7}", "service", "line item", "per delivery", "$ / M", "share");
    println!("   {}", "-".repeat(97));
    for l in &lines {
        println!(
            "   {:<12} {:<52} {:>12.6} {:>10.4} {:>6.1}%",
            l.group,
            l.item,
            l.per_delivery,
            l.usd_per_million(),
            if total > 0.0 { 100.0 * l.usd_per_million() / total } else { 0.0 }
        );
    }
    println!("   {}", "-".repeat(97));
    let by_group = |g: &str| lines.iter().filter(|l| l.group == g).map(Line::usd_per_million).sum::<f64>();
    println!(
        "   subtotals: API Gateway ${:.4}, Lambda ${:.4} (requests ${:.4}, duration ${:.4}), DynamoDB ${:.4} (writes ${:.4}, reads ${:.4}), SQS ${:.4}",
        by_group("API Gateway"),
        by_group("Lambda"),
        lines.iter().filter(|l| l.item.starts_with("requests (all")).map(Line::usd_per_million).sum::<f64>(),
        lines.iter().filter(|l| l.item.starts_with("duration")).map(Line::usd_per_million).sum::<f64>(),
        by_group("DynamoDB"),
        lines.iter().filter(|l| l.item.starts_with("write units")).map(Line::usd_per_million).sum::<f64>(),
        lines.iter().filter(|l| l.item.starts_with("read units")).map(Line::usd_per_million).sum::<f64>(),
        by_group("SQS"),
    );
    print!("   TOTAL ${total:.4} per million deliveries");
    match s.target {
        Some(target) => {
            if total <= target {
                println!("   target <= ${target:.2}: MET (${:.4} under)", target - total);
            } else {
                println!(
                    "   target <= ${target:.2}: MISSED by ${:.4} (+{:.1}%)",
                    total - target,
                    100.0 * (total - target) / target
                );
            }
        }
        None => println!("   (no target set for this scenario)"),
    }
    let mut top: Vec<&Line> = lines.iter().filter(|l| l.usd_per_million() > 0.0).collect();
    top.sort_by(|a, b| b.usd_per_million().total_cmp(&a.usd_per_million()));
    println!(
        "   largest line items: {}",
        top.iter()
            .take(4)
            .map(|l| format!("{} {} ${:.4}", l.group, l.item, l.usd_per_million()))
            .collect::<Vec<_>>()
            .join("; ")
    );
    println!(
        "   not counted: empty ESM receives (the driver short-polls ~{:.0}/s while idle; a real SQS mapping long-polls, a \
         cost per queue per hour that does not grow with traffic)",
        m.idle_receives_per_s
    );

    // Requests as metered with their units (index reads under `Table[index]`;
    // index writes are units of their table's requests).
    let dynamodb = m
        .meter
        .dynamodb
        .iter()
        .map(|(k, u)| (k.clone(), (per(u.requests as f64), per(u.wru), per(u.rru), per(u.condition_failed as f64))))
        .collect();
    let sqs = m.meter.requests.iter().filter(|((svc, _, _), _)| svc == "SQS").map(|(_, r)| r.billed).sum::<u64>()
        + m.driver.sqs.iter().filter(|((_, op), _)| !op.contains("empty")).map(|(_, r)| r.billed).sum::<u64>();
    Summary {
        total,
        duration: lines.iter().filter(|l| l.item.starts_with("duration")).map(Line::usd_per_million).sum(),
        dynamodb,
        sqs: per(sqs as f64),
        invocations: per(inv_total),
        scans,
    }
}

/// Scenario `b` against scenario `a` (the baseline), per delivery.
pub(crate) fn compare(a: (char, &Summary), b: (char, &Summary), tolerance: Option<f64>, prices: &Prices) {
    let ((ka, sa), (kb, sb)) = (a, b);
    let (wru_usd, rru_usd) =
        (prices.unit("dynamodb_write_request_unit") * 1e6, prices.unit("dynamodb_read_request_unit") * 1e6);
    let pct = |x: f64, base: f64| if base > 0.0 { 100.0 * (x - base) / base } else { 0.0 };
    println!();
    println!("== Scenario {kb} vs scenario {ka}, per delivery ==");
    let (ra, wa, ua) = sa.dynamodb_totals();
    let (rb, wb, ub) = sb.dynamodb_totals();
    println!("   {:<44} {:>12} {:>12} {:>12}", "", ka, kb, "difference");
    println!("   {}", "-".repeat(84));
    let row = |what: &str, x: f64, y: f64| println!("   {what:<44} {x:>12.4} {y:>12.4} {:>+12.4}", y - x);
    row("DynamoDB requests", ra, rb);
    row("DynamoDB write units", wa, wb);
    row("DynamoDB read units", ua, ub);
    row("SQS requests (billed)", sa.sqs, sb.sqs);
    row("Lambda invocations", sa.invocations, sb.invocations);
    row("$ per million deliveries", sa.total, sb.total);
    row("  of which Lambda duration (wall time here)", sa.duration, sb.duration);
    row("$ per million without Lambda duration", sa.total - sa.duration, sb.total - sb.duration);
    println!("   DynamoDB rows that differ (requests / WRU / RRU / failed conditions per delivery):");
    let keys: std::collections::BTreeSet<&(String, String)> = sa.dynamodb.keys().chain(sb.dynamodb.keys()).collect();
    let mut any = false;
    for k in keys {
        let x = sa.dynamodb.get(k).copied().unwrap_or_default();
        let y = sb.dynamodb.get(k).copied().unwrap_or_default();
        let d = (y.0 - x.0, y.1 - x.1, y.2 - x.2, y.3 - x.3);
        // Below 0.005 per delivery: noise of batching (how many records each poll found).
        if [d.0, d.1, d.2, d.3].iter().any(|v| v.abs() >= 0.005) {
            any = true;
            println!(
                "     {:<38} {:<14} {:+.4} req, {:+.4} WRU, {:+.4} RRU, {:+.4} failed ({}: {:.4} req, {}: {:.4} req)",
                k.0, k.1, d.0, d.1, d.2, d.3, ka, x.0, kb, y.0
            );
        }
    }
    if !any {
        println!("     none (all within 0.005 per delivery)");
    }
    println!("   DynamoDB Scan requests over the whole scenario: {ka} {}, {kb} {}", sa.scans, sb.scans);
    let total = pct(sb.total, sa.total);
    let requests_only = pct(sb.total - sb.duration, sa.total - sa.duration);
    let verdict = |x: f64, t: f64| if x.abs() <= t { "MET" } else { "MISSED" };
    match tolerance {
        // Judged on what the requests cost; Lambda duration here is wall
        // time against the emulator, which has its own costs (e.g. moto
        // walks every item of a table for a Query on an index).
        Some(t) => println!(
            "   {kb} vs {ka}, target within {t:.0}%: priced from the requests (without Lambda duration) ${:.4} vs ${:.4} \
             per million, {requests_only:+.1}%: {}; with Lambda duration as measured (wall time on the emulator) ${:.4} vs \
             ${:.4}, {total:+.1}%: {}",
            sb.total - sb.duration,
            sa.total - sa.duration,
            verdict(requests_only, t),
            sb.total,
            sa.total,
            verdict(total, t)
        ),
        None => println!(
            "   {kb} costs ${:+.4} per million deliveries more than {ka} ({total:+.1}%); without Lambda duration \
             ${:+.4} ({requests_only:+.1}%), of which DynamoDB ${:+.4} (writes ${:+.4}, reads ${:+.4})",
            sb.total - sa.total,
            (sb.total - sb.duration) - (sa.total - sa.duration),
            (wb - wa) * wru_usd + (ub - ua) * rru_usd,
            (wb - wa) * wru_usd,
            (ub - ua) * rru_usd,
        ),
    }
}
