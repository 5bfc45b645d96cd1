//! What the meter reads from `template.yaml` and `infra/prices.json`: the
//! tables' key schemas and indexes, the functions' memory sizes, the
//! prices; and the counts it keeps.

use super::*;

// ------------------------------------------------------------------ schema

/// What an index projects.
#[derive(Debug, Clone, PartialEq)]
pub enum Projection {
    /// Every attribute.
    All,
    /// The index and table keys.
    KeysOnly,
    /// The keys and these attributes.
    Include(Vec<String>),
}

/// One global secondary index.
#[derive(Debug, Clone)]
pub struct IndexSchema {
    /// Its name.
    pub name: String,
    /// Its key attributes.
    pub key: Vec<String>,
    /// Its projection.
    pub projection: Projection,
}

/// One table of the template.
#[derive(Debug, Clone)]
pub struct TableSchema {
    /// Its logical id (tables are named `<prefix>-<logical id>`).
    pub logical_id: String,
    /// Its key attributes (partition key first).
    pub key: Vec<String>,
    /// Its global secondary indexes.
    pub indexes: Vec<IndexSchema>,
    /// Its TTL attribute, when the template enables TTL on it.
    pub ttl: Option<String>,
}

pub(super) fn key_names(schema: Option<&Yaml>) -> Vec<String> {
    let mut keys: Vec<(String, bool)> = schema
        .and_then(Yaml::as_sequence)
        .map(|s| {
            s.iter()
                .filter_map(|k| {
                    let name = k.get("AttributeName")?.as_str()?.to_string();
                    Some((name, k.get("KeyType").and_then(Yaml::as_str) == Some("HASH")))
                })
                .collect()
        })
        .unwrap_or_default();
    keys.sort_by_key(|(_, hash)| !*hash);
    keys.into_iter().map(|(n, _)| n).collect()
}

/// Every `AWS::DynamoDB::Table` of `template.yaml` with its keys and indexes.
pub fn table_schemas() -> Vec<TableSchema> {
    let t = crate::emulator::template();
    let mut out = Vec::new();
    for (id, r) in t.get("Resources").and_then(Yaml::as_mapping).into_iter().flatten() {
        if r.get("Type").and_then(Yaml::as_str) != Some("AWS::DynamoDB::Table") {
            continue;
        }
        let props = r.get("Properties");
        let indexes = props
            .and_then(|p| p.get("GlobalSecondaryIndexes"))
            .and_then(Yaml::as_sequence)
            .map(|s| {
                s.iter()
                    .map(|g| {
                        let proj = g.get("Projection");
                        let projection = match proj.and_then(|p| p.get("ProjectionType")).and_then(Yaml::as_str) {
                            Some("KEYS_ONLY") => Projection::KeysOnly,
                            Some("INCLUDE") => Projection::Include(
                                proj.and_then(|p| p.get("NonKeyAttributes"))
                                    .and_then(Yaml::as_sequence)
                                    .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                                    .unwrap_or_default(),
                            ),
                            _ => Projection::All,
                        };
                        IndexSchema {
                            name: g.get("IndexName").and_then(Yaml::as_str).unwrap_or_default().to_string(),
                            key: key_names(g.get("KeySchema")),
                            projection,
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(TableSchema {
            logical_id: id.as_str().unwrap_or_default().to_string(),
            key: key_names(props.and_then(|p| p.get("KeySchema"))),
            indexes,
            ttl: props
                .and_then(|p| p.get("TimeToLiveSpecification"))
                .filter(|s| s.get("Enabled").and_then(Yaml::as_bool) == Some(true))
                .and_then(|s| s.get("AttributeName"))
                .and_then(Yaml::as_str)
                .map(str::to_string),
        });
    }
    out
}

/// The template's logical id of a resource named `<prefix>-<LogicalId>`
/// (queue URLs: the last path segment), or the name itself.
pub fn logical_id(name_or_url: &str) -> String {
    let name = name_or_url.rsplit('/').next().unwrap_or(name_or_url);
    name.rsplit('-').next().unwrap_or(name).to_string()
}

// --------------------------------------------------------------- functions

/// Memory and architecture of one function of the template.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionConfig {
    /// MemorySize in MB (the function's, else the Globals').
    pub memory_mb: u64,
    /// Architectures (the function's, else the Globals').
    pub architecture: String,
}

/// `AWS::Serverless::Function`s of `template.yaml` by logical id.
pub fn function_configs() -> BTreeMap<String, FunctionConfig> {
    let t = crate::emulator::template();
    let globals = t.get("Globals").and_then(|g| g.get("Function"));
    let mem = |v: Option<&Yaml>| v.and_then(|m| m.as_u64().or_else(|| m.as_str().and_then(|s| s.parse().ok())));
    let arch = |v: Option<&Yaml>| {
        v.and_then(Yaml::as_sequence).and_then(|s| s.first()).and_then(Yaml::as_str).map(str::to_string)
    };
    let default_mem = mem(globals.and_then(|g| g.get("MemorySize"))).unwrap_or(128);
    let default_arch = arch(globals.and_then(|g| g.get("Architectures"))).unwrap_or_else(|| "x86_64".into());
    let mut out = BTreeMap::new();
    for (id, r) in t.get("Resources").and_then(Yaml::as_mapping).into_iter().flatten() {
        if r.get("Type").and_then(Yaml::as_str) != Some("AWS::Serverless::Function") {
            continue;
        }
        let p = r.get("Properties");
        out.insert(
            id.as_str().unwrap_or_default().to_string(),
            FunctionConfig {
                memory_mb: mem(p.and_then(|p| p.get("MemorySize"))).unwrap_or(default_mem),
                architecture: arch(p.and_then(|p| p.get("Architectures"))).unwrap_or_else(|| default_arch.clone()),
            },
        );
    }
    out
}

// ------------------------------------------------------------------ prices

/// `infra/prices.json`: USD per billed unit by item.
#[derive(Debug, Clone)]
pub struct Prices {
    /// The table's date.
    pub as_of: String,
    /// Its region.
    pub region: String,
    /// Its basis (tiers, free tiers).
    pub basis: String,
    /// USD per unit by item key (e.g. `sqs_standard_request`).
    pub usd_per_unit: BTreeMap<String, f64>,
}

impl Prices {
    /// Reads `infra/prices.json` of the repository.
    pub fn load() -> anyhow::Result<Prices> {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra/prices.json");
        let v: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
        let items = v["items"].as_object().ok_or_else(|| anyhow::anyhow!("{} has no items", path.display()))?;
        let usd_per_unit = items
            .iter()
            .map(|(k, i)| {
                let p = i["usd_per_unit"]
                    .as_f64()
                    .or_else(|| i["usd_per_million"].as_f64().map(|m| m / 1e6))
                    .ok_or_else(|| anyhow::anyhow!("price item {k} has no usd_per_unit"))?;
                Ok((k.clone(), p))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Prices {
            as_of: v["as_of"].as_str().unwrap_or("?").to_string(),
            region: v["region"].as_str().unwrap_or("?").to_string(),
            basis: v["basis"].as_str().unwrap_or("").to_string(),
            usd_per_unit,
        })
    }

    /// USD per unit of `item`; panics if the table lacks it.
    pub fn unit(&self, item: &str) -> f64 {
        *self.usd_per_unit.get(item).unwrap_or_else(|| panic!("infra/prices.json has no item {item}"))
    }
}

// ------------------------------------------------------------------ counts

/// Requests of one kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReqCount {
    /// Requests that got a response (each attempt counts).
    pub requests: u64,
    /// Of which answered with an error status.
    pub errors: u64,
    /// Request plus response body bytes.
    pub bytes: u64,
    /// Requests as SQS bills them (one per started 64 KB).
    pub billed: u64,
}

/// DynamoDB units.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Units {
    /// Requests.
    pub requests: u64,
    /// Write request units.
    pub wru: f64,
    /// Read request units.
    pub rru: f64,
    /// Conditional writes whose condition failed (they still consume WRU).
    pub condition_failed: u64,
    /// Bytes the units were computed from (item sizes as billed).
    pub bytes: u64,
}

/// Everything the meter counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeterCounts {
    /// By (service, operation, resource logical id).
    pub requests: BTreeMap<(String, String, String), ReqCount>,
    /// DynamoDB units by (table logical id, or `Table[index]` for index
    /// writes, operation).
    pub dynamodb: BTreeMap<(String, String), Units>,
    /// Operations whose units this meter does not compute (none in the code
    /// today; listed so that a new one cannot go unnoticed).
    pub unmetered: BTreeMap<String, u64>,
    /// Attempts that got no response (connection failures; not billed).
    pub no_response: u64,
    /// DynamoDB `Scan` requests (answered or not) by (table logical id,
    /// issuing function: [`scan_origin`]).
    pub scans: BTreeMap<(String, String), u64>,
}

impl MeterCounts {
    /// `self - earlier`, for counts taken after setup.
    pub fn since(&self, earlier: &MeterCounts) -> MeterCounts {
        let mut out = self.clone();
        for (k, e) in &earlier.requests {
            if let Some(r) = out.requests.get_mut(k) {
                r.requests -= e.requests;
                r.errors -= e.errors;
                r.bytes -= e.bytes;
                r.billed -= e.billed;
            }
        }
        out.requests.retain(|_, r| r.requests > 0);
        for (k, e) in &earlier.dynamodb {
            if let Some(u) = out.dynamodb.get_mut(k) {
                u.requests -= e.requests;
                u.wru -= e.wru;
                u.rru -= e.rru;
                u.condition_failed -= e.condition_failed;
                u.bytes -= e.bytes;
            }
        }
        out.dynamodb.retain(|_, u| u.requests > 0 || u.wru > 0.0 || u.rru > 0.0);
        for (k, e) in &earlier.unmetered {
            if let Some(n) = out.unmetered.get_mut(k) {
                *n -= e;
            }
        }
        out.unmetered.retain(|_, n| *n > 0);
        out.no_response -= earlier.no_response;
        for (k, e) in &earlier.scans {
            if let Some(n) = out.scans.get_mut(k) {
                *n -= e;
            }
        }
        out.scans.retain(|_, n| *n > 0);
        out
    }
}
