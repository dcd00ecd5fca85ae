//! Deleting deployments and models, and the audit log of the platform's
//! lifecycle actions: who acted, the history a scenario writes, its order
//! and paging, and another client's promotion placed mid-run.

use fake_baseten::FakeBaseten;
use fake_baseten::scenario::{Actor, Fault, OtherAction, Scenario};
use serde_json::{Value, json};

use crate::common::{Client, http};

const MODEL: &str = "mdl00001";

/// `old` serves production, `stag` staging; `a`, `b` serve nothing, `off`
/// is inactive.
fn scenario(extra: &str) -> Scenario {
    Scenario::from_yaml(&format!(
        r#"
manual_clock: true
api_key: abcd1234.secretpart
models:
  - id: {MODEL}
    name: existing
    environments: [staging]
    deployments:
      - {{id: old00001, name: old, environment: production, created_at: -86400}}
      - {{id: stag0001, name: stag, environment: staging}}
      - {{id: aaaa0001, name: a, labels: {{truss_push_pull_request: "o/r#1"}}}}
      - {{id: bbbb0001, name: b}}
      - {{id: off00001, name: off, status: INACTIVE}}
{extra}
"#
    ))
    .unwrap()
}

async fn delete(c: &Client, path: &str) -> (u16, Value) {
    let r = c
        .http
        .delete(format!("{}{path}", c.base))
        .header("Authorization", c.auth())
        .send()
        .await
        .expect("DELETE");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn ids(c: &Client) -> Vec<String> {
    let (s, v) = c.get(&format!("/v1/models/{MODEL}/deployments")).await;
    assert_eq!(s, 200, "{v}");
    v["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect()
}

async fn audit(c: &Client, q: &str) -> Value {
    let (s, v) = c.get(&format!("/v1/models/{MODEL}/audit_logs{q}")).await;
    assert_eq!(s, 200, "{v}");
    v
}

fn events(v: &Value) -> Vec<(String, String)> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["event_type"].as_str().unwrap().to_string(),
                e["event_data"]["deployment_id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_deleted_deployment_vanishes_and_a_second_delete_is_404() {
    let fake = FakeBaseten::start(scenario("")).await.unwrap();
    let c = Client::new(&fake);
    let path = format!("/v1/models/{MODEL}/deployments/aaaa0001");
    let (s, v) = delete(&c, &path).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v,
        json!({"id": "aaaa0001", "deleted": true, "model_id": MODEL})
    );
    assert!(!ids(&c).await.contains(&"aaaa0001".to_string()));
    assert_eq!(c.get(&path).await.0, 404);
    // The lists' `name` filter (our copy of the spec) is exact.
    let (_, v) = c
        .get(&format!("/v1/models/{MODEL}/deployments?name=b"))
        .await;
    assert_eq!(v["deployments"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["deployments"][0]["id"], "bbbb0001");
    let (_, v) = c.get("/v1/models?name=existing").await;
    assert_eq!(v["models"].as_array().unwrap().len(), 1, "{v}");
    let (_, v) = c.get("/v1/models?name=exist").await;
    assert_eq!(v["models"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(delete(&c, &path).await.0, 404, "already gone");
    assert_eq!(fake.deleted_deployments(), ["aaaa0001"]);
    // Another model's id, or an unknown model: 404 too.
    assert_eq!(
        delete(&c, "/v1/models/nomodel/deployments/bbbb0001")
            .await
            .0,
        404
    );

    // What serves, or is being promoted, is refused and stays.
    let (s, v) = delete(&c, &format!("/v1/models/{MODEL}/deployments/old00001")).await;
    assert_eq!((s, &v["code"]), (400, &json!("VALIDATION_ERROR")), "{v}");
    assert!(v["message"].as_str().unwrap().contains("production"), "{v}");
    let (s, _) = c
        .post(
            &format!("/v1/models/{MODEL}/environments/staging/promote"),
            Some(json!({"deployment_id": "bbbb0001"})),
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = delete(&c, &format!("/v1/models/{MODEL}/deployments/bbbb0001")).await;
    assert_eq!(s, 400, "the candidate of a promotion in flight");
    assert!(ids(&c).await.contains(&"bbbb0001".to_string()));

    // The audit log keeps the delete, naming the deployment as it was.
    let v = audit(&c, "?event_type_groups=DELETED").await;
    assert_eq!(
        events(&v),
        [(
            "MODEL_DEPLOYMENT_DELETED".to_string(),
            "aaaa0001".to_string()
        )]
    );
    assert_eq!(v["items"][0]["event_data"]["deployment_name"], "a");

    // The model delete: a tombstone, then 404 everywhere.
    let (s, v) = delete(&c, &format!("/v1/models/{MODEL}")).await;
    assert_eq!((s, v), (200, json!({"id": MODEL, "deleted": true})));
    assert_eq!(c.get(&format!("/v1/models/{MODEL}")).await.0, 404);
    assert_eq!(delete(&c, &format!("/v1/models/{MODEL}")).await.0, 404);
}

#[tokio::test]
async fn a_refused_delete_keeps_the_deployment_and_a_500_deletes_nothing() {
    let fake = FakeBaseten::start(scenario(
        "refuse_deletes: [{deployment: a}, {deployment: bbbb0001, status: 403}]\n\
         faults: [{endpoint: rest.delete_deployment, status: 500, after: 2, times: 1}]",
    ))
    .await
    .unwrap();
    let c = Client::new(&fake);
    let d = |id: &str| format!("/v1/models/{MODEL}/deployments/{id}");
    let (s, v) = delete(&c, &d("aaaa0001")).await;
    assert_eq!(
        (s, v),
        (
            200,
            json!({"id": "aaaa0001", "deleted": false, "model_id": MODEL})
        ),
        "refused by name: the tombstone says it was not deleted"
    );
    let (s, v) = delete(&c, &d("bbbb0001")).await;
    assert_eq!(s, 403, "{v}");
    assert!(v["message"].is_string(), "the platform's error body: {v}");
    let (s, _) = delete(&c, &d("off00001")).await;
    assert_eq!(s, 500, "the scripted outage");
    let left = ids(&c).await;
    for id in ["aaaa0001", "bbbb0001", "off00001"] {
        assert!(left.contains(&id.to_string()), "{id} stays: {left:?}");
    }
    assert!(fake.deleted_deployments().is_empty());
    assert_eq!(
        delete(&c, &d("off00001")).await.0,
        200,
        "the next try works"
    );
}

#[tokio::test]
async fn activations_deactivations_and_promotions_name_who_acted() {
    let fake = FakeBaseten::start(scenario("")).await.unwrap();
    let c = Client::new(&fake);
    fake.clock().set(1.0);
    let post = |path: String| {
        let c = &c;
        async move { c.post(&path, None).await.0 }
    };
    assert_eq!(
        post(format!("/v1/models/{MODEL}/deployments/off00001/activate")).await,
        200
    );
    // Activating what is active, or deactivating what is inactive, changes
    // nothing and records nothing.
    assert_eq!(
        post(format!("/v1/models/{MODEL}/deployments/aaaa0001/activate")).await,
        200
    );
    fake.clock().set(2.0);
    assert_eq!(
        post(format!(
            "/v1/models/{MODEL}/deployments/bbbb0001/deactivate"
        ))
        .await,
        200
    );
    fake.clock().set(3.0);
    // Someone else promotes `a` to production in the UI.
    fake.act(OtherAction::Promote {
        deployment: "aaaa0001".into(),
        environment: "production".into(),
        steps: None,
        by: Actor {
            source: Some("UI".into()),
            email: Some("ann@example.com".into()),
            api_key_prefix: None,
        },
    });
    let v = audit(&c, "").await;
    assert_eq!(
        events(&v),
        [
            ("MODEL_DEPLOYMENT_PROMOTED".into(), "aaaa0001".into()),
            ("MODEL_DEPLOYMENT_DEACTIVATED".into(), "bbbb0001".into()),
            ("MODEL_DEPLOYMENT_ACTIVATED".into(), "off00001".into()),
        ],
        "newest first"
    );
    let items = v["items"].as_array().unwrap();
    assert_eq!(items[0]["source"], "UI");
    assert_eq!(
        items[0]["actor"],
        json!({"type": "USER", "email": "ann@example.com", "api_key_prefix": null, "api_key_name": null})
    );
    assert_eq!(items[0]["event_data"]["environment_name"], "production");
    for own in &items[1..] {
        assert_eq!(own["source"], "API");
        assert_eq!(
            own["actor"],
            json!({"type": "API_KEY", "email": null, "api_key_prefix": "abcd1234", "api_key_name": null}),
            "our own key, by its prefix"
        );
    }
    let v = audit(&c, "?sources=UI").await;
    assert_eq!(events(&v).len(), 1);
    let v = audit(&c, "?event_type_groups=ACTIVATED_DEACTIVATED").await;
    assert_eq!(events(&v).len(), 2);
}

#[tokio::test]
async fn scripted_history_is_served_by_time_or_out_of_order_and_may_name_deleted_deployments() {
    let history = r#"
  entries:
    - {at: -100, event_type: MODEL_DEPLOYMENT_PROMOTED, model: existing, deployment: old00001, environment: production, by: {api_key_prefix: other999}}
    - {at: -300, event_type: MODEL_DEPLOYMENT_PROMOTED, model: existing, deployment: gone0001, deployment_name: v0, environment: production}
    - {at: -200, event_type: MODEL_DEPLOYMENT_PROMOTED, model: existing, deployment: bbbb0001, environment: production, by: {source: UI}}
    - {at: -50, event_type: MODEL_DEPLOYMENT_AUTOSCALING_SETTINGS_CHANGED, model: existing, deployment: old00001, by: {source: UI}}
    - {at: -40, event_type: MODEL_DEPLOYMENT_INSTANCE_TYPE_CHANGED, model: existing, deployment: old00001, by: {source: UI}}
"#;
    let by_time = FakeBaseten::start(scenario(&format!("audit_log:{history}")))
        .await
        .unwrap();
    let c = Client::new(&by_time);
    let v = audit(&c, "?environment_names=production").await;
    let order: Vec<String> = events(&v).into_iter().map(|(_, d)| d).collect();
    assert_eq!(order, ["old00001", "bbbb0001", "gone0001"], "newest first");
    let items = v["items"].as_array().unwrap();
    assert_eq!(items[0]["actor"]["api_key_prefix"], "other999");
    assert_eq!(items[1]["actor"]["type"], "USER");
    assert_eq!(items[1]["source"], "UI");
    assert_eq!(
        items[2]["event_data"]["deployment_name"], "v0",
        "a deleted deployment, named as the entry was written"
    );
    assert_eq!(
        c.get(&format!("/v1/models/{MODEL}/deployments/gone0001"))
            .await
            .0,
        404
    );
    // Changes the fake has no endpoint for, as history: each in its group.
    let v = audit(
        &c,
        "?event_type_groups=AUTOSCALING_SETTINGS&event_type_groups=INSTANCE_TYPE_CHANGED",
    )
    .await;
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{v}");
    assert_eq!(items[0]["event_data"]["instance_type_name"], "1x2");
    assert_eq!(items[1]["event_data"]["max_replica"], 1);

    let recorded = FakeBaseten::start(scenario(&format!("audit_log:\n  order: recorded{history}")))
        .await
        .unwrap();
    let v = audit(&Client::new(&recorded), "?direction=ASC").await;
    let order: Vec<String> = events(&v).into_iter().map(|(_, d)| d).take(3).collect();
    assert_eq!(
        order,
        ["old00001", "gone0001", "bbbb0001"],
        "as written: their times are out of order"
    );
}

#[tokio::test]
async fn the_cursor_keeps_its_direction_and_pages_to_the_end() {
    let fake = FakeBaseten::start(scenario("")).await.unwrap();
    let c = Client::new(&fake);
    for (t, id) in [(1.0, "off00001"), (2.0, "bbbb0001"), (3.0, "aaaa0001")] {
        fake.clock().set(t);
        let path = format!("/v1/models/{MODEL}/deployments/{id}/deactivate");
        if id == "off00001" {
            c.post(&path.replace("deactivate", "activate"), None).await;
        } else {
            c.post(&path, None).await;
        }
    }
    let mut seen = Vec::new();
    let mut q = "?direction=ASC&limit=2".to_string();
    loop {
        let v = audit(&c, &q).await;
        seen.extend(events(&v).into_iter().map(|(_, d)| d));
        match v["pagination"]["cursor"].as_str() {
            // `direction` is ignored with a cursor: the cursor keeps ASC.
            Some(cursor) => q = format!("?direction=DESC&limit=2&cursor={cursor}"),
            None => {
                assert_eq!(v["pagination"]["has_more"], false);
                break;
            }
        }
    }
    assert_eq!(seen, ["off00001", "bbbb0001", "aaaa0001"]);
    let (s, _) = c
        .get(&format!("/v1/models/{MODEL}/audit_logs?cursor=7"))
        .await;
    assert_eq!(s, 400, "a cursor this API never returned");
}

#[tokio::test]
async fn a_promotion_starts_mid_run_after_n_requests_or_on_cue() {
    // Just before the 3rd request of any kind, someone else's key promotes `a`.
    let fake = FakeBaseten::start(scenario(
        "others:\n  - {on: \"*\", nth: 3, before: true, action: {promote: {deployment: aaaa0001, environment: production, by: {api_key_prefix: zzzz9999}}}}",
    ))
    .await
    .unwrap();
    let c = Client::new(&fake);
    // `a` is ready, so the promotion succeeds at once.
    let current = async || {
        c.get(&format!("/v1/models/{MODEL}/environments/production"))
            .await
            .1["current_deployment"]["id"]
            .clone()
    };
    assert_eq!(current().await, json!("old00001"));
    assert_eq!(current().await, json!("old00001"));
    assert_eq!(current().await, json!("aaaa0001"), "placed before the 3rd");
    let v = audit(&c, "?event_type_groups=PROMOTED").await;
    assert_eq!(v["items"][0]["actor"]["api_key_prefix"], "zzzz9999");

    // On cue, through the admin route.
    let r = http()
        .post(format!("{}/__fake/others", fake.url()))
        .json(&json!({"promote": {"deployment": "bbbb0001", "environment": "staging", "by": {"source": "UI"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (_, e) = c
        .get(&format!("/v1/models/{MODEL}/environments/staging"))
        .await;
    assert_eq!(e["current_deployment"]["id"], "bbbb0001", "{e}");
    let r = http()
        .post(format!("{}/__fake/others", fake.url()))
        .json(&json!({"promote": {"deployment": "x"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "not an action");
}

#[tokio::test]
async fn the_audit_log_answering_500() {
    let fake = FakeBaseten::start(
        scenario("").with_fault(Fault::status("rest.get_audit_logs", 500).times(0)),
    )
    .await
    .unwrap();
    let c = Client::new(&fake);
    let (s, v) = c.get(&format!("/v1/models/{MODEL}/audit_logs")).await;
    assert_eq!(s, 500, "{v}");
}

#[tokio::test]
async fn a_chain_deployment_is_deleted_with_its_chainlets_unless_it_serves() {
    let fake = FakeBaseten::start(
        Scenario::from_yaml(
            "manual_clock: true\nchains: [{name: hello-chain}]\nchainlets: {default: [[0, MODEL_READY]]}",
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let c = Client::new(&fake);
    let (chain, first) = crate::promotion::deploy_chain(&c, &fake, "one").await;
    let (_, second) = crate::promotion::deploy_chain(&c, &fake, "two").await;
    let (_, env) = c
        .get(&format!("/v1/chains/{chain}/environments/production"))
        .await;
    let serving = env["current_deployment"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let other = if serving == first { &second } else { &first };
    let chainlet_deps = fake.deployments().len();
    let (s, v) = delete(&c, &format!("/v1/chains/{chain}/deployments/{serving}")).await;
    assert_eq!(s, 400, "what serves stays: {v}");
    let path = format!("/v1/chains/{chain}/deployments/{other}");
    let (s, v) = delete(&c, &path).await;
    assert_eq!(
        (s, v),
        (
            200,
            json!({"id": other, "deleted": true, "chain_id": chain})
        )
    );
    assert_eq!(c.get(&path).await.0, 404);
    assert_eq!(delete(&c, &path).await.0, 404);
    assert_eq!(
        fake.deployments().len(),
        chainlet_deps - 1,
        "its one chainlet's deployment went with it"
    );
    let (_, list) = c.get(&format!("/v1/chains/{chain}/deployments")).await;
    assert_eq!(list["deployments"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn another_client_deletes_a_deployment_on_cue() {
    let fake = FakeBaseten::start(scenario("")).await.unwrap();
    let c = Client::new(&fake);
    fake.act(OtherAction::Delete {
        deployment: "bbbb0001".into(),
        by: Actor {
            api_key_prefix: Some("other999".into()),
            ..Actor::default()
        },
    });
    assert!(!ids(&c).await.contains(&"bbbb0001".to_string()));
    let v = audit(&c, "?event_type_groups=DELETED").await;
    assert_eq!(v["items"][0]["actor"]["api_key_prefix"], "other999");
}

#[tokio::test]
async fn a_chains_audit_log_holds_its_promotions_only_and_pages_as_a_models() {
    let fake = FakeBaseten::start(
        Scenario::from_yaml(
            r#"
manual_clock: true
models: [{id: mdl00009, name: m}]
chains:
  - id: chain009
    name: hello
    environments: [staging]
    deployments:
      - {id: cprd0009, environment: production, created_at: -86400}
      - {id: cold0009, created_at: -172800}
      - {id: cbld0009, status: BUILDING}
audit_log:
  entries:
    - {at: -86400, event_type: CHAIN_DEPLOYMENT_PROMOTED, model: hello, deployment: cprd0009, environment: production}
    - {at: -80000, event_type: MODEL_DEPLOYMENT_PROMOTED, model: m, deployment: d0, environment: production}
"#,
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let c = Client::new(&fake);
    let (s, v) = c.get("/v1/chains/chain009/deployments").await;
    assert_eq!(s, 200, "{v}");
    let listed: Vec<(String, String, Value)> = v["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["id"].as_str().unwrap().to_string(),
                d["status"].as_str().unwrap().to_string(),
                d["environment"].clone(),
            )
        })
        .collect();
    assert!(listed.contains(&("cprd0009".into(), "ACTIVE".into(), json!("production"))));
    assert!(listed.contains(&("cbld0009".into(), "BUILDING".into(), Value::Null)));
    // Our own promotion of a chain is recorded in the chain's log.
    let (s, v) = c
        .post(
            "/v1/chains/chain009/environments/staging/promote",
            Some(json!({"deployment_id": "cold0009"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, first) = c
        .get("/v1/chains/chain009/audit_logs?limit=1&event_type_groups=PROMOTED")
        .await;
    assert_eq!(s, 200, "{first}");
    let placed = |v: &Value| -> Vec<(String, String)> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                assert_eq!(e["event_data"]["chain_id"], "chain009", "{e}");
                (
                    e["event_type"].as_str().unwrap().to_string(),
                    e["event_data"]["chain_deployment_id"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                )
            })
            .collect()
    };
    assert_eq!(first["pagination"]["has_more"], true, "{first}");
    let cursor = first["pagination"]["cursor"].as_str().unwrap().to_string();
    let (_, second) = c
        .get(&format!(
            "/v1/chains/chain009/audit_logs?limit=1&event_type_groups=PROMOTED&cursor={cursor}"
        ))
        .await;
    assert_eq!(second["pagination"]["has_more"], false, "{second}");
    let mut all = placed(&first);
    all.extend(placed(&second));
    let promoted = "CHAIN_DEPLOYMENT_PROMOTED".to_string();
    assert_eq!(all.len(), 2, "{first} {second}");
    assert_eq!(all[1], (promoted.clone(), "cprd0009".into()));
    assert_eq!(all[0].0, promoted);
    // The model's log holds none of the chain's entries.
    let (_, m) = c.get("/v1/models/mdl00009/audit_logs").await;
    assert_eq!(m["items"].as_array().unwrap().len(), 1, "{m}");
    assert_eq!(m["items"][0]["event_type"], "MODEL_DEPLOYMENT_PROMOTED");
}
