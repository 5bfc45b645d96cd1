//! Secrets at rest on AWS, in the emulator under the strict checker: the
//! data key wrapped by the template's KMS key in KeysTable, loaded by each
//! container at cold start (its KeysTable and KMS requests checked against
//! that function's role), subscriptions' items holding no secret in clear,
//! and items from before sealing read and sealed again. (`hookline serve`'s
//! key file and database files: `tests/tests/serve/secrets.rs`.)

use aws_sdk_dynamodb::types::AttributeValue;
use hookline_tests::aws_pipeline::AwsPipeline;
use hookline_tests::pipeline::Pipeline;
use hookline_tests::{Behaviour, Receiver};
use serde_json::json;
use shared::ports::SubscriptionStore as _;

/// The raw `data` attribute of a Subscriptions item.
async fn stored_data(p: &AwsPipeline, id: &str) -> String {
    let out = p
        .backend
        .dynamodb
        .get_item()
        .table_name(&p.backend.names.subscriptions_table)
        .key("id", AttributeValue::S(id.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    match out.item().and_then(|i| i.get("data")) {
        Some(AttributeValue::S(d)) => d.clone(),
        other => panic!("no data attribute: {other:?}"),
    }
}

/// A subscription with an `Authorization` header and a rotated secret: its
/// item holds neither secret nor the header in clear; containers of other
/// functions (each loading the data key at cold start: KeysTable GetItem,
/// KMS Decrypt, checked against their roles) share the one data key and
/// open what the API container sealed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_items_hold_no_secret_and_every_container_shares_the_data_key() {
    let p = AwsPipeline::start("sealed").await;
    let strict = p.strict.clone().expect("a strict pipeline");
    let r = Receiver::start().await;
    let token = format!("Bearer tok-{}", shared::ids::random_token("x"));
    let (id, first) = p
        .subscribe(json!({
            "callback_url": r.url("/sealed", Behaviour::Ok),
            "event_types": ["*"],
            "headers": {"Authorization": token},
        }))
        .await;
    let (st, v) = p.post(&format!("/v1/subscriptions/{id}/rotate-secret"), &json!({})).await;
    assert_eq!(st, 200, "{v}");
    let second = v["secret"].as_str().unwrap().to_string();
    let (_, ev) = p.post("/v1/events", &json!({"type": "sealed.test", "data": 1})).await;
    p.settled_deliveries(ev["event_id"].as_str().unwrap(), 1, 20).await;
    let d = r.deliveries("/sealed").pop().expect("a delivery");
    assert!(d.signed_by(&first) && d.signed_by(&second));
    assert_eq!(d.header("authorization"), token);

    let data = stored_data(&p, &id).await;
    assert!(data.contains(&id), "the item read is the subscription's");
    for secret in [first.as_str(), second.as_str(), token.as_str()] {
        let body = secret.trim_start_matches("whsec_").trim_start_matches("Bearer ");
        assert!(!data.contains(body), "a secret stored in clear: {data}");
    }
    assert!(!data.contains("whsec_") && data.contains(shared::keyring::SEALED_PREFIX), "{data}");

    // The wrapped data key: the KMS key's ARN, a ciphertext, never the key.
    let keys = p
        .backend
        .dynamodb
        .get_item()
        .table_name(&p.backend.names.keys_table)
        .key("id", AttributeValue::S(hookline_aws::keys::DATA_KEY_ITEM.into()))
        .send()
        .await
        .unwrap();
    let item = keys.item().expect("the data key item");
    assert_eq!(item["wrapped_by"], AttributeValue::S(p.backend.names.kms_key_id.clone()));
    assert_eq!(item["key_id"], AttributeValue::S(p.hookline.keyring.current_id().to_string()));

    // Two more containers, as their functions' cold starts load the key.
    let sdk = hookline_tests::emulator::aws_config().await;
    let checked = strict.iam_checked();
    for function in ["DeliveryFunction", "IngestFunction"] {
        let ring = strict.data_key(&sdk, &p.backend.names, function).await;
        assert_eq!(ring.current_id(), p.hookline.keyring.current_id(), "{function}");
        assert_eq!(ring.derive("cursor"), p.hookline.keyring.derive("cursor"), "{function}: the same data key");
        let store = hookline_aws::DynamoSubscriptions::new(
            p.backend.dynamodb.clone(),
            p.backend.names.subscriptions_table.clone(),
            ring,
        );
        let sub = store.get(&shared::ids::SubscriptionId::new(&id)).await.unwrap().unwrap();
        let secrets: Vec<&str> = sub.signing_keys.iter().map(|k| k.secret.expose()).collect();
        assert_eq!(secrets, [second.as_str(), first.as_str()], "{function} opens both secrets");
        assert_eq!(sub.headers["Authorization"], token);
    }
    assert!(strict.iam_checked() >= checked + 4, "GetItem and Decrypt of each container were checked");
}

/// An item written before sealing (its secret in clear) is read as it is,
/// and the reconciler's re-seal step (`reseal_page`: a `Query` of the
/// listing index, never a `Scan`; its position in KeysTable; checked against
/// the reconciler's role) seals it without changing what it holds; once the
/// pass is done, a step seals nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_from_before_sealing_are_read_and_sealed_again() {
    let p = AwsPipeline::start("reseal").await;
    let mut sub = hookline_tests::conformance::subscription("sub_clear", 1);
    sub.headers.insert("Authorization".into(), "Bearer old-clear-token".into());
    let mut attrs = hookline_aws::item::subscription_to_attrs(&sub, &p.hookline.keyring).unwrap();
    attrs.put_s("data", serde_json::to_string(&sub).unwrap());
    p.backend
        .dynamodb
        .put_item()
        .table_name(&p.backend.names.subscriptions_table)
        .set_item(Some(attrs.into_sdk()))
        .send()
        .await
        .unwrap();
    assert!(stored_data(&p, "sub_clear").await.contains("old-clear-token"));
    let store = &p.backend.stores.subscriptions;
    assert_eq!(store.get(&sub.id).await.unwrap().as_ref(), Some(&sub), "a clear item opens");
    let step = || {
        hookline_tests::iam::as_function(
            "ReconcilerFunction",
            hookline_aws::keys::reseal_step(&p.backend.dynamodb, &p.backend.names.keys_table, store.as_ref()),
        )
    };
    assert_eq!(step().await.unwrap(), 1);
    let data = stored_data(&p, "sub_clear").await;
    assert!(!data.contains("old-clear-token") && !data.contains("whsec_"), "{data}");
    assert_eq!(store.get(&sub.id).await.unwrap().as_ref(), Some(&sub), "the same subscription");
    assert_eq!(step().await.unwrap(), 0, "the pass is recorded as done");
}

/// Moving the data key to another KMS key (`KMS_KEY_ID` changed): the next
/// container decrypts with the key the item names and re-wraps under the
/// new one; the data key stays, so everything sealed still opens. A role
/// without grants on the new key is refused by the strict checker (the
/// template must grant it first: docs/aws.md#secrets-at-rest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_to_another_kms_key_rewraps_the_same_data_key() {
    let p = AwsPipeline::start("kms-move").await;
    let sub = hookline_tests::conformance::subscription("sub_moved", 1);
    p.backend.stores.subscriptions.create(&sub).await.unwrap();
    let moto = hookline_tests::lambda_driver::Moto::from_env();
    let created = moto.call("kms", "TrentService.CreateKey", json!({"Description": "another key"})).await;
    let new_key = created["KeyMetadata"]["Arn"].as_str().unwrap().to_string();
    let sdk = hookline_tests::emulator::aws_config().await;
    let names = &p.backend.names;

    // Under the template's roles, no function may use a key it does not grant.
    let other = hookline_tests::strict::Strict::new();
    let open = hookline_aws::keys::open_data_key(
        other.dynamodb_client(&sdk),
        other.kms_client(&sdk),
        &names.keys_table,
        &new_key,
    );
    assert!(hookline_tests::iam::as_function("DeliveryFunction", open).await.is_err());
    assert!(
        other.violations().iter().any(|v| v.contains("kms:Encrypt") && v.contains(&new_key)),
        "{:?}",
        other.violations()
    );

    // Granted (here: outside any role), the move re-wraps.
    let moved = hookline_aws::keys::open_data_key(
        aws_sdk_dynamodb::Client::new(&sdk),
        aws_sdk_kms::Client::new(&sdk),
        &names.keys_table,
        &new_key,
    )
    .await
    .unwrap();
    assert_eq!(moved.current_id(), p.hookline.keyring.current_id());
    assert_eq!(moved.derive("cursor"), p.hookline.keyring.derive("cursor"), "the same data key");
    let item = p
        .backend
        .dynamodb
        .get_item()
        .table_name(&names.keys_table)
        .key("id", AttributeValue::S(hookline_aws::keys::DATA_KEY_ITEM.into()))
        .send()
        .await
        .unwrap();
    assert_eq!(item.item().unwrap()["wrapped_by"], AttributeValue::S(new_key.clone()), "re-wrapped");
    let store = hookline_aws::DynamoSubscriptions::new(
        p.backend.dynamodb.clone(),
        names.subscriptions_table.clone(),
        std::sync::Arc::new(moved),
    );
    assert_eq!(store.get(&sub.id).await.unwrap(), Some(sub), "what was sealed before the move opens");
}
