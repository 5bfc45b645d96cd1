//! The event catalog (docs/formats.md#event-catalog): `POST
//! /v1/event-types` registers a major version of an event type with its
//! JSON Schema, description and example; `GET /v1/event-types/{name}` shows
//! a type's versions. The catalog is deployment-wide; `GET /v1/event-types`
//! lists it together with the types seen ([`crate::portal::EventType`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// `POST /v1/event-types`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "order.created", "version": 1,
    "schema": {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number", "minimum": 0}}},
    "description": "An order was placed.", "example": {"amount": 12.5}}))]
pub struct RegisterEventType {
    /// The type's name: the event type of version 1 (`order.created`);
    /// version N ≥ 2 is the type `<name>.v<N>`. Not `hookline.…`, not
    /// itself ending in `.v<N>`.
    pub name: String,
    /// The major version, 1 to 999.
    pub version: u32,
    /// The JSON Schema of the event's data (native `data`, the other
    /// formats' `payload`), of the supported subset: `type`, `properties`,
    /// `required`, `additionalProperties`, `items`, `enum`, `const`,
    /// `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
    /// `minLength`, `maxLength`, `minItems`, `maxItems`, `format`
    /// (`date-time`, `date`, `uuid`, `email`, `uri`); annotations (`title`,
    /// `description`, `$schema`, …) are allowed. Any other keyword is
    /// refused by name. At most 64 KiB.
    #[schema(value_type = Object)]
    pub schema: Value,
    /// What the type means (1 to 2000 characters).
    #[serde(default)]
    pub description: Option<String>,
    /// An example of the data; it must validate against the schema.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub example: Option<Value>,
}

/// One registered major version of a type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"name": "order.created", "version": 2, "event_type": "order.created.v2",
    "schema": {"type": "object"}, "description": "An order was placed.", "example": {},
    "registered_at": "2026-11-29T04:00:00Z", "updated_at": "2026-11-29T04:00:00Z"}))]
pub struct CatalogVersion {
    /// The type's name.
    pub name: String,
    /// The major version.
    pub version: u32,
    /// The event type producers send and subscriptions name: `name` for
    /// version 1, `name.v<N>` after.
    pub event_type: String,
    /// The JSON Schema of the event's data.
    #[schema(value_type = Object)]
    pub schema: Value,
    /// What the type means.
    pub description: Option<String>,
    /// An example of the data.
    #[schema(value_type = Option<Object>)]
    pub example: Option<Value>,
    /// When this version was first registered.
    pub registered_at: DateTime<Utc>,
    /// When it last changed (optional properties added, a new description
    /// or example).
    pub updated_at: DateTime<Utc>,
}

/// `GET /v1/event-types/{name}`: a type's registered versions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CatalogType {
    /// The type's name.
    pub name: String,
    /// Its registered versions, oldest first.
    pub versions: Vec<CatalogVersion>,
}
