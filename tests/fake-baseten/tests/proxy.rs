//! The fault proxy in front of the fake, seen from a client (reqwest): every
//! fault is observable, forwarding keeps the fake's routing and SigV4
//! working, and a drop after forwarding leaves the mutation applied.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use fake_baseten::FakeBaseten;
use fake_baseten::proxy::{
    DeclaredLength, Fault, FaultProxy, ProxyEntry, RedirectTo, Rule, RuleSet, When,
};
use fake_baseten::scenario::Scenario;
use reqwest::StatusCode;
use serde_json::{Value, json};

#[path = "support/signed_put.rs"]
mod signed_put;
use signed_put::signed_put_headers;

const CREATE: &str = "create_model_from_truss";

fn scenario_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

async fn fake() -> FakeBaseten {
    let sc = Scenario::from_file(scenario_path("instant-active.yaml")).unwrap();
    FakeBaseten::start(sc.with_manual_clock()).await.unwrap()
}

async fn proxy(fake: &FakeBaseten, rules: Vec<Rule>) -> FaultProxy {
    let mut b = FaultProxy::builder(fake.addr());
    for r in rules {
        b = b.rule(r);
    }
    b.start().await.unwrap()
}

/// A hang guard, not a speed check: every test bounds its own waits, so a
/// request still unanswered after a minute is stuck.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn client() -> reqwest::Client {
    // `no_proxy`: the developer's own `HTTP_PROXY` must not catch these.
    reqwest::Client::builder()
        .no_proxy()
        .timeout(HANG_GUARD)
        .build()
        .unwrap()
}

fn auth(fake: &FakeBaseten) -> String {
    format!("Api-Key {}", fake.api_key())
}

async fn gql(base: &str, fake: &FakeBaseten, query: &str) -> reqwest::Result<reqwest::Response> {
    client()
        .post(format!("{base}/graphql/"))
        .header("Authorization", auth(fake))
        .json(&json!({ "query": query }))
        .send()
        .await
}

/// GraphQL straight to the fake, which must succeed: its `data`.
async fn data(fake: &FakeBaseten, query: &str) -> Value {
    let body: Value = gql(&fake.url(), fake, query)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(body.get("errors").is_none(), "{body}");
    body["data"].clone()
}

/// Issues upload credentials and stores a truss under them, directly on
/// the fake: the returned key is ready for a create mutation.
async fn uploaded_key(fake: &FakeBaseten) -> String {
    let creds = data(
        fake,
        "{ model_s3_upload_credentials { s3_bucket s3_key aws_access_key_id aws_secret_access_key aws_session_token } }",
    )
    .await["model_s3_upload_credentials"]
        .clone();
    let r = signed_put(&fake.url(), fake, &creds, b"truss".to_vec()).await;
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    creds["s3_key"].as_str().unwrap().to_string()
}

/// A path-style PUT signed like an S3 client for the host of `endpoint`.
async fn signed_put(
    endpoint: &str,
    fake: &FakeBaseten,
    creds: &Value,
    bytes: Vec<u8>,
) -> reqwest::Response {
    let host = endpoint.trim_start_matches("http://");
    let (path, headers) = signed_put_headers(host, &fake.region(), creds);
    client()
        .put(format!("{endpoint}{path}"))
        .headers(headers)
        .body(bytes)
        .send()
        .await
        .unwrap()
}

fn create_doc(name: &str, key: &str) -> String {
    let config =
        base64::engine::general_purpose::STANDARD.encode(json!({ "model_name": name }).to_string());
    format!(
        r#"mutation {{ {CREATE}(name: "{name}", s3_key: "{key}", config: "{config}", semver_bump: "MINOR", allow_truss_download: true, version_name: "v1") {{ model_version {{ id oracle {{ id name }} }} }} }}"#
    )
}

/// Waits until `done` holds; a condition still false after the hang guard
/// fails the test instead of stalling the suite.
async fn wait_for(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_GUARD;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "still waiting after {HANG_GUARD:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The only entry of the proxy log that is not from the sink.
fn only_entry(proxy: &FaultProxy) -> ProxyEntry {
    let log: Vec<ProxyEntry> = proxy.requests().into_iter().filter(|e| !e.sink).collect();
    assert_eq!(log.len(), 1, "{log:#?}");
    log[0].clone()
}

#[tokio::test]
async fn forwarding_keeps_routing_auth_and_sigv4() {
    let fake = fake().await;
    let proxy = proxy(&fake, vec![]).await;
    let teams: Value = gql(&proxy.graphql_base(), &fake, "{ teams { id name } }")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(teams["data"]["teams"][0]["id"].is_string(), "{teams}");

    // Signed for the proxy's host: the proxy must pass `Host` unchanged.
    let creds = data(
        &fake,
        "{ model_s3_upload_credentials { s3_bucket s3_key aws_access_key_id aws_secret_access_key aws_session_token } }",
    )
    .await["model_s3_upload_credentials"]
        .clone();
    let put = signed_put(&proxy.s3_endpoint(), &fake, &creds, b"tar bytes".to_vec()).await;
    assert_eq!(put.status(), StatusCode::OK);
    let key = creds["s3_key"].as_str().unwrap();
    assert_eq!(fake.s3().object_bytes(key).unwrap(), b"tar bytes");

    let created: Value = gql(&proxy.graphql_base(), &fake, &create_doc("routed", key))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mv = &created["data"][CREATE]["model_version"];
    let (model, dep) = (
        mv["oracle"]["id"].as_str().unwrap(),
        mv["id"].as_str().unwrap(),
    );
    let rest: Value = client()
        .get(format!(
            "{}/v1/models/{model}/deployments/{dep}",
            proxy.rest_base()
        ))
        .header("Authorization", auth(&fake))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rest["status"], "ACTIVE", "{rest}");
    let predict = client()
        .post(format!(
            "{}/deployment/{dep}/predict",
            proxy
                .inference_template()
                .replace("{prefix}", "model")
                .replace("{id}", model)
        ))
        .header("Authorization", auth(&fake))
        .json(&json!({"x": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(predict.status(), StatusCode::OK);

    // Admin routes pass through unlogged; the proxy answers its own.
    let fake_log: Value = client()
        .get(format!("{}/__fake/requests", proxy.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let endpoints: Vec<&str> = fake_log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["endpoint"].as_str().unwrap())
        .collect();
    assert_eq!(
        endpoints,
        [
            "graphql.teams",
            "graphql.model_s3_upload_credentials",
            "s3.put_object",
            "graphql.create_model_from_truss",
            "rest.get_deployment",
            "inference.predict"
        ]
    );
    let log = proxy.requests();
    assert_eq!(log.len(), 5, "{log:#?}");
    assert!(log.iter().all(|e| e.forwarded && e.rule.is_none()));
    assert!(log.iter().all(|e| e.authorization));
    assert_eq!(log[0].graphql, ["teams"]);
    assert_eq!(log[2].graphql, [CREATE]);
    assert_eq!(
        log.iter().map(|e| e.status).collect::<Vec<_>>(),
        [Some(200); 5]
    );
    assert_eq!(
        log[0].host.as_deref(),
        Some(proxy.addr().to_string().as_str())
    );
    let via_admin: Vec<ProxyEntry> = client()
        .get(format!("{}/__proxy/requests", proxy.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(via_admin, log);
    let text = serde_json::to_string(&log).unwrap();
    assert!(!text.contains(fake.api_key()), "the key is never logged");
}

#[tokio::test]
async fn drop_after_forward_leaves_the_deployment_created() {
    let fake = fake().await;
    let key = uploaded_key(&fake).await;
    let proxy = proxy(
        &fake,
        vec![Rule::new("lost-answer", Fault::DropAfterForward).graphql(CREATE)],
    )
    .await;
    let err = gql(&proxy.graphql_base(), &fake, &create_doc("dropped", &key))
        .await
        .expect_err("the client never hears back");
    assert!(format!("{err:?}").contains("IncompleteMessage"), "{err:?}");
    let deployments = fake.deployments();
    assert_eq!(deployments.len(), 1, "the mutation was applied");
    let e = only_entry(&proxy);
    assert_eq!(e.rule.as_deref(), Some("lost-answer"));
    assert_eq!(e.fault.as_deref(), Some("drop_after_forward"));
    assert!(e.forwarded);
    assert_eq!(e.upstream_status, Some(200));
    assert_eq!(e.status, None);
}

#[tokio::test]
async fn reset_before_forward_applies_nothing() {
    let fake = fake().await;
    let key = uploaded_key(&fake).await;
    let requests_before = fake.requests().len();
    let proxy = proxy(
        &fake,
        vec![Rule::new("reset", Fault::ResetBeforeForward).graphql(CREATE)],
    )
    .await;
    let err = gql(&proxy.graphql_base(), &fake, &create_doc("reset", &key))
        .await
        .expect_err("reset");
    assert!(!err.is_timeout(), "{err:?}");
    assert!(format!("{err:?}").contains("ConnectionReset"), "{err:?}");
    assert!(fake.deployments().is_empty());
    assert_eq!(
        fake.requests().len(),
        requests_before,
        "the fake saw nothing"
    );
    let e = only_entry(&proxy);
    assert!(!e.forwarded);
    assert_eq!(e.fault.as_deref(), Some("reset_before_forward"));
}

#[tokio::test]
async fn hang_never_answers_until_the_client_gives_up() {
    let fake = fake().await;
    let proxy = proxy(&fake, vec![Rule::new("hang", Fault::Hang).path("/v1/")]).await;
    let started = Instant::now();
    let err = client()
        .get(format!("{}/v1/models", proxy.rest_base()))
        .header("Authorization", auth(&fake))
        .timeout(Duration::from_millis(400))
        .send()
        .await
        .expect_err("no answer");
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(400));
    // The proxy lets go of the connection once the client has.
    wait_for(|| proxy.open_connections() == 0).await;
    let e = only_entry(&proxy);
    assert_eq!(e.fault.as_deref(), Some("hang"));
    assert!(!e.forwarded);
    assert_eq!(e.status, None);
    // Other requests still pass.
    let ok = gql(&proxy.graphql_base(), &fake, "{ teams { id } }")
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
}

#[tokio::test]
async fn drip_sends_the_answer_slowly_but_whole() {
    let fake = fake().await;
    let proxy = proxy(
        &fake,
        vec![Rule::new(
            "slow",
            Fault::Drip {
                bytes: 32,
                interval_ms: 10,
            },
        )],
    )
    .await;
    let started = Instant::now();
    let r = gql(&proxy.graphql_base(), &fake, "{ teams { id name } }")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let raw = r.bytes().await.unwrap();
    let body: Value = serde_json::from_slice(&raw).unwrap();
    assert!(body["data"]["teams"].is_array(), "{body}");
    // The status line alone is 17 bytes; every 32 bytes after the first
    // write cost a 10 ms pause.
    let pauses = (raw.len() + "HTTP/1.1 200 OK\r\n".len()).div_ceil(32) - 1;
    assert!(pauses >= 2, "{pauses}");
    assert!(
        started.elapsed() >= Duration::from_millis(10 * pauses as u64),
        "{:?} for {pauses} pauses",
        started.elapsed()
    );
    let e = only_entry(&proxy);
    assert!(e.forwarded);
    assert_eq!(e.fault.as_deref(), Some("drip 32B/10ms"));
}

#[tokio::test]
async fn too_many_requests_with_a_huge_retry_after() {
    let fake = fake().await;
    let proxy = proxy(
        &fake,
        vec![
            Rule::new(
                "busy",
                Fault::TooManyRequests {
                    retry_after: "999999".into(),
                },
            )
            .method("POST")
            .nth(1),
        ],
    )
    .await;
    let r = gql(&proxy.graphql_base(), &fake, "{ teams { id } }")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "999999");
    assert!(fake.requests().is_empty(), "not forwarded");
    // Only the first: the second goes through.
    let r = gql(&proxy.graphql_base(), &fake, "{ teams { id } }")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let log = proxy.requests();
    assert_eq!(log[0].status, Some(429));
    assert_eq!(log[1].rule, None);
}

#[tokio::test]
async fn html_error_page_echoes_what_it_is_given() {
    let fake = fake().await;
    let echo = format!("Authorization: Api-Key {}", fake.api_key());
    let proxy = proxy(
        &fake,
        vec![Rule::new(
            "lb",
            Fault::HtmlError {
                status: 502,
                echo: Some(echo.clone()),
            },
        )],
    )
    .await;
    let r = gql(&proxy.graphql_base(), &fake, "{ teams { id } }")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(r.headers()["content-type"], "text/html");
    let page = r.text().await.unwrap();
    assert!(page.starts_with("<html>"), "{page}");
    assert!(page.contains(&echo), "{page}");
    assert!(!only_entry(&proxy).forwarded);
}

#[tokio::test]
async fn truncated_json_with_either_length() {
    let fake = fake().await;
    let proxy = proxy(
        &fake,
        vec![
            Rule::new(
                "cut",
                Fault::TruncatedJson {
                    keep: None,
                    content_length: DeclaredLength::Truncated,
                },
            )
            .nth(1),
            Rule::new(
                "short",
                Fault::TruncatedJson {
                    keep: Some(5),
                    content_length: DeclaredLength::Original,
                },
            )
            .nth(2),
        ],
    )
    .await;
    let whole = gql(&fake.url(), &fake, "{ teams { id name } }")
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();

    let r = gql(&proxy.graphql_base(), &fake, "{ teams { id name } }")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let declared: usize = r.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body = r.bytes().await.unwrap();
    assert_eq!(body.len(), declared);
    assert_eq!(body.as_ref(), &whole[..whole.len() / 2]);
    assert!(serde_json::from_slice::<Value>(&body).is_err());

    let r = gql(&proxy.graphql_base(), &fake, "{ teams { id name } }")
        .await
        .unwrap();
    assert_eq!(r.headers()["content-length"], whole.len().to_string());
    let err = r.bytes().await.expect_err("the body ends short");
    assert!(err.is_body() || err.is_decode(), "{err:?}");

    let faults: Vec<Option<String>> = proxy.requests().into_iter().map(|e| e.fault).collect();
    assert_eq!(
        faults,
        [
            Some("truncated_json".to_string()),
            Some("truncated_json original-length".to_string())
        ]
    );
    assert!(proxy.requests().iter().all(|e| e.forwarded));
}

#[tokio::test]
async fn redirects_to_a_path_to_http_and_to_the_sink() {
    let fake = fake().await;
    let proxy = proxy(
        &fake,
        vec![
            Rule::new(
                "path",
                Fault::Redirect {
                    status: 301,
                    to: RedirectTo::Path("/elsewhere".into()),
                },
            )
            .path("/v1/a"),
            Rule::new(
                "plain",
                Fault::Redirect {
                    status: 308,
                    to: RedirectTo::HttpSameHost,
                },
            )
            .path("/v1/b"),
            Rule::new(
                "away",
                Fault::Redirect {
                    status: 307,
                    to: RedirectTo::Sink,
                },
            )
            .path("/v1/c"),
        ],
    )
    .await;
    let no_follow = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let location = |r: &reqwest::Response| r.headers()["location"].to_str().unwrap().to_string();
    let host = proxy.addr().to_string();
    let r = no_follow
        .get(format!("{}/v1/a?x=1", proxy.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::MOVED_PERMANENTLY);
    assert_eq!(location(&r), format!("http://{host}/elsewhere"));
    let r = no_follow
        .get(format!("{}/v1/b?x=1", proxy.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(location(&r), format!("http://{host}/v1/b?x=1"));

    // Followed by a client that drops credentials on a change of origin:
    // the sink sees the request, without the header.
    let r = client()
        .get(format!("{}/v1/c?x=1", proxy.url()))
        .header("Authorization", auth(&fake))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let sunk = proxy.sink_requests();
    assert_eq!(sunk.len(), 1, "{sunk:#?}");
    assert_eq!(sunk[0].path, "/v1/c");
    assert_eq!(sunk[0].query.as_deref(), Some("x=1"));
    assert!(!sunk[0].authorization);
    // A client that does send it there is recorded as such.
    no_follow
        .get(format!("{}/leak", proxy.sink_url()))
        .header("Authorization", auth(&fake))
        .send()
        .await
        .unwrap();
    assert!(proxy.sink_requests()[1].authorization);
    assert!(fake.requests().is_empty(), "no redirect was forwarded");
}

#[tokio::test]
async fn rules_change_while_running() {
    let fake = fake().await;
    let proxy = proxy(&fake, vec![]).await;
    proxy.add_rule(Rule::new(
        "503",
        Fault::Status {
            status: 503,
            retry_after: Some("1".into()),
            body: None,
            content_type: None,
        },
    ));
    let r = gql(&proxy.graphql_base(), &fake, "{ teams { id } }")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()["retry-after"], "1");
    proxy.clear_rules();
    let r = gql(&proxy.graphql_base(), &fake, "{ teams { id } }")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

/// The soak mode: a fraction of all requests faulted at random, the same
/// ones for the same seed.
#[tokio::test]
async fn chaos_is_repeatable_for_a_seed() {
    let fake = fake().await;
    let statuses = |fault_status: u16| Fault::Status {
        status: fault_status,
        retry_after: None,
        body: None,
        content_type: None,
    };
    let mut runs = Vec::new();
    for _ in 0..2 {
        let proxy = FaultProxy::builder(fake.addr())
            .seed(99)
            .rule(Rule::chaos(
                "soak",
                0.3,
                vec![statuses(500), statuses(503), statuses(429)],
            ))
            .start()
            .await
            .unwrap();
        let mut seen = Vec::new();
        for _ in 0..40 {
            let r = gql(&proxy.graphql_base(), &fake, "{ teams { id } }")
                .await
                .unwrap();
            seen.push(r.status().as_u16());
        }
        assert_eq!(
            proxy.faulted().len(),
            seen.iter().filter(|s| **s != 200).count()
        );
        runs.push(seen);
    }
    assert_eq!(runs[0], runs[1]);
    let faulted = runs[0].iter().filter(|s| **s != 200).count();
    assert!((4..=20).contains(&faulted), "{faulted} of 40");
}

#[test]
fn binary_starts_a_proxy_from_a_rules_file() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let rules = dir.join("rules.yaml");
    let log = dir.join("proxy.jsonl");
    std::fs::write(
        &rules,
        "seed: 1\nrules:\n  - id: busy\n    match: {graphql: teams}\n    when: {nth: 1}\n    fault: {kind: too_many_requests, retry_after: 999999}\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-baseten"))
        .arg("--scenario")
        .arg(scenario_path("instant-active.yaml"))
        .args(["--api-key", "bin-key", "--proxy-rules"])
        .arg(&rules)
        .arg("--proxy-log")
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let bases: Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first:?}"));
    let url = bases["proxy"]["url"].as_str().unwrap().to_string();
    assert_ne!(bases["url"], url);
    assert_eq!(bases["proxy"]["graphql_base"], url);
    assert_eq!(
        bases["proxy"]["inference_template"],
        format!("{url}/{{prefix}}-{{id}}")
    );
    assert!(bases["proxy"]["sink_url"].is_string());

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let statuses: Vec<u16> = rt.block_on(async {
        let mut out = Vec::new();
        for _ in 0..2 {
            let r = client()
                .post(format!("{url}/graphql/"))
                .header("Authorization", "Api-Key bin-key")
                .json(&json!({"query": "{ teams { id } }"}))
                .send()
                .await
                .unwrap();
            out.push(r.status().as_u16());
        }
        out
    });
    assert_eq!(statuses, [429, 200]);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    let lines: Vec<ProxyEntry> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].rule.as_deref(), Some("busy"));
    assert_eq!(lines[1].upstream_status, Some(200));
}

/// How a black-box test of the binary drives it: no async in sight.
#[test]
fn sync_tests_start_both_in_the_background() {
    let sc = Scenario::from_file(scenario_path("instant-active.yaml")).unwrap();
    let fake = FakeBaseten::start_in_background(sc).unwrap();
    let proxy = FaultProxy::builder(fake.addr())
        .rule(Rule::new("gone", Fault::ResetBeforeForward).path("/v1/"))
        .start_in_background()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (teams, rest) = rt.block_on(async {
        (
            gql(&proxy.graphql_base(), &fake, "{ teams { id } }")
                .await
                .map(|r| r.status()),
            client()
                .get(format!("{}/v1/models", proxy.rest_base()))
                .send()
                .await
                .map(|r| r.status()),
        )
    });
    assert_eq!(teams.unwrap(), StatusCode::OK);
    assert!(rest.is_err());
    assert_eq!(proxy.faulted().len(), 1);
}

#[test]
fn rules_parse_and_refuse() {
    let set = RuleSet::from_yaml(
        "rules:\n  - when: {probability: 0.2}\n    faults: [{kind: reset_before_forward}, {kind: hang}]\n",
    )
    .unwrap();
    assert_eq!(set.rules[0].when, When::Probability(0.2));
    assert!(RuleSet::from_yaml("rules: [{fault: {kind: hang}, bogus: 1}]").is_err());
}
