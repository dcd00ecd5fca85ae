//! The proxy matrix through the binary: an `http://` and an `https://`
//! proxy, each with and without credentials, to an `https` S3 (the
//! proxy's `CONNECT` tunnel, which the fault proxy intercepts with the
//! test CA's certificate, so the requests inside show in its log: TLS in
//! TLS through the `https://` proxy) and to a plain-`http` S3 (absolute-form
//! requests to the proxy); `NO_PROXY` keeping the API off it, and a SOCKS
//! proxy refused. S3 is an endpoint only the proxy can reach, so every S3
//! request shows in the proxy's log, with `Expect: 100-continue` on every
//! body (the one transport sends it; the HTTP library never did; the
//! proxy forwards it, so the fake's S3 records it too), the proxy's
//! credentials to the proxy alone.

use std::path::Path;

use fake_baseten::proxy::{FaultProxy, ProxyEntry};

use crate::harness::*;

const NEW: &str = "teams: [{id: t1, name: ml, default: true}]\ndeployments:\n  default: [[0, BUILDING], [0.2, ACTIVE]]\n";

/// Where S3 is said to be: nothing listens there, only the proxy (which
/// hands every request to the fake) gets through.
const S3_BEHIND_PROXY: &str = "http://127.0.0.2:9";
/// The same over TLS: the test certificate names `localhost`.
const TLS_S3_BEHIND_PROXY: &str = "https://localhost:9";

fn testdata(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/s3/wire/testdata")
        .join(name)
}

/// A truss large enough for a multipart upload (several parts).
fn big_truss() -> tempfile::TempDir {
    let dir = model_dir("model_name: big-model\n");
    let mut weights = vec![0u8; 20 << 20];
    fastrand::Rng::with_seed(31).fill(&mut weights);
    std::fs::write(dir.path().join("weights.bin"), &weights).unwrap();
    dir
}

struct Matrix {
    https: bool,
    credentials: Option<(&'static str, &'static str)>,
    /// S3 is `https` (a tunnel) rather than plain `http` (forwarded).
    tls_s3: bool,
}

fn cert() -> (Vec<Vec<u8>>, Vec<u8>) {
    (
        vec![std::fs::read(testdata("localhost.der")).unwrap()],
        std::fs::read(testdata("localhost-key.pk8.der")).unwrap(),
    )
}

fn proxy_for(fake: &fake_baseten::FakeBaseten, m: &Matrix) -> (FaultProxy, String) {
    let mut builder = FaultProxy::builder(fake.addr()).forward_expect();
    if m.https {
        let (chain, key) = cert();
        builder = builder.tls(chain, key).unwrap();
    }
    if m.tls_s3 {
        let (chain, key) = cert();
        builder = builder.intercept_tunnels(chain, key).unwrap();
    }
    if let Some((user, password)) = m.credentials {
        builder = builder.credentials(user, password);
    }
    let proxy = builder.start_in_background().unwrap();
    let scheme = if m.https { "https" } else { "http" };
    let userinfo = m
        .credentials
        .map(|(u, p)| format!("{u}:{p}@"))
        .unwrap_or_default();
    let url = format!("{scheme}://{userinfo}{}", proxy.addr());
    (proxy, url)
}

fn deploy_through<'a>(
    fake: &'a fake_baseten::FakeBaseten,
    truss: &Path,
    proxy_url: &str,
) -> Invocation<'a> {
    Invocation::new(fake)
        .model(truss)
        .arg("s3-endpoint", S3_BEHIND_PROXY)
        .env("HTTP_PROXY", proxy_url)
        .env("HTTPS_PROXY", proxy_url)
        // The API (the fake on 127.0.0.1) is reached straight.
        .env("NO_PROXY", "127.0.0.1")
        .env("SSL_CERT_FILE", testdata("ca.pem").to_str().unwrap())
}

fn s3_entries(proxy: &FaultProxy) -> Vec<ProxyEntry> {
    proxy.requests().into_iter().filter(|e| !e.sink).collect()
}

fn through_the_matrix(m: Matrix) {
    let fake = fake(NEW);
    let truss = big_truss();
    let (proxy, url) = proxy_for(&fake, &m);
    let s3 = if m.tls_s3 {
        TLS_S3_BEHIND_PROXY
    } else {
        S3_BEHIND_PROXY
    };

    let run = deploy_through(&fake, truss.path(), &url)
        .arg("s3-endpoint", s3)
        .run();

    assert_eq!(run.status(), "success", "{run:?}");
    let all = s3_entries(&proxy);
    let (connects, entries): (Vec<_>, Vec<_>) = all.iter().partition(|e| e.method == "CONNECT");
    let puts: Vec<_> = entries.iter().filter(|e| e.method == "PUT").collect();
    assert!(
        puts.len() >= 2,
        "the parts went through the proxy: {all:#?}"
    );
    let host = s3.split_once("://").unwrap().1;
    for e in &entries {
        // Only S3 came this way: NO_PROXY kept the API off the proxy.
        assert_eq!(e.host.as_deref(), Some(host), "{e:?}");
        assert_eq!(e.tls, m.https, "{e:?}");
        assert_eq!(e.status, Some(e.upstream_status.unwrap_or(0)), "{e:?}");
        if m.tls_s3 {
            // Inside the tunnel: origin-form, no proxy credentials.
            assert!(e.tunnelled && !e.absolute_form, "{e:?}");
            assert!(!e.proxy_authorization, "{e:?}");
        } else {
            assert!(
                !e.tunnelled && e.absolute_form,
                "forwarded in absolute form: {e:?}"
            );
            assert_eq!(e.proxy_authorization, m.credentials.is_some(), "{e:?}");
        }
    }
    if m.tls_s3 {
        assert!(!connects.is_empty(), "{all:#?}");
        for c in &connects {
            assert_eq!(c.host.as_deref(), Some(host), "{c:?}");
            assert_eq!(c.proxy_authorization, m.credentials.is_some(), "{c:?}");
            assert_eq!(c.tls, m.https, "{c:?}");
            assert_eq!(c.status, Some(200), "{c:?}");
        }
    } else {
        assert!(connects.is_empty(), "{all:#?}");
    }
    for put in &puts {
        assert!(put.expect_continue, "every body waits for 100: {put:?}");
    }
    // What the proxy forwarded S3 stored, and S3 saw the same requests.
    assert_eq!(fake.s3().objects().len(), 1);
    let events = fake.s3().events();
    let stored_parts = events
        .iter()
        .filter(|e| e.operation == "s3.upload_part" && e.status == 200)
        .count();
    assert_eq!(stored_parts, puts.len(), "{events:#?}");
    // S3 itself saw `Expect` on every body, past the proxy.
    assert!(
        events
            .iter()
            .filter(|e| e.operation == "s3.upload_part")
            .all(|e| e.expect_continue),
        "{events:#?}"
    );
    assert!(events.iter().all(|e| e.signature_verified), "{events:#?}");
}

#[test]
fn through_an_http_proxy_every_s3_request_takes_the_one_transport() {
    through_the_matrix(Matrix {
        https: false,
        credentials: None,
        tls_s3: false,
    });
}

#[test]
fn through_an_http_proxy_with_credentials_they_reach_the_proxy_alone() {
    through_the_matrix(Matrix {
        https: false,
        credentials: Some(("ci", "s3cr3t")),
        tls_s3: false,
    });
}

#[test]
fn through_an_https_proxy_every_s3_request_takes_the_one_transport() {
    through_the_matrix(Matrix {
        https: true,
        credentials: None,
        tls_s3: false,
    });
}

#[test]
fn through_an_https_proxy_with_credentials_they_reach_the_proxy_alone() {
    through_the_matrix(Matrix {
        https: true,
        credentials: Some(("ci", "s3cr3t")),
        tls_s3: false,
    });
}

#[test]
fn to_an_https_s3_an_http_proxy_tunnels_every_request() {
    through_the_matrix(Matrix {
        https: false,
        credentials: None,
        tls_s3: true,
    });
}

#[test]
fn to_an_https_s3_an_http_proxy_with_credentials_gets_them_on_connect_alone() {
    through_the_matrix(Matrix {
        https: false,
        credentials: Some(("ci", "s3cr3t")),
        tls_s3: true,
    });
}

#[test]
fn to_an_https_s3_an_https_proxy_tunnels_tls_inside_tls() {
    through_the_matrix(Matrix {
        https: true,
        credentials: None,
        tls_s3: true,
    });
}

#[test]
fn to_an_https_s3_an_https_proxy_with_credentials_gets_them_on_connect_alone() {
    through_the_matrix(Matrix {
        https: true,
        credentials: Some(("ci", "s3cr3t")),
        tls_s3: true,
    });
}

/// A proxy that wants other credentials answers 407 to the first S3
/// request: asked once, its status named, nothing created, the password
/// never printed.
#[test]
fn a_forwarding_proxy_refusing_the_credentials_is_asked_once_and_named() {
    let fake = fake(NEW);
    let truss = big_truss();
    let (proxy, _) = proxy_for(
        &fake,
        &Matrix {
            https: true,
            credentials: Some(("ci", "right")),
            tls_s3: false,
        },
    );
    let url = format!("https://ci:wrong-pw@{}", proxy.addr());

    let run = deploy_through(&fake, truss.path(), &url).run();

    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let entries = s3_entries(&proxy);
    assert_eq!(entries.len(), 1, "one attempt: {entries:#?}");
    assert_eq!(entries[0].status, Some(407));
    let output = run.everything();
    assert!(
        output.contains("the proxy refused to forward the request to 127.0.0.2:9: 407"),
        "{output}"
    );
    assert!(!output.contains("wrong-pw"), "{output}");
    assert!(fake.s3().events().is_empty(), "S3 got nothing");
}

/// `NO_PROXY` naming S3's host too: nothing goes through the proxy, and
/// S3 there (nothing listens) cannot be reached.
#[test]
fn no_proxy_naming_s3_bypasses_the_proxy() {
    let fake = fake(NEW);
    let (proxy, url) = proxy_for(
        &fake,
        &Matrix {
            https: true,
            credentials: None,
            tls_s3: false,
        },
    );
    let run = deploy_through(&fake, &example_model(), &url)
        .env("NO_PROXY", "127.0.0.1,127.0.0.2")
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    assert!(s3_entries(&proxy).is_empty(), "{:#?}", proxy.requests());
}

/// A SOCKS proxy cannot carry the S3 requests: refused as the input it is,
/// before any request, with what to change and without its password.
#[test]
fn a_socks_proxy_is_an_input_error_before_any_request() {
    let fake = fake(NEW);
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("ALL_PROXY", "socks5h://ci:hunter2@127.0.0.1:1080")
        .run();
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("ALL_PROXY names a proxy of scheme \"socks5h\"")
            && run
                .stderr
                .contains("set ALL_PROXY to an http:// or https:// proxy URL"),
        "{}",
        run.stderr
    );
    assert!(!run.everything().contains("hunter2"));
    assert!(fake.requests().is_empty(), "{:?}", endpoints(&fake));
}

/// A proxy that redirects the upload elsewhere (a 307 to its sink, inside
/// the tunnel and when forwarding): the redirect is S3's answer, never
/// followed, so the signed request and its body go nowhere else; the run
/// fails naming the status and creates nothing.
#[test]
fn a_proxy_redirecting_the_upload_is_not_followed() {
    for tls_s3 in [false, true] {
        let fake = fake(NEW);
        let (proxy, url) = proxy_for(
            &fake,
            &Matrix {
                https: true,
                credentials: None,
                tls_s3,
            },
        );
        proxy.add_rule(
            fake_baseten::proxy::Rule::new(
                "elsewhere",
                fake_baseten::proxy::Fault::Redirect {
                    status: 307,
                    to: fake_baseten::proxy::RedirectTo::Sink,
                },
            )
            .method("PUT"),
        );
        let s3 = if tls_s3 {
            TLS_S3_BEHIND_PROXY
        } else {
            S3_BEHIND_PROXY
        };

        let run = deploy_through(&fake, &example_model(), &url)
            .arg("s3-endpoint", s3)
            .run();

        assert_eq!(run.status(), "deploy_failed", "{run:?}");
        assert!(proxy.sink_requests().is_empty(), "{:#?}", proxy.requests());
        assert!(fake.s3().objects().is_empty());
        let output = run.everything();
        assert!(output.contains("307"), "{output}");
        assert!(
            !endpoints(&fake).iter().any(|e| e.contains("create")),
            "{:?}",
            endpoints(&fake)
        );
    }
}

/// `NO_PROXY=*` means every host, IP addresses too (curl): the API and
/// S3, both on `127.0.0.1` (the API key in plain HTTP), go straight, and
/// the recording proxy named by both proxy variables sees nothing.
#[test]
fn no_proxy_star_keeps_hosts_given_as_addresses_off_the_proxy() {
    let fake = fake(NEW);
    let (proxy, url) = proxy_for(
        &fake,
        &Matrix {
            https: false,
            credentials: None,
            tls_s3: false,
        },
    );
    let run = Invocation::new(&fake)
        .model(example_model())
        .env("HTTP_PROXY", &url)
        .env("HTTPS_PROXY", &url)
        .env("NO_PROXY", "*")
        .run();
    assert_eq!(run.status(), "success", "{run:?}");
    assert!(
        fake.requests().iter().any(|r| r.path.contains("graphql")),
        "the API was reached: {:#?}",
        fake.requests()
    );
    assert!(proxy.requests().is_empty(), "{:#?}", proxy.requests());
}
