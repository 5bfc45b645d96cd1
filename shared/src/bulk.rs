//! Bulk jobs: requeue or skip every open dead letter a filter takes, or
//! replay every event a filter takes, one page at a time, with progress an
//! operator can follow (`GET /v1/jobs/{id}`).
//!
//! A job is one record, rewritten only on condition of its version
//! ([`crate::ports::JobStore`]). Each page goes through three writes:
//!
//! 1. **plan**: the page's items (ids) and the position after them are
//!    stored on the job *before* anything is acted on ([`Job::planned`]).
//!    A page done again (after a crash) acts on exactly the same items,
//!    although acting changed what a new listing would find (a requeued
//!    dead letter is no longer open).
//! 2. **act** on each item, idempotently: an item this job already acted
//!    on is recognised (its resolution names the job; a replay's saga ids
//!    derive from the job id) and counted as done again, never twice.
//! 3. **commit** ([`Job::committed`]): the page's counts are added and the
//!    position advances, on condition of the version the plan was stored
//!    with, so only one worker's counts of a page are ever added.
//!
//! The next page is asked for by a message on the requeue queue
//! ([`JobStep`]): a worker that dies anywhere leaves its message to be
//! received again, and the job goes on from its record.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::dead_letter::DeadLetterQuery;

/// What a job does to each item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// Requeue each open dead letter of the filter (a new saga each).
    Requeue,
    /// Skip each open dead letter of the filter.
    Skip,
    /// Replay each event of the filter (new sagas).
    Replay,
}

impl JobKind {
    /// The spelling of the API.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Requeue => "requeue",
            JobKind::Skip => "skip",
            JobKind::Replay => "replay",
        }
    }
}

/// What a job does and to which items: the kind with the filter it
/// takes, typed, so a job's filter is checked once when the job is made
/// rather than parsed again on every page. Stored (and shown) as the
/// `kind` and `filter` fields of the job, the shape jobs had when the
/// filter was untyped JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "filter", rename_all = "lowercase")]
pub enum JobSpec {
    /// Requeue each open dead letter of the query (a new saga each).
    Requeue(DeadLetterQuery),
    /// Skip each open dead letter of the query.
    Skip(DeadLetterQuery),
    /// Replay each event of the filter (new sagas).
    Replay(ReplayFilter),
}

impl JobSpec {
    /// Its kind, as the API names it.
    pub fn kind(&self) -> JobKind {
        match self {
            JobSpec::Requeue(_) => JobKind::Requeue,
            JobSpec::Skip(_) => JobKind::Skip,
            JobSpec::Replay(_) => JobKind::Replay,
        }
    }

    /// A dead-letter job of `kind` (requeue or skip) over `query`; `None`
    /// for [`JobKind::Replay`], which takes a [`ReplayFilter`].
    pub fn dead_letters(kind: JobKind, query: DeadLetterQuery) -> Option<JobSpec> {
        match kind {
            JobKind::Requeue => Some(JobSpec::Requeue(query)),
            JobKind::Skip => Some(JobSpec::Skip(query)),
            JobKind::Replay => None,
        }
    }

    /// Its filter, to show or record (the `filter` of the stored job).
    pub fn filter(&self) -> JobFilter<'_> {
        match self {
            JobSpec::Requeue(q) | JobSpec::Skip(q) => JobFilter::DeadLetters(q),
            JobSpec::Replay(f) => JobFilter::Events(f),
        }
    }
}

/// A job's filter, borrowed: serialized as the filter itself (no tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum JobFilter<'a> {
    /// The dead letters a requeue or skip job takes.
    DeadLetters(&'a DeadLetterQuery),
    /// The events a replay job takes.
    Events(&'a ReplayFilter),
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Pages are still being done.
    Running,
    /// Every page is done (some items may have failed: see the counts).
    Completed,
    /// The job stopped (its `error` says why).
    Failed,
}

/// The page being done: planned before acting, so a redo acts on the same
/// items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PagePlan {
    /// Which page (0 first).
    pub page: u64,
    /// The ids of its items (dead letter or event ids).
    pub items: Vec<String>,
    /// Where the listing goes on after it; `None`: this is the last page.
    pub next: Option<String>,
}

/// One bulk job, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// `job_…`.
    pub id: String,
    /// What it does, and to which items: stored as its `kind` and `filter`
    /// fields, as before the spec was typed.
    #[serde(flatten)]
    pub spec: JobSpec,
    /// Where it is.
    pub state: JobState,
    /// The operator's reason, recorded on every item acted on.
    pub reason: String,
    /// Who asked.
    pub actor: String,
    /// The tenant the job works for: the tenant of the key that started it
    /// when that key is bound to one, else its filter's or its target
    /// subscription's; `None`: no tenant. Its running jobs are capped
    /// ([`crate::stage::bulk::admit`]; jobs without a tenant share one
    /// cap), and a tenant-bound key sees only its tenant's jobs
    /// ([`crate::access::Caller::sees`]). Absent from jobs stored before it
    /// existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<crate::ids::TenantId>,
    /// How many items the job was counted to take when it was created
    /// ([`crate::stage::bulk::admit`]), shown by `GET /v1/jobs/{id}`;
    /// absent from jobs stored before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<u64>,
    /// Items listed so far.
    pub matched: u64,
    /// Items acted on.
    pub done: u64,
    /// Items that could not be acted on (resolved by someone else meanwhile,
    /// gone).
    pub failed: u64,
    /// Replay jobs naming a subscription: events passed over because that
    /// subscription's routing would not take them (another tenant's, or a
    /// type none of its patterns matches; [`crate::routing::check_scope`]).
    /// Counted apart so the operator sees what was left out; absent from
    /// jobs stored before it existed (0).
    #[serde(default)]
    pub skipped_not_routed: u64,
    /// When it was asked for.
    pub created_at: DateTime<Utc>,
    /// Its last change.
    pub updated_at: DateTime<Utc>,
    /// Bumped by every write; the condition of the next.
    pub version: u64,
    /// Pages committed.
    pub page: u64,
    /// Where the next page's listing starts (`None`: from the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<String>,
    /// The page in progress, if planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PagePlan>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Job {
    /// A new running job, at its first page.
    pub fn new(spec: JobSpec, reason: &str, actor: &str, now: DateTime<Utc>) -> Job {
        Job {
            id: format!("job_{}", uuid::Uuid::now_v7().simple()),
            spec,
            state: JobState::Running,
            reason: reason.to_string(),
            actor: actor.to_string(),
            tenant_id: None,
            items: None,
            matched: 0,
            done: 0,
            failed: 0,
            skipped_not_routed: 0,
            created_at: now,
            updated_at: now,
            version: 1,
            page: 0,
            position: None,
            plan: None,
            error: None,
        }
    }

    /// What it does to each item.
    pub fn kind(&self) -> JobKind {
        self.spec.kind()
    }

    /// The plan of the current page, if it is planned.
    pub fn current_plan(&self) -> Option<&PagePlan> {
        self.plan.as_ref().filter(|p| p.page == self.page)
    }

    /// The job with its current page planned: these items, then `next`.
    pub fn planned(&self, items: Vec<String>, next: Option<String>, now: DateTime<Utc>) -> Job {
        Job {
            plan: Some(PagePlan { page: self.page, items, next }),
            version: self.version + 1,
            updated_at: now,
            ..self.clone()
        }
    }

    /// The job with its planned page done: its counts added, the position
    /// past it, completed after the last page. Unchanged without a plan.
    pub fn committed(&self, done: u64, failed: u64, now: DateTime<Utc>) -> Job {
        self.committed_counts(PageCounts { done, failed, skipped_not_routed: 0 }, now)
    }

    /// [`Job::committed`] with every count of the page ([`counts`]).
    pub fn committed_counts(&self, c: PageCounts, now: DateTime<Utc>) -> Job {
        let Some(plan) = self.current_plan() else { return self.clone() };
        let last = plan.next.is_none();
        Job {
            matched: self.matched + plan.items.len() as u64,
            done: self.done + c.done,
            failed: self.failed + c.failed,
            skipped_not_routed: self.skipped_not_routed + c.skipped_not_routed,
            page: self.page + 1,
            position: plan.next.clone(),
            plan: None,
            state: if last { JobState::Completed } else { JobState::Running },
            version: self.version + 1,
            updated_at: now,
            ..self.clone()
        }
    }

    /// The job stopped for `error`.
    pub fn failed_with(&self, error: &str, now: DateTime<Utc>) -> Job {
        Job {
            state: JobState::Failed,
            error: Some(error.to_string()),
            version: self.version + 1,
            updated_at: now,
            ..self.clone()
        }
    }

    /// The job stopped because the message of its page was received
    /// `receives` times without the page being finished: what it did stays
    /// counted, and it no longer shows `running` while nothing runs it.
    pub fn stuck(&self, receives: u32, now: DateTime<Utc>) -> Job {
        self.failed_with(
            &format!(
                "page {} was tried {receives} times without being finished (its worker failed, crashed or timed out each time; the logs say why); the job stops here",
                self.page
            ),
            now,
        )
    }

    /// What a worker holding the message for page `page` does with the job
    /// as stored now.
    pub fn next_step(&self, page: u64) -> Step<'_> {
        if self.state != JobState::Running {
            return Step::Finished;
        }
        if page < self.page {
            // The message's page was committed, but its worker may have died
            // before asking for the next: ask again (a duplicate request is
            // harmless, one commit per page wins).
            return Step::Resend(self.page);
        }
        if page > self.page {
            return Step::Finished;
        }
        match self.current_plan() {
            Some(plan) => Step::Act(plan),
            None => Step::Plan,
        }
    }
}

/// The running jobs of one tenant ([`crate::stage::bulk::admit`]): one
/// small record per tenant in the job store, rewritten on condition of its
/// version, listing the jobs holding its slots. A slot is freed lazily: a
/// tenant at its cap has each listed job read, and the ones no longer
/// running (or never created, after a grace time) give their slots up.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TenantSlots {
    /// The jobs holding a slot, each with when it took it.
    pub jobs: Vec<Slot>,
    /// Bumped by every write; 0: not stored yet.
    pub version: u64,
}

/// One slot of [`TenantSlots`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    /// The job holding it.
    pub job_id: String,
    /// When it was taken (a job not stored this long after gives it up).
    pub taken_at: DateTime<Utc>,
}

/// The key of a tenant's [`TenantSlots`] in the job store: `slots#t:` and
/// the tenant, or `slots#none` for jobs without a tenant. Never a job id
/// (those start `job_`).
pub fn slots_key(tenant: Option<&crate::ids::TenantId>) -> String {
    match tenant {
        Some(t) => format!("slots#t:{t}"),
        None => "slots#none".to_string(),
    }
}

/// What [`Job::next_step`] answers.
#[derive(Debug, PartialEq)]
pub enum Step<'a> {
    /// Nothing to do: the job ended, or the message is not one it sent.
    Finished,
    /// The message's page was done; ask for this page instead.
    Resend(u64),
    /// List the page and store its plan.
    Plan,
    /// Act on this planned page, then commit it.
    Act(&'a PagePlan),
}

/// The requeue-queue message that asks for a job's page to be done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStep {
    /// The job.
    pub job_id: String,
    /// Its page.
    pub page: u64,
}

/// Which events a replay job replays (`POST /v1/replays`): one event, one
/// partition (in acceptance order), or a time range of receipt; to one
/// subscription or every one that matches each event now; optionally only
/// events of some types.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReplayFilter {
    /// One event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<crate::ids::EventId>,
    /// The events of one partition key, in `partition_seq` order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_key: Option<String>,
    /// The partition's tenant (a partition key is per tenant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<crate::ids::TenantId>,
    /// Events received from then (inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Events received before then (exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// Only to this subscription, and only the events its routing would
    /// take (its tenant, its patterns); the others are counted in
    /// [`Job::skipped_not_routed`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<crate::ids::SubscriptionId>,
    /// Only events of these types (exact, or a pattern ending in `*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<String>>,
    /// Only to subscriptions of this tenant (none global): the tenant of
    /// the key that started the job, when it is bound to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined_to: Option<crate::ids::TenantId>,
}

impl ReplayFilter {
    /// The patterns of `event_types`, if it narrows the replay by type
    /// (absent or empty: every type).
    fn type_patterns(&self) -> Option<&[String]> {
        self.event_types.as_deref().filter(|t| !t.is_empty())
    }

    /// Whether the replay takes only some event types.
    pub fn narrows_types(&self) -> bool {
        self.type_patterns().is_some()
    }

    /// Whether an event of `event_type` is one this replay takes: any type
    /// without `event_types`, else one its patterns match.
    pub fn takes(&self, event_type: &str) -> bool {
        self.type_patterns().is_none_or(|types| types.iter().any(|p| crate::routing::pattern_matches(p, event_type)))
    }
}

/// How one item of a page came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemOutcome {
    /// Acted on (now, or by an earlier run of this page).
    Done,
    /// Could not be acted on.
    Failed,
    /// A replay's event the named subscription's routing would not take:
    /// passed over on purpose, not a failure.
    SkippedNotRouted,
}

/// What one page adds to a job's counts ([`Job::committed_counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageCounts {
    /// Items acted on.
    pub done: u64,
    /// Items that could not be acted on.
    pub failed: u64,
    /// Replayed events the named subscription's routing would not take.
    pub skipped_not_routed: u64,
}

/// The counts of a page's outcomes.
pub fn counts(outcomes: &[ItemOutcome]) -> PageCounts {
    let n = |want: ItemOutcome| outcomes.iter().filter(|o| **o == want).count() as u64;
    PageCounts {
        done: n(ItemOutcome::Done),
        failed: n(ItemOutcome::Failed),
        skipped_not_routed: n(ItemOutcome::SkippedNotRouted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Job {
        Job::new(JobSpec::Requeue(DeadLetterQuery::default()), "fixed", "key:ops", Utc::now())
    }

    /// A job is stored as it was when its filter was untyped JSON: `kind`
    /// and `filter` beside the other fields, and reads back the same.
    #[test]
    fn a_job_spec_is_stored_as_kind_and_filter() {
        let q = DeadLetterQuery {
            subscription_id: Some(crate::ids::SubscriptionId::new("sub_a")),
            ..DeadLetterQuery::default()
        };
        let j = Job::new(JobSpec::Skip(q.clone()), "fixed", "key:ops", Utc::now());
        let v = serde_json::to_value(&j).unwrap();
        assert_eq!(v["kind"], "skip");
        assert_eq!(v["filter"], serde_json::to_value(&q).unwrap());
        assert_eq!(serde_json::from_value::<Job>(v).unwrap(), j);
        let mut old = serde_json::to_value(job()).unwrap();
        old["kind"] = "replay".into();
        old["filter"] = serde_json::json!({"partition_key": "p", "tenant_id": "t"});
        let read: Job = serde_json::from_value(old).unwrap();
        let JobSpec::Replay(f) = &read.spec else { panic!("{read:?}") };
        assert_eq!((f.partition_key.as_deref(), f.tenant_id.as_ref().map(|t| t.as_str())), (Some("p"), Some("t")));
        assert_eq!(
            serde_json::to_value(read.spec.filter()).unwrap(),
            serde_json::json!({"partition_key": "p", "tenant_id": "t"})
        );
    }

    #[test]
    fn a_page_is_planned_then_acted_on_then_committed_once() {
        let j = job();
        assert_eq!(j.next_step(0), Step::Plan);
        let p = j.planned(vec!["a".into(), "b".into()], Some("pos".into()), Utc::now());
        assert_eq!(p.version, j.version + 1);
        let Step::Act(plan) = p.next_step(0) else { panic!() };
        assert_eq!(plan.items, ["a", "b"]);
        let c = p.committed(1, 1, Utc::now());
        assert_eq!((c.matched, c.done, c.failed, c.page, c.state), (2, 1, 1, 1, JobState::Running));
        assert_eq!(c.position.as_deref(), Some("pos"));
        assert_eq!(c.committed(5, 5, Utc::now()), c, "no plan, nothing to commit");
        // The redelivered message of page 0 asks for page 1 again.
        assert_eq!(c.next_step(0), Step::Resend(1));
        assert_eq!(c.next_step(1), Step::Plan);
        let last = c.planned(vec!["c".into()], None, Utc::now()).committed(1, 0, Utc::now());
        assert_eq!((last.matched, last.done, last.state), (3, 2, JobState::Completed));
        assert_eq!(last.next_step(2), Step::Finished);
    }

    #[test]
    fn an_empty_last_page_completes_the_job() {
        let j = job().planned(vec![], None, Utc::now()).committed(0, 0, Utc::now());
        assert_eq!((j.state, j.matched), (JobState::Completed, 0));
    }

    #[test]
    fn counts_split_outcomes() {
        let c = counts(&[
            ItemOutcome::Done,
            ItemOutcome::Failed,
            ItemOutcome::SkippedNotRouted,
            ItemOutcome::Done,
            ItemOutcome::SkippedNotRouted,
        ]);
        assert_eq!(c, PageCounts { done: 2, failed: 1, skipped_not_routed: 2 });
    }

    #[test]
    fn events_not_routed_are_counted_apart_and_matched() {
        let j = job().planned(vec!["a".into(), "b".into(), "c".into()], None, Utc::now());
        let c = j.committed_counts(PageCounts { done: 1, failed: 0, skipped_not_routed: 2 }, Utc::now());
        assert_eq!((c.matched, c.done, c.failed, c.skipped_not_routed), (3, 1, 0, 2));
        assert_eq!(c.matched, c.done + c.failed + c.skipped_not_routed);
    }

    #[test]
    fn a_job_stored_before_the_count_reads_as_none_skipped() {
        let mut v = serde_json::to_value(job()).unwrap();
        v.as_object_mut().unwrap().remove("skipped_not_routed");
        let j: Job = serde_json::from_value(v).unwrap();
        assert_eq!(j.skipped_not_routed, 0);
    }
}
