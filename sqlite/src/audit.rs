//! [`AuditStore`] on SQLite: the `audit` table (migrations 10 and 13), one
//! row per record; a page is one range of the index of its most selective filter,
//! newest first, the other filters checked in the same statement.

use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter};

use super::{decode, encode, sql, Db};
use shared::audit::{AuditFilter, AuditRecord};
use shared::ports::{AuditStore, Page, StoreResult};

/// The `audit` table.
pub struct SqliteAudit(pub Db);

#[async_trait]
impl AuditStore for SqliteAudit {
    async fn append(&self, rec: &AuditRecord) -> StoreResult<()> {
        let rec = rec.clone();
        self.0
            .call(move |c, _| {
                c.prepare_cached(
                    "INSERT INTO audit (id, pos, at, action, actor, subscription_id, tenant_id, data) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (id) DO NOTHING",
                )
                .map_err(sql)?
                .execute(params![
                    rec.id,
                    rec.position(),
                    rec.at.timestamp_millis(),
                    rec.action.as_str(),
                    rec.actor,
                    rec.subscription_id.as_ref().map(|s| s.as_str().to_string()),
                    rec.tenant_id.as_ref().map(|t| t.as_str().to_string()),
                    encode(&rec)
                ])
                .map_err(sql)?;
                Ok(())
            })
            .await
    }

    async fn page(&self, filter: &AuditFilter, limit: usize, after: Option<&str>) -> StoreResult<Page<AuditRecord>> {
        let (lo, hi) = filter.bounds(after);
        let filter = filter.clone();
        self.0
            .call(move |c, _| {
                // The most selective filter picks the index; `pos` ranges it.
                let index = if filter.subscription_id.is_some() {
                    "audit_by_subscription"
                } else if filter.tenant_id.is_some() {
                    "audit_by_tenant"
                } else if filter.actor.is_some() {
                    "audit_by_actor"
                } else if filter.action.is_some() {
                    "audit_by_action"
                } else {
                    "audit_by_pos"
                };
                let mut q = format!("SELECT data FROM audit INDEXED BY {index} WHERE pos >= ?1 AND pos < ?2");
                let mut args: Vec<Value> = vec![Value::Text(lo.clone()), Value::Text(hi.clone())];
                if let Some(s) = &filter.subscription_id {
                    args.push(Value::Text(s.as_str().to_string()));
                    q.push_str(&format!(" AND subscription_id = ?{}", args.len()));
                }
                if let Some(t) = &filter.tenant_id {
                    args.push(Value::Text(t.as_str().to_string()));
                    q.push_str(&format!(" AND tenant_id = ?{}", args.len()));
                }
                if let Some(a) = &filter.actor {
                    args.push(Value::Text(a.clone()));
                    q.push_str(&format!(" AND actor = ?{}", args.len()));
                }
                if let Some(a) = filter.action {
                    args.push(Value::Text(a.as_str().to_string()));
                    q.push_str(&format!(" AND action = ?{}", args.len()));
                }
                // One more than asked tells whether another page follows.
                args.push(Value::Integer(limit as i64 + 1));
                q.push_str(&format!(" ORDER BY pos DESC LIMIT ?{}", args.len()));
                let mut st = c.prepare_cached(&q).map_err(sql)?;
                let rows = st.query_map(params_from_iter(args), |r| r.get::<_, String>(0)).map_err(sql)?;
                let mut items: Vec<AuditRecord> =
                    rows.map(|r| decode(&r.map_err(sql)?)).collect::<StoreResult<Vec<AuditRecord>>>()?;
                let more = items.len() > limit;
                items.truncate(limit);
                let next = if more { items.last().map(AuditRecord::position) } else { None };
                Ok(Page { items, next })
            })
            .await
    }
}
