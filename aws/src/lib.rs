//! The AWS backend: every port on DynamoDB and SQS, laid out as
//! `infra/README.md` specifies, and the Lambda side of every stage
//! ([`lambda`]) that the function binaries wire. Clients are built once per
//! process (Lambda container) from an `SdkConfig`, and nothing here calls
//! the network until a port is used, so cold starts pay for no request.

pub mod audit;
pub mod dynamodb;
pub mod health;
pub mod item;
pub mod keys;
pub mod lambda;
pub mod limits;
pub mod ordering;
pub mod request;
pub mod sdk;
pub mod sqs;
pub mod stream_failures;
pub mod trust;

use std::collections::HashMap;
use std::sync::Arc;

pub use dynamodb::{
    DynamoAcks, DynamoApiKeys, DynamoAttempts, DynamoDeadLetters, DynamoEventTypes, DynamoEvents, DynamoIdempotency,
    DynamoJobs, DynamoSagas, DynamoStats, DynamoSubscriptions,
};
pub use item::{attempt_from_image, event_from_image, saga_from_image};
pub use sqs::SqsQueue;

use shared::context::{Config, Stores};
use shared::queue::Queue;

/// The names of the deployed tables and queues: from the function
/// environment in Lambda ([`AwsNames::from_env`]), or from the resources a
/// test created in the emulator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AwsNames {
    /// `EVENTS_TABLE`.
    pub events_table: String,
    /// `EVENT_OUTCOMES_TABLE`: events' delivery outcomes, one small item
    /// per event that failed (events themselves are written once).
    pub event_outcomes_table: String,
    /// `SUBSCRIPTIONS_TABLE`.
    pub subscriptions_table: String,
    /// `KEYS_TABLE`: the wrapped data key ([`keys`]).
    pub keys_table: String,
    /// `KMS_KEY_ID`: the KMS key (ARN) that wraps the data key ([`keys`]).
    pub kms_key_id: String,
    /// `SAGAS_TABLE`.
    pub sagas_table: String,
    /// `ATTEMPTS_TABLE`.
    pub attempts_table: String,
    /// `DEAD_LETTERS_TABLE`.
    pub dead_letters_table: String,
    /// `HEALTH_TABLE`: subscription health and circuit breakers.
    pub health_table: String,
    /// `ORDER_TABLE`: partition numbers and the lanes of ordered
    /// subscriptions ([`shared::ordering`]).
    pub order_table: String,
    /// `JOBS_TABLE`: bulk jobs ([`shared::bulk`]).
    pub jobs_table: String,
    /// `AUDIT_TABLE`: the audit trail ([`shared::audit`]).
    pub audit_table: String,
    /// `API_KEYS_TABLE`: API keys and principal grants ([`shared::api_key`]).
    pub api_keys_table: String,
    /// `IDEMPOTENCY_TABLE` (optional): idempotency keys' records
    /// ([`shared::idempotency`]); only the API function has it.
    pub idempotency_table: Option<String>,
    /// `STATS_TABLE`: delivery statistics ([`shared::stats`]); the delivery
    /// function adds to it, the API reads it.
    pub stats_table: String,
    /// `EVENT_TYPES_TABLE`: the event types seen at ingest
    /// ([`shared::event_types`]); written by the functions that ingest
    /// producers' events, read by the API.
    pub event_types_table: String,
    /// `ACKS_TABLE`: subscribers' acknowledgements ([`shared::ack`]);
    /// written by the API, read by the API and the saga step.
    pub acks_table: String,
    /// `DELIVERIES_QUEUE_URL`.
    pub deliveries_queue_url: String,
    /// `DELIVERIES_DLQ_URL`: where the saga step sends the job of a
    /// dead-lettered saga ([`Stores::dead_jobs`]).
    pub deliveries_dlq_url: String,
    /// `RETRIES_QUEUE_URL`.
    pub retries_queue_url: String,
    /// `RETRIES_DLQ_URL` (optional): only for the retries queue's dead count.
    pub retries_dlq_url: Option<String>,
    /// `REQUEUE_QUEUE_URL`: requeue and replay requests ([`Stores::requeues`]).
    pub requeue_queue_url: String,
    /// `REQUEUE_DLQ_URL` (optional): only for the requeue queue's dead count.
    pub requeue_dlq_url: Option<String>,
    /// `INGEST_DLQ_URL` (optional): where ingest sends envelopes that fail
    /// validation; only the ingest function needs it.
    pub ingest_dlq_url: Option<String>,
    /// `STREAM_FAILURES_QUEUE_URL` (optional): the stream mappings'
    /// on-failure destination; only the reconciler reads it.
    pub stream_failures_queue_url: Option<String>,
    /// Stream ARN of each table with a stream, by the template's logical id
    /// (`EventsTable`, …). Filled by the test harness; Lambda gets its
    /// streams from event source mappings and leaves this empty.
    pub stream_arns: HashMap<String, String>,
    /// URL of every queue by logical id (`IngestQueue`, `StreamFailuresQueue`,
    /// …). Filled by the test harness; empty from the environment.
    pub queue_urls: HashMap<String, String>,
}

impl AwsNames {
    /// Reads the names from the function environment (see `infra/README.md`).
    pub fn from_env() -> Result<AwsNames, String> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the names through `get` (the environment, or a map in tests).
    /// Tables and the queues of [`Stores`] are required; the others are
    /// optional, as not every function needs them.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<AwsNames, String> {
        let opt = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let mut missing = Vec::new();
        let mut req = |k: &'static str| {
            opt(k).unwrap_or_else(|| {
                missing.push(k);
                String::new()
            })
        };
        let names = AwsNames {
            events_table: req("EVENTS_TABLE"),
            event_outcomes_table: req("EVENT_OUTCOMES_TABLE"),
            subscriptions_table: req("SUBSCRIPTIONS_TABLE"),
            keys_table: req("KEYS_TABLE"),
            kms_key_id: req("KMS_KEY_ID"),
            sagas_table: req("SAGAS_TABLE"),
            attempts_table: req("ATTEMPTS_TABLE"),
            dead_letters_table: req("DEAD_LETTERS_TABLE"),
            health_table: req("HEALTH_TABLE"),
            order_table: req("ORDER_TABLE"),
            jobs_table: req("JOBS_TABLE"),
            audit_table: req("AUDIT_TABLE"),
            api_keys_table: req("API_KEYS_TABLE"),
            idempotency_table: opt("IDEMPOTENCY_TABLE"),
            stats_table: req("STATS_TABLE"),
            event_types_table: req("EVENT_TYPES_TABLE"),
            acks_table: req("ACKS_TABLE"),
            deliveries_queue_url: req("DELIVERIES_QUEUE_URL"),
            retries_queue_url: req("RETRIES_QUEUE_URL"),
            deliveries_dlq_url: req("DELIVERIES_DLQ_URL"),
            requeue_queue_url: req("REQUEUE_QUEUE_URL"),
            retries_dlq_url: opt("RETRIES_DLQ_URL"),
            requeue_dlq_url: opt("REQUEUE_DLQ_URL"),
            ingest_dlq_url: opt("INGEST_DLQ_URL"),
            stream_failures_queue_url: opt("STREAM_FAILURES_QUEUE_URL"),
            stream_arns: HashMap::new(),
            queue_urls: HashMap::new(),
        };
        if missing.is_empty() {
            Ok(names)
        } else {
            Err(format!("missing environment variables: {}", missing.join(", ")))
        }
    }
}

pub use crate::sdk::sdk_config_loader;

/// Everything a Lambda function needs from AWS: the ports as [`Stores`],
/// the typed queues the ports do not cover, and the clients.
#[derive(Clone)]
pub struct AwsBackend {
    /// The ports, for the stages.
    pub stores: Stores,
    /// The delivery queue (also in `stores`).
    pub deliveries: SqsQueue,
    /// The retry-timer queue (also in `stores`).
    pub retries: SqsQueue,
    /// DeliveriesDLQ: the job of every dead-lettered saga (also in `stores`
    /// as `dead_jobs`).
    pub deliveries_dlq: SqsQueue,
    /// RequeueQueue: requeue and replay requests (also in `stores` as `requeues`).
    pub requeues: SqsQueue,
    /// IngestDLQ: ingest sends rejected envelopes here (with `hookline-error`).
    pub ingest_dlq: Option<SqsQueue>,
    /// The DynamoDB client (built once).
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// The SQS client (built once).
    pub sqs: aws_sdk_sqs::Client,
    /// The names it was built from.
    pub names: AwsNames,
    /// How long events, sagas and attempts are kept (DynamoDB TTL).
    pub retention: chrono::Duration,
    /// The deployment's data key (the stores seal secrets with it).
    pub keyring: Arc<shared::keyring::Keyring>,
}

impl AwsBackend {
    /// Builds every adapter on `names` with the retentions of `settings`;
    /// no network call happens here.
    pub fn new(
        sdk: &aws_config::SdkConfig,
        names: AwsNames,
        settings: &Config,
        keyring: Arc<shared::keyring::Keyring>,
    ) -> AwsBackend {
        let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
        let sqs = aws_sdk_sqs::Client::new(sdk);
        let streams = aws_sdk_dynamodbstreams::Client::new(sdk);
        Self::with_clients(dynamodb, sqs, streams, names, settings, keyring)
    }

    /// Builds every adapter on already built clients (shared between
    /// backends in tests).
    pub fn with_clients(
        dynamodb: aws_sdk_dynamodb::Client,
        sqs: aws_sdk_sqs::Client,
        streams: aws_sdk_dynamodbstreams::Client,
        names: AwsNames,
        settings: &Config,
        keyring: Arc<shared::keyring::Keyring>,
    ) -> AwsBackend {
        let retention = settings.retention;
        let queue = |url: &str, dlq: Option<&String>| SqsQueue::new(sqs.clone(), url, dlq.cloned());
        let deliveries = queue(&names.deliveries_queue_url, Some(&names.deliveries_dlq_url));
        let deliveries_dlq = queue(&names.deliveries_dlq_url, None);
        let retries = queue(&names.retries_queue_url, names.retries_dlq_url.as_ref());
        let requeues = queue(&names.requeue_queue_url, names.requeue_dlq_url.as_ref());
        let optional = |url: &Option<String>| url.as_deref().map(|u| SqsQueue::new(sqs.clone(), u, None));
        let order = ordering::DynamoOrder::new(dynamodb.clone(), &names.order_table);
        let stores = Stores {
            events: Arc::new(
                DynamoEvents::new(
                    dynamodb.clone(),
                    &names.events_table,
                    &names.event_outcomes_table,
                    retention,
                    order.clone(),
                )
                .with_listing(settings.event_listing),
            ),
            subscriptions: Arc::new(DynamoSubscriptions::new(
                dynamodb.clone(),
                &names.subscriptions_table,
                keyring.clone(),
            )),
            sagas: Arc::new(DynamoSagas::new(dynamodb.clone(), &names.sagas_table, retention)),
            attempts: Arc::new(DynamoAttempts::new(
                dynamodb.clone(),
                &names.attempts_table,
                &names.sagas_table,
                retention,
            )),
            dead_letters: Arc::new(DynamoDeadLetters::new(
                dynamodb.clone(),
                &names.dead_letters_table,
                settings.dead_letter_retention,
            )),
            deliveries: Queue::new(Arc::new(deliveries.clone())),
            dead_jobs: Queue::new(Arc::new(deliveries_dlq.clone())),
            retries: Queue::new(Arc::new(retries.clone())),
            requeues: Queue::new(Arc::new(requeues.clone())),
            stream_failures: match &names.stream_failures_queue_url {
                Some(url) => Arc::new(stream_failures::DynamoStreamFailures::new(
                    SqsQueue::new(sqs.clone(), url, None),
                    streams,
                    &names.events_table,
                    &names.sagas_table,
                    &names.attempts_table,
                )),
                None => Arc::new(stream_failures::NotConfigured),
            },
            health: Arc::new(health::DynamoHealth::new(dynamodb.clone(), &names.health_table)),
            limits: Arc::new(limits::DynamoLimits::new(dynamodb.clone(), &names.health_table)),
            order: Arc::new(order),
            jobs: Arc::new(DynamoJobs::new(dynamodb.clone(), &names.jobs_table, settings.dead_letter_retention)),
            audit: Arc::new(audit::DynamoAudit::new(dynamodb.clone(), &names.audit_table, settings.audit_retention)),
            keys: Arc::new(DynamoApiKeys::new(dynamodb.clone(), &names.api_keys_table)),
            idempotency: match &names.idempotency_table {
                Some(t) => Arc::new(DynamoIdempotency::new(dynamodb.clone(), t)),
                None => Arc::new(dynamodb::IdempotencyNotConfigured),
            },
            stats: Arc::new(DynamoStats::new(dynamodb.clone(), &names.stats_table, retention)),
            event_types: Arc::new(DynamoEventTypes::new(dynamodb.clone(), &names.event_types_table)),
            acks: Arc::new(DynamoAcks::new(dynamodb.clone(), &names.acks_table)),
        };
        AwsBackend {
            stores,
            deliveries_dlq,
            requeues,
            ingest_dlq: optional(&names.ingest_dlq_url),
            deliveries,
            retries,
            dynamodb,
            sqs,
            names,
            retention,
            keyring,
        }
    }

    /// Builds the backend from the function environment (the names) and
    /// `settings`, with the deployment's data key: one `GetItem` of
    /// KeysTable and one KMS `Decrypt` (at the first start of the
    /// deployment, an `Encrypt` and a conditional `PutItem` instead;
    /// [`keys`]).
    ///
    /// # Errors
    ///
    /// A missing name, or the data key could not be had (named).
    pub async fn from_env(sdk: &aws_config::SdkConfig, settings: &Config) -> Result<AwsBackend, String> {
        let names = AwsNames::from_env()?;
        let keyring = keys::open_data_key(
            aws_sdk_dynamodb::Client::new(sdk),
            aws_sdk_kms::Client::new(sdk),
            &names.keys_table,
            &names.kms_key_id,
        )
        .await
        .map_err(|e| format!("the data key (KEYS_TABLE {}, KMS_KEY_ID {}): {e}", names.keys_table, names.kms_key_id))?;
        Ok(Self::new(sdk, names, settings, Arc::new(keyring)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_lookup_report_every_missing_variable() {
        let err = AwsNames::from_lookup(|k| (k == "EVENTS_TABLE").then(|| "ev".to_string())).unwrap_err();
        assert!(err.contains("SAGAS_TABLE") && err.contains("RETRIES_QUEUE_URL") && !err.contains("EVENTS_TABLE"));
        let all =
            AwsNames::from_lookup(|k| (k == "DELIVERIES_DLQ_URL" || !k.contains("DLQ")).then(|| k.to_lowercase()))
                .unwrap();
        assert_eq!(all.sagas_table, "sagas_table");
        assert_eq!(all.deliveries_dlq_url, "deliveries_dlq_url");
        assert_eq!(all.retries_dlq_url, None);
    }
}
