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
    // The upload took the one S3 transport through the proxy too: its body
    // waited for S3's `100` (the HTTP library never sent `Expect`).
    let events = fake.s3().events();
    let puts: Vec<_> = events
        .iter()
        .filter(|e| e.operation == "s3.put_object")
        .collect();
    assert!(!puts.is_empty(), "{events:#?}");
    assert!(puts.iter().all(|e| e.expect_continue), "{events:#?}");
}

#[test]
fn no_proxy_bypasses_it() {
    let (run, fake) = through_proxy(Some("127.0.0.2"));
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(fake.requests().is_empty(), "nothing reached the proxy");
}

/// The proxy variables are read by curl's names, lower case too, from the
/// environment the run was given: every client and the S3 data requests
/// follow the same route.
#[test]
fn a_lower_case_proxy_variable_is_honoured_by_every_client() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let run = Invocation::bare()
        .model(example_model())
        .arg("baseten-api-key", API_KEY)
        .arg("deployment-name", "via-proxy")
        .arg("poll-interval-seconds", "0.05")
        .arg("wait-timeout-seconds", "3")
        .arg("app-url", NOWHERE)
        .arg("api-url", NOWHERE)
        .arg("inference-url", format!("{NOWHERE}/{{prefix}}-{{id}}"))
        .arg("s3-endpoint", NOWHERE)
        .env("http_proxy", fake.url())
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    let e = endpoints(&fake);
    assert!(e.iter().any(|x| x == "s3.put_object"), "{e:?}");
    assert!(e.iter().any(|x| x == "graphql.teams"), "{e:?}");
}

#[test]
fn a_proxy_variable_that_is_not_a_url_is_an_input_error_before_any_request() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("HTTPS_PROXY", "http://[::1")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("HTTPS_PROXY is not a proxy URL"),
        "{}",
        run.stderr
    );
    assert!(fake.requests().is_empty(), "{:?}", endpoints(&fake));
}

/// A CI runner's `SSL_CERT_FILE` that is a FIFO nobody writes would block
/// the run before its first request: it is refused as the input it is.
#[test]
fn an_ssl_cert_file_that_is_a_fifo_is_an_input_error_not_a_hang() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ca.pem");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("SSL_CERT_FILE", fifo.to_str().unwrap())
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("SSL_CERT_FILE") && run.stderr.contains("FIFO"),
        "{}",
        run.stderr
    );
    assert!(fake.requests().is_empty(), "{:?}", endpoints(&fake));
}

/// The network is built once per run: several targets read the CA files
/// once and the run warns once about a certificate it skipped.
#[test]
fn several_targets_share_one_network_and_one_warning_about_a_skipped_ca() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let good = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/certs/test-ca.pem"),
    )
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    let bundle = root.path().join("corporate.pem");
    std::fs::write(
        &bundle,
        format!("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n{good}"),
    )
    .unwrap();
    let (_models, dirs) = model_dirs(&["one", "two"]);
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .env("SSL_CERT_FILE", bundle.to_str().unwrap())
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert_eq!(run.out("targets-count"), "2");
    let said = run.everything();
    assert_eq!(
        said.matches("skipped 1 certificate(s)").count(),
        1,
        "{said}"
    );
}

/// A proxy variable that is not UTF-8 is refused by its name before any
/// request: read as unset, the run would go around the proxy without a
/// word (a dead proxy here, which would fail every request).
#[test]
fn a_proxy_variable_that_is_not_utf8_is_refused_not_bypassed() {
    use std::os::unix::ffi::OsStrExt;
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = truss_push(dir.path());
    cmd.args(["--baseten-api-key", API_KEY])
        .args(["--app-url", &fake.graphql_base()])
        .args(["--api-url", &fake.rest_base()])
        .args(["--s3-endpoint", &fake.s3_endpoint()])
        .args(["--truss-directory", example_model().to_str().unwrap()])
        .env(
            "HTTP_PROXY",
            std::ffi::OsStr::from_bytes(b"http://127.0.0.1:9\xff"),
        );
    let out = cmd.output().expect("the binary runs");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("HTTP_PROXY is not valid UTF-8"), "{stderr}");
    assert!(fake.requests().is_empty(), "{:?}", endpoints(&fake));
}

/// With several targets, a bad network setting fails the step once, before
/// any target: exit 2, one clear message naming the variable (not one per
/// target), the outputs written, and no request sent.
#[test]
fn a_bad_network_setting_with_several_targets_fails_once_before_any_target() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let (_models, dirs) = model_dirs(&["one", "two"]);
    let run = Invocation::new(&fake)
        .arg("truss-directory", target_list(&dirs))
        .env("HTTPS_PROXY", "http://[::1")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let said = run.everything();
    assert_eq!(
        run.stderr.matches("HTTPS_PROXY is not a proxy URL").count(),
        1,
        "one message, not one per target: {said}"
    );
    // The outputs are written, and say it.
    assert!(
        run.out("error-message")
            .contains("HTTPS_PROXY is not a proxy URL"),
        "{run:?}"
    );
    // Before any target: none started, none has a result row.
    assert!(!said.contains("deploying \"one\""), "{said}");
    assert!(!said.contains("deploying \"two\""), "{said}");
    assert!(fake.requests().is_empty(), "{:?}", endpoints(&fake));
}
