//! `/v1/dead-letters`: list and inspect dead letters, requeue or skip one
//! with an audit record.

use serde::{Deserialize, Serialize};

use super::{parse, query, query_param, Api, ApiError, ApiResult, Request, Response};
use crate::audit::{self, Action, AuditRecord};
use crate::dead_letter::{DeadLetter, DeadLetterState};
use crate::ids::{DeadLetterId, SagaId};
use crate::stage::requeue::{self, Audit};

/// `POST /v1/dead-letters/{id}/requeue` and `…/skip`: why (required). An
/// `actor` member is still accepted, for clients written before the audit
/// trail, and ignored: the actor is who authenticated ([`Api::actor`]),
/// never what a body claims.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditBody {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    actor: Option<serde::de::IgnoredAny>,
}

#[derive(Serialize)]
struct DeadLetterList {
    dead_letters: Vec<DeadLetter>,
}

#[derive(Serialize)]
struct Requeued<'a> {
    dead_letter_id: &'a DeadLetterId,
    saga_id: SagaId,
}

#[derive(Serialize)]
struct Skipped<'a> {
    dead_letter_id: &'a DeadLetterId,
    state: DeadLetterState,
}

impl Api {
    pub(super) async fn list_dead_letters(&self, req: &Request<'_>) -> ApiResult {
        let state = match query_param(req.query, "state") {
            None => None,
            Some(s) => {
                Some(s.parse::<DeadLetterState>().map_err(|e| ApiError::invalid("state", format!("state {e}")))?)
            }
        };
        let limit = match query_param(req.query, "limit") {
            None => 100,
            Some(l) => l
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .ok_or_else(|| ApiError::invalid("limit", "limit must be an integer between 1 and 1000"))?,
        };
        let dead_letters = self.hookline.stores.dead_letters.list(state, limit).await?;
        Ok(Response::json(200, &DeadLetterList { dead_letters }))
    }

    pub(super) async fn get_dead_letter(&self, id: &DeadLetterId) -> ApiResult {
        let dl =
            self.hookline.stores.dead_letters.get(id).await?.ok_or_else(|| ApiError::not_found("dead letter", id))?;
        Ok(Response::json(200, &dl))
    }

    /// Requeues or skips one dead letter; its audit record (actor, reason)
    /// is written once the request is accepted (queued, or skipped).
    pub(super) async fn resolve_dead_letter(&self, id: &DeadLetterId, req: &Request<'_>, requeue: bool) -> ApiResult {
        let body = parse::<AuditBody>(req.body, true)?;
        let audit = Audit { actor: self.actor(req), reason: query::reason(body.reason.as_deref())? };
        let record = |action| AuditRecord::new(action, &audit.actor).reason(&audit.reason).dead_letter(id);
        if requeue {
            let saga_id = requeue::request_requeue(&self.hookline, id, &audit).await?;
            let dl = self.hookline.stores.dead_letters.get(id).await.ok().flatten();
            let rec = with_dead_letter(record(Action::DeadLetterRequeued), dl.as_ref())
                .details(serde_json::json!({"saga_id": saga_id}));
            audit::record(&self.hookline, rec).await;
            Ok(Response::json(202, &Requeued { dead_letter_id: id, saga_id }))
        } else {
            requeue::skip(&self.hookline, id, &audit).await?;
            let dl = self.hookline.stores.dead_letters.get(id).await.ok().flatten();
            audit::record(&self.hookline, with_dead_letter(record(Action::DeadLetterSkipped), dl.as_ref())).await;
            Ok(Response::json(200, &Skipped { dead_letter_id: id, state: DeadLetterState::Skipped }))
        }
    }
}

/// A dead letter's record with its subscription and event ids.
fn with_dead_letter(rec: AuditRecord, dl: Option<&DeadLetter>) -> AuditRecord {
    match dl {
        Some(d) => rec.subscription(&d.subscription_id).event(&d.event_id),
        None => rec,
    }
}
