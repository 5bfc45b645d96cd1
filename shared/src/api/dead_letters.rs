//! `/v1/dead-letters`: list and inspect dead letters, requeue or skip one
//! with an audit record.

use serde::{Deserialize, Serialize};

use super::{parse, query_param, Api, ApiError, ApiResult, Request, Response};
use crate::dead_letter::{DeadLetter, DeadLetterState};
use crate::ids::{DeadLetterId, SagaId};
use crate::stage::requeue::{self, Audit};

/// `POST /v1/dead-letters/{id}/requeue` and `…/skip`: the audit record.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditBody {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    actor: Option<String>,
}

impl From<AuditBody> for Audit {
    fn from(b: AuditBody) -> Audit {
        Audit {
            actor: b.actor.unwrap_or_else(|| "api".into()),
            reason: b.reason.unwrap_or_else(|| "no reason given".into()),
        }
    }
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

    pub(super) async fn resolve_dead_letter(&self, id: &DeadLetterId, req: &Request<'_>, requeue: bool) -> ApiResult {
        let audit: Audit = parse::<AuditBody>(req.body, true)?.into();
        if requeue {
            let saga_id = requeue::request_requeue(&self.hookline, id, &audit).await?;
            Ok(Response::json(202, &Requeued { dead_letter_id: id, saga_id }))
        } else {
            requeue::skip(&self.hookline, id, &audit).await?;
            Ok(Response::json(200, &Skipped { dead_letter_id: id, state: DeadLetterState::Skipped }))
        }
    }
}
