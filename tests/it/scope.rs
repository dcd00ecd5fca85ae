//! Each part of a run sees only what it needs: a plan needs no key (and
//! is given no stand-in for one), yet a key given malformed is refused on
//! every road before anything is sent.

use crate::harness::*;

#[test]
fn a_plan_needs_no_key_but_refuses_a_malformed_one() {
    let fake = fake("");
    let plan = |key: Option<&str>| {
        let mut inv = Invocation::bare()
            .arg("plan", "true")
            .model(example_model());
        if let Some(k) = key {
            inv = inv.arg("baseten-api-key", k);
        }
        inv.run()
    };
    let without = plan(None);
    assert_eq!(without.code, 0, "{without:?}");
    assert_eq!(without.out("targets-count"), "1", "{without:?}");
    // A malformed key is refused in every mode, never shown; a control
    // character would otherwise fail only at the first request's header.
    for (key, why, secret_part) in [
        ("sk with spaces", "contains whitespace", "sk with spaces"),
        (
            "sk-\u{7f}-control",
            "contains a control or non-ASCII character",
            "-control",
        ),
    ] {
        let malformed = plan(Some(key));
        assert_eq!(malformed.code, 2, "{malformed:?}");
        assert!(
            malformed
                .out("error-message")
                .contains(&format!("baseten-api-key {why}")),
            "{malformed:?}"
        );
        assert!(!malformed.everything().contains(secret_part), "never shown");
    }
    // A deploy without a key is refused before its first request.
    let deploy = Invocation::bare()
        .arg("api-url", fake.rest_base())
        .arg("app-url", fake.graphql_base())
        .model(example_model())
        .run();
    assert_eq!(deploy.code, 2, "{deploy:?}");
    assert!(
        deploy
            .out("error-message")
            .contains("baseten-api-key is required")
    );
    assert!(fake.requests().is_empty(), "{:?}", endpoints(&fake));
}

/// An S3 that answers every request `403 SignatureDoesNotMatch` with the
/// request echoed back, as AWS does (`CanonicalRequest` holds every signed
/// header, the session token among them), the token in its message too:
/// the tokens it saw, for the test to look for.
fn echoing_s3(region: String) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let tokens = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut head = Vec::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push(line.trim_end().to_string());
            }
            let token = head
                .iter()
                .find_map(|h| {
                    let (k, v) = h.split_once(':')?;
                    k.eq_ignore_ascii_case("x-amz-security-token")
                        .then(|| v.trim().to_string())
                })
                .unwrap_or_default();
            tokens.lock().unwrap().push(token.clone());
            let canonical = head[1..].join("\n").to_ascii_lowercase();
            let body = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match the signature you provided (token {token}).</Message><CanonicalRequest>{}\nx-amz-security-token:{token}</CanonicalRequest><RequestId>R1</RequestId></Error>",
                head.first().cloned().unwrap_or_default() + "\n" + &canonical
            );
            let answer = format!(
                "HTTP/1.1 403 Forbidden\r\ncontent-type: application/xml\r\nx-amz-bucket-region: {region}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let mut conn = conn;
            let _ = conn.write_all(answer.as_bytes());
        }
    });
    (url, seen)
}

/// The platform's temporary S3 credentials are registered secrets from the
/// moment they arrive: an S3 that echoes the session token in its error
/// (its message and its `CanonicalRequest`) shows it nowhere the user
/// looks — stderr, stdout, the outputs, the outputs file or the summary.
#[test]
fn an_s3_error_echoing_the_session_token_is_redacted_everywhere() {
    let fake = fake("deployments:\n  default: [[0, ACTIVE]]\n");
    let (s3, seen) = echoing_s3(fake.region());
    let run = Invocation::new(&fake)
        .model(example_model())
        .arg("s3-endpoint", &s3)
        .outputs_file("outputs.env")
        .run();
    assert_eq!(run.status(), "deploy_failed", "{run:?}");
    let tokens: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|t| !t.is_empty())
        .cloned()
        .collect();
    assert!(!tokens.is_empty(), "S3 saw the session token: {run:?}");
    let everything = run.everything();
    assert!(
        everything.contains("SignatureDoesNotMatch"),
        "the error is reported: {run:?}"
    );
    for token in &tokens {
        // The whole token, and any long piece of it.
        for piece in [
            token.as_str(),
            &token[..token.len().min(40)],
            &token[token.len().saturating_sub(40)..],
        ] {
            assert!(!everything.contains(piece), "{piece} leaked: {run:?}");
        }
    }
    assert!(!everything.contains(API_KEY), "{run:?}");
}
