//! Networks: proxies are honoured, so enterprise CI behind a proxy works.

use crate::harness::*;

/// An address on loopback where nothing listens: reachable only through the
/// proxy.
const NOWHERE: &str = "http://127.0.0.2:9";

fn through_proxy(no_proxy: Option<&str>) -> (Outcome, fake_baseten::FakeBaseten) {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let mut inv = Invocation::bare()
        .model(example_model())
        .arg("baseten-api-key", API_KEY)
        .arg("deployment-name", "via-proxy")
        .arg("poll-interval-seconds", "0.05")
        .arg("wait-timeout-seconds", "3")
        .arg("app-url", NOWHERE)
        .arg("api-url", NOWHERE)
        .arg("inference-url", format!("{NOWHERE}/{{prefix}}-{{id}}"))
        .arg("s3-endpoint", NOWHERE)
        // The fake serves absolute-form proxy requests like any other.
        .env("HTTP_PROXY", fake.url());
    if let Some(n) = no_proxy {
        inv = inv.env("NO_PROXY", n);
    }
    (inv.run(), fake)
}

#[test]
fn every_request_goes_through_http_proxy() {
    let (run, fake) = through_proxy(None);
    assert_eq!(run.status(), "success", "{run:?}");
    let e = endpoints(&fake);
    for want in [
        "graphql.teams",
        "s3.put_object",
        "rest.get_deployment",
        "inference.predict",
    ] {
        assert!(
            e.iter().any(|x| x == want),
            "{want} went through the proxy: {e:?}"
        );
    }
}

#[test]
fn no_proxy_bypasses_it() {
    let (run, fake) = through_proxy(Some("127.0.0.2"));
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(fake.requests().is_empty(), "nothing reached the proxy");
}
