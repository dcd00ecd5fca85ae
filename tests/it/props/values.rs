//! The values the property tries: hostile bytes of every shape, values each
//! input accepts, and where each is given.

use std::path::Path;

use proptest::prelude::*;
use truss_push::cli::INPUTS;

use crate::harness::API_KEY;

/// Inputs whose value decides where requests go. The fake's address is
/// always given in their plain variable, the lowest precedence, so a
/// generated value that counts as "not given" falls back to the fake and
/// never to the production hosts.
pub(super) const URL_INPUTS: &[&str] = &["app-url", "api-url", "inference-url", "s3-endpoint"];

/// Where a generated value is given. The plain variable is last in
/// precedence, so a value there replaces the run's base value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Spelling {
    /// `--name=value`: a value starting with '-' stays a value.
    FlagJoined,
    /// `--name value`: a value starting with '-' is read as a flag.
    FlagSeparate,
    /// `INPUT_NAME-WITH-HYPHENS`.
    EnvHyphens,
    /// `INPUT_NAME_WITH_UNDERSCORES`.
    EnvUnderscores,
    /// The plain variable.
    EnvPlain,
}

/// Bytes that print readably (escaped, and cut when long) in a shrunk
/// failure report.
#[derive(Clone)]
pub(super) struct Bytes(pub(super) Vec<u8>);

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: String = self
            .0
            .escape_ascii()
            .to_string()
            .chars()
            .take(300)
            .collect();
        write!(f, "b\"{shown}\" ({} bytes)", self.0.len())
    }
}

/// One generated value for one input.
#[derive(Clone, Debug)]
pub(super) struct Given {
    pub(super) input: &'static str,
    pub(super) spelling: Spelling,
    pub(super) value: Bytes,
}

/// Any bytes but NUL, which neither an argument nor a variable can hold.
pub(super) fn raw_bytes(len: std::ops::Range<usize>) -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec(1u8..=255, len).boxed()
}

pub(super) fn texts(list: &'static [&'static str]) -> BoxedStrategy<Vec<u8>> {
    prop::sample::select(list)
        .prop_map(|s| s.as_bytes().to_vec())
        .boxed()
}

pub(super) fn control_chars() -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec(prop_oneof![1u8..=0x1f, Just(0x7f)], 1..8).boxed()
}

pub(super) fn numbers() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        texts(&[
            "0",
            "-0",
            "+0",
            "0.0",
            "-0.0",
            "1",
            "-1",
            "10",
            "45",
            "1440",
            "1441",
            "3600",
            "0.05",
            "0.049",
            "600",
            "600.0001",
            "86400",
            "1e308",
            "-1e308",
            "1e309",
            "1e-300",
            "1e20",
            "1.8e19",
            "NaN",
            "nan",
            "-NaN",
            "inf",
            "-inf",
            "Infinity",
            "0x10",
            "1_000",
            "1,5",
            "٣",
            "１２",
            "45 minutes",
            " 45 ",
            "45\n",
            NINES,
        ]),
        any::<f64>().prop_map(|f| f.to_string().into_bytes()),
        any::<f64>().prop_map(|f| format!("{f:e}").into_bytes()),
        any::<i128>().prop_map(|i| i.to_string().into_bytes()),
        (any::<u64>(), -400i32..400).prop_map(|(m, e)| format!("{m}e{e}").into_bytes()),
    ]
    .boxed()
}

/// Hundreds of nines: far past every integer type and `f64`'s largest finite value.
pub(super) const NINES: &str = concat!(
    "9999999999999999999999999999999999999999999999999999999999999999999999999999999999",
    "9999999999999999999999999999999999999999999999999999999999999999999999999999999999",
    "9999999999999999999999999999999999999999999999999999999999999999999999999999999999",
    "9999999999999999999999999999999999999999999999999999999999999999999999999999999999",
    "9999999999999999999999999999999999999999999999999999999999999999999999"
);

pub(super) fn whitespace() -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec(
        prop::sample::select(&[b' ', b'\t', b'\n', b'\r', 0x0b, 0x0c][..]),
        0..6,
    )
    .boxed()
}

pub(super) fn json() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        texts(&[
            "{",
            "}",
            "{}",
            "[]",
            "[1]",
            "null",
            "true",
            "0",
            "\"\"",
            "\"x\"",
            "{\"a\":",
            "{\"a\":1}",
            "{\"team\":\"ml\"}",
            "{\"a\":1e999}",
            "{\"a\":NaN}",
            "{\"\\ud800\":1}",
            "{\"a\":1,\"a\":2}",
            "{\"\":{}}",
            "{'a':1}",
            "{\"a\":1} trailing",
            "{\"a\":\"\\u0000\"}",
            "{\"prompt\":\"hi\"}",
            "{\"a\":[1,2,{\"b\":null}]}",
        ]),
        (1usize..3000).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes()),
        (1usize..3000)
            .prop_map(|n| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n)).into_bytes()),
        (raw_bytes(0..16), raw_bytes(0..16)).prop_map(|(k, v)| {
            let mut out = b"{\"".to_vec();
            out.extend(k);
            out.extend(b"\":\"");
            out.extend(v);
            out.extend(b"\"}");
            out
        }),
    ]
    .boxed()
}

/// Up to 64 KiB: past every name cap and GitLab's dotenv limit, and still
/// under the kernel's limit on one argument.
pub(super) fn long_strings() -> BoxedStrategy<Vec<u8>> {
    let len = prop_oneof![
        Just(256usize),
        Just(257),
        Just(4096),
        Just(5 * 1024 + 1),
        Just(64 * 1024),
        1usize..=64 * 1024,
    ];
    (len, raw_bytes(1..4))
        .prop_map(|(n, unit)| unit.into_iter().cycle().take(n).collect())
        .boxed()
}

pub(super) fn paths(model: &Path) -> BoxedStrategy<Vec<u8>> {
    let model = model
        .to_str()
        .expect("the example path is UTF-8")
        .to_string();
    let list: Vec<String> = vec![
        "/".into(),
        ".".into(),
        "..".into(),
        "../..".into(),
        "//".into(),
        "~".into(),
        "~/model".into(),
        "/dev/null".into(),
        "/dev/zero".into(),
        "/dev/full".into(),
        "/proc".into(),
        "/etc/passwd".into(),
        "/nonexistent/model".into(),
        "/nonexistent/chain.py".into(),
        "chain.py".into(),
        ".py".into(),
        "C:\\model".into(),
        "file:///model".into(),
        model.clone(),
        format!("{model}/"),
        format!("{model}//."),
        format!("{model}/config.yaml"),
        format!("{model}/model"),
        format!("{model}/model/model.py"),
        format!(" {model} "),
        format!("{model}\n"),
    ];
    prop_oneof![
        prop::sample::select(list).prop_map(String::into_bytes),
        raw_bytes(0..24).prop_map(move |tail| {
            let mut out = format!("{model}/").into_bytes();
            out.extend(tail);
            out
        }),
    ]
    .boxed()
}

/// URLs whose host, if they have one, is loopback: the fake, a closed port,
/// TLS to a plain-HTTP server, and malformed ones.
pub(super) fn urls(fake_url: &str) -> BoxedStrategy<Vec<u8>> {
    let port = fake_url
        .rsplit(':')
        .next()
        .expect("the fake has a port")
        .to_string();
    let list: Vec<String> = vec![
        fake_url.into(),
        format!("{fake_url}/"),
        format!("{fake_url}//"),
        format!("{fake_url}/graphql/"),
        format!("{fake_url}/{{prefix}}-{{id}}"),
        format!("{fake_url}/{{id}}"),
        format!("{fake_url}/{{prefix}}"),
        format!("{fake_url}/{{prefix}}-{{id}}/{{{{"),
        format!("{fake_url}/{{prefix}}{{prefix}}{{id}}{{id}}"),
        format!("HTTP://127.0.0.1:{port}"),
        format!("https://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        format!("http://[::1]:{port}"),
        format!("http://127.1:{port}"),
        format!("http://2130706433:{port}"),
        format!("http://user:pass@127.0.0.1:{port}"),
        format!("http://127.0.0.1:{port}?x=1#frag"),
        format!("127.0.0.1:{port}"),
        "http://127.0.0.1:1".into(),
        "http://127.0.0.1:99999".into(),
        "http://127.0.0.1:0".into(),
        "ftp://127.0.0.1/".into(),
        "file:///etc/passwd".into(),
        "data:text/plain,x".into(),
        "http://".into(),
        "https://".into(),
        "://".into(),
        "{prefix}-{id}".into(),
        "http:/127.0.0.1".into(),
    ];
    let base = fake_url.to_string();
    prop_oneof![
        4 => prop::sample::select(list).prop_map(String::into_bytes),
        1 => (prop::sample::select(&["/", "?", "#", ""][..]), raw_bytes(0..24)).prop_map(
            move |(sep, tail)| {
                let mut out = format!("{base}{sep}").into_bytes();
                out.extend(tail);
                out
            }
        ),
        // Mostly not URLs at all; the loopback guard drops the rare one
        // that names another host.
        1 => (prop::sample::select(&["http://", "https://", ""][..]), raw_bytes(0..16)).prop_map(
            |(scheme, tail)| {
                let mut out = scheme.as_bytes().to_vec();
                out.extend(tail);
                out
            }
        ),
    ]
    .boxed()
}

/// Any value for any input.
pub(super) fn any_value(model: &Path, fake_url: &str) -> BoxedStrategy<Vec<u8>> {
    let one = prop_oneof![
        4 => raw_bytes(0..64),
        1 => control_chars(),
        3 => numbers(),
        1 => whitespace(),
        2 => json(),
        1 => long_strings(),
        2 => paths(model),
        2 => urls(fake_url),
        2 => texts(&["true", "false", "TRUE", "yes", "no", "1", "0", "on", "off", "ture", "dotenv",
            "json", "xml", "production", "staging", "ml", "-", "--", "--help", "--version", "-h",
            "--dry-run", "=", "a=b", "$(touch pwned)", "`id`", "'", "\"", "\\", "%s%n", "é",
            "\u{202e}", "\u{feff}", "🙂", "ci-test", "v1.2.3", "PR-1_abc1234"]),
    ];
    prop_oneof![
        6 => one.clone(),
        1 => (one.clone(), one).prop_map(|(mut a, b)| {
            a.extend(b);
            a
        }),
    ]
    .boxed()
}

/// Values the input accepts, or nearly: mixed with hostile values in the
/// other inputs so that runs get past validation and deploy, predict and
/// clean up with one odd input among sane ones.
pub(super) fn plausible(input: &str, model: &Path, fake_url: &str) -> BoxedStrategy<Vec<u8>> {
    const BOOLS: &[&str] = &["true", "false", "TRUE", "False", "yes", "no", "1", "0"];
    let model = model.to_str().expect("the example path is UTF-8");
    let owned = |list: Vec<String>| {
        prop::sample::select(list)
            .prop_map(String::into_bytes)
            .boxed()
    };
    match input {
        "truss-directory" => owned(vec![
            model.into(),
            format!("{model}/"),
            format!(" {model}\t"),
        ]),
        "baseten-api-key" => owned(vec![
            API_KEY.into(),
            format!(" {API_KEY}\n"),
            "sk-wrong".into(),
        ]),
        "model-name" => texts(&["my-model", "a", "modèle", "Model Name", "x.y_z"]),
        "environment" => texts(&["production", "staging", "prod-2", "dev_1"]),
        "include-git-info"
        | "cleanup"
        | "regional-environment"
        | "stream-logs"
        | "dry-run"
        | "print-config"
        | "promote"
        | "preserve-previous-production-deployment"
        | "preserve-env-instance-type"
        | "publish"
        | "trusted"
        | "json"
        | "github-deployment"
        | "pr-comment"
        | "commit-status"
        | "plan"
        | "fail-fast"
        | "skip-unchanged"
        | "prune-unlabelled"
        | "preflight" => texts(BOOLS),
        "command" => texts(&[
            "deploy", "plan", "teardown", "prune", "Prune", "rollback", "drift",
        ]),
        "pull-request" => texts(&["1", "12", "4294967295", "0"]),
        "retire" => texts(&["delete", "deactivate", "DEACTIVATE"]),
        "keep" => texts(&["1", "5", "1000", "0"]),
        "older-than" => texts(&["1h", "14d", "36H", "2w"]),
        "to-deployment" => texts(&["abc123", "d1", "../x"]),
        "promotion" => texts(&["at-create", "after-predict", "AFTER-PREDICT"]),
        "github-token" => texts(&["ghs_canary0123456789", " ghs_x\n"]),
        "changed-since" => texts(&["HEAD", "HEAD~1", "auto", "origin/main", "no-such-ref"]),
        "max-parallel" => texts(&["1", "2", "16"]),
        "predict-cases" => texts(&["cases.yaml", "missing.yaml", "cases.jsonl", "/etc/passwd"]),
        "predict-requests" => texts(&["1", "3", "1000", "1001"]),
        "predict-concurrency" => texts(&["1", "4", "16", "17"]),
        "predict-warmup" => texts(&["0", "1", "100"]),
        "max-error-rate" => texts(&["0", "0.01", "1", "1.5"]),
        "max-latency-p95-ms" => texts(&["1", "250", "0"]),
        "max-latency-regression" => texts(&["1.2", "2", "0.5"]),
        "analysis-file" => texts(&["analysis.json", "missing/a.json"]),
        "upload-concurrency" => texts(&["1", "16", "32"]),
        "labels" => texts(&["{}", "{\"team\":\"ml\"}", "{\"a\":{\"b\":[1,null]}}"]),
        "predict-payload" => texts(&["{}", "{\"prompt\":\"x\"}", "{\"a\":1e308}"]),
        "deployment-name" => texts(&["v1.2.3", "ci_test-2", "PR-7_abc1234"]),
        "deploy-timeout-minutes" => texts(&["10", "45", "1440", " 60 "]),
        "predict-timeout" => texts(&["1", "5", "30"]),
        "team" => texts(&["ml", "default", "no-such-team"]),
        "poll-interval-seconds" => texts(&["0.05", "0.1", "0.5"]),
        "wait-timeout-seconds" => texts(&["0.1", "1", "30", "86400"]),
        "output-file" => texts(&["o.json", "o.env", "out.txt", "missing/o.env"]),
        "output-format" => texts(&["dotenv", "json", "JSON", " json ", "shell"]),
        _ if URL_INPUTS.contains(&input) => owned(vec![fake_url.into(), format!("{fake_url}/")]),
        other => panic!("no plausible values for input {other}: add some"),
    }
}

/// A value for `output-file` that names no file outside the run's own
/// directory (the tests run as root and must not write over the system),
/// except devices that swallow or refuse writes.
pub(super) fn output_file_value(any: BoxedStrategy<Vec<u8>>) -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        1 => texts(&["/dev/full", "/dev/null", ".", "..", "missing/out.env", "o.json", "o.env",
            "O.JSON", "o.json/", " ", "a\nb"]),
        3 => any.prop_map(|v| v.into_iter().map(|b| if b == b'/' { b'_' } else { b }).collect()),
    ]
    .boxed()
}

/// Whether a URL input's value could send a request anywhere but this
/// machine. The binary parses the trimmed value; a template's placeholders
/// are filled the way an id and a prefix would fill them.
pub(super) fn leaves_loopback(value: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(value) else {
        return false;
    };
    let filled = text
        .trim()
        .replace("{prefix}", "model")
        .replace("{id}", "abc123");
    let Ok(url) = url::Url::parse(&filled) else {
        return false;
    };
    match url.host() {
        None => false,
        Some(url::Host::Ipv4(ip)) => !ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => !ip.is_loopback(),
        Some(url::Host::Domain(d)) => d != "localhost",
    }
}

pub(super) fn spellings() -> BoxedStrategy<Spelling> {
    prop::sample::select(
        &[
            Spelling::FlagJoined,
            Spelling::FlagSeparate,
            Spelling::EnvHyphens,
            Spelling::EnvUnderscores,
            Spelling::EnvPlain,
        ][..],
    )
    .boxed()
}

pub(super) fn given(model: &Path, fake_url: &str) -> BoxedStrategy<Given> {
    let (model, fake_url) = (model.to_path_buf(), fake_url.to_string());
    let names: Vec<&'static str> = INPUTS.iter().map(|s| s.name).collect();
    let any = any_value(&model, &fake_url);
    let urls = urls(&fake_url);
    let output_file = output_file_value(any.clone());
    (prop::sample::select(names), spellings())
        .prop_flat_map(move |(input, spelling)| {
            let hostile = if URL_INPUTS.contains(&input) {
                prop_oneof![3 => urls.clone(), 1 => any.clone()].boxed()
            } else if input == "output-file" {
                output_file.clone()
            } else {
                any.clone()
            };
            let value = prop_oneof![
                3 => hostile,
                2 => plausible(input, &model, &fake_url),
            ];
            // The fake's address sits in a URL input's plain variable.
            let spelling = match spelling {
                Spelling::EnvPlain if URL_INPUTS.contains(&input) => Spelling::EnvUnderscores,
                s => s,
            };
            value.prop_map(move |v| Given {
                input,
                spelling,
                value: Bytes(v),
            })
        })
        .boxed()
}
