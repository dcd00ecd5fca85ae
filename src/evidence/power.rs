//! The regression test's behaviour measured over many samples, not
//! asserted from one: the verdict's own decision ([`verdict::judge`])
//! over samples drawn from the fake's latency model
//! (`fake_baseten::traffic`: log-normal, `median_ms · exp(spread · z)`,
//! `z` from the fake's seeded draws), 100 seeds for each distribution,
//! true ratio and sample size. Prints the table kept in BENCHMARKS.md:
//!
//! ```text
//! cargo test --lib evidence::power -- --nocapture
//! ```

use fake_baseten::traffic::{Behaviour, draws};

use super::cases::{self, Case};
use super::sampler::{Sample, Sampled, Side};
use super::verdict::{self, Baseline, Objectives};

const SEEDS: u64 = 100;
const LIMIT: f64 = 1.2;
const RATIOS: [f64; 5] = [1.0, 1.1, 1.2, 1.5, 2.0];
const SIZES: [usize; 2] = [100, 200];
/// The spreads the fake's scenarios and benchmarks use, and a wide one.
const SPREADS: [f64; 3] = [0.1, 0.25, 0.5];
const BASELINE_MEDIAN_MS: f64 = 20.0;

/// Latencies of `n` requests to deployment `id` as the fake draws them.
fn latencies(b: &Behaviour, seed: u64, id: &str, n: usize) -> Vec<f64> {
    (0..n as u64)
        .map(|k| b.median_ms * (b.spread * draws(seed, id, k).0).exp())
        .collect()
}

/// Whether the verdict fails a candidate `ratio` times slower than the
/// baseline, for one seed.
fn fails(case: &[Case], spread: f64, ratio: f64, n: usize, seed: u64) -> bool {
    let base = Behaviour {
        median_ms: BASELINE_MEDIAN_MS,
        spread,
        error_rate: 0.0,
    };
    let cand = Behaviour {
        median_ms: BASELINE_MEDIAN_MS * ratio,
        ..base.clone()
    };
    let sample = |side, ms| Sample {
        side,
        case: 0,
        ms,
        error: None,
        mismatches: Vec::new(),
    };
    let mut samples: Vec<Sample> = latencies(&cand, seed, "candidate", n)
        .into_iter()
        .map(|ms| sample(Side::Candidate, ms))
        .collect();
    samples.extend(
        latencies(&base, seed, "baseline", n)
            .into_iter()
            .map(|ms| sample(Side::Baseline, ms)),
    );
    let objectives = Objectives {
        max_error_rate: 0.0,
        max_latency_p95_ms: None,
        max_latency_regression: Some(LIMIT),
    };
    let sampled = Sampled {
        samples,
        complete: true,
    };
    let plan = verdict::PlannedSample {
        requests: n,
        baseline: &Baseline::Sampled,
        baseline_name: "v1",
        deadline: "the run's budget",
    };
    let j = verdict::judge(case, &sampled, &plan, &objectives);
    !j.reasons.is_empty()
}

#[test]
fn the_regression_test_fails_at_most_its_level_at_the_limit_and_detects_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let case = cases::parse("- {name: c, payload: {}}", false, dir.path()).unwrap();
    let mut table = String::from(
        "| spread | predict-requests | 1.0× | 1.1× | 1.2× (the limit) | 1.5× | 2.0× |\n|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut off = Vec::new();
    for spread in SPREADS {
        for n in SIZES {
            let mut row = format!("| {spread} | {n} |");
            for ratio in RATIOS {
                let failed = (1..=SEEDS)
                    .filter(|&seed| fails(&case, spread, ratio, n, seed))
                    .count();
                let pct = failed as f64 * 100.0 / SEEDS as f64;
                row.push_str(&format!(" {pct:.0} % |"));
                let ok = match ratio {
                    r if r < LIMIT => pct <= 1.0,
                    r if r == LIMIT => pct <= 7.0,
                    r if r >= 2.0 => pct >= 99.0,
                    _ => true,
                };
                if !ok {
                    off.push(format!("spread {spread}, n {n}, ratio {ratio}: {pct} %"));
                }
            }
            table.push_str(&row);
            table.push('\n');
        }
    }
    println!(
        "Runs failed by max-latency-regression {LIMIT} out of {SEEDS} seeds (log-normal latencies, baseline median {BASELINE_MEDIAN_MS} ms; the candidate's median is the true ratio × the baseline's):\n\n{table}"
    );
    assert!(off.is_empty(), "{off:#?}\n{table}");
}
