//! The numbers behind a verdict: exact percentiles of a sample, the
//! one-sided Mann–Whitney U test (is the candidate slower than the
//! baseline scaled by a factor?), and the smallest slowdown a sample of a
//! given size and spread can detect. Pure functions over plain slices.

/// The `q`-th percentile (0..=100) of `xs`, by linear interpolation
/// between the closest ranks (numpy's default): exact, no sketch. An
/// infinite value (a failed request) is larger than every answer: a
/// percentile that reaches it is infinite. `None` for an empty sample.
pub(crate) fn percentile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = (q / 100.0).clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    if frac == 0.0 || v[lo] == v[hi] {
        // Exactly on a rank: no interpolation (∞ − ∞ would be NaN).
        return Some(v[lo]);
    }
    Some(v[lo] + (v[hi] - v[lo]) * frac)
}

/// How the p-value was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Method {
    /// The exact distribution of U (small samples without ties).
    Exact,
    /// The normal approximation with tie and continuity corrections.
    Asymptotic,
}

/// The result of a one-sided Mann–Whitney U test.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub(crate) struct MannWhitney {
    /// U of the candidate: how many (candidate, baseline) pairs have the
    /// candidate slower, ties counting one half.
    pub(crate) u: f64,
    /// The probability of a U at least this large if both came from one
    /// distribution.
    pub(crate) p: f64,
    pub(crate) method: Method,
}

/// Samples whose sizes multiply to at most this get the exact p-value when
/// they have no ties: the exact distribution costs about (n1·n2)² steps,
/// and past it the normal approximation is within a few thousandths.
pub(crate) const EXACT_MAX_PAIRS: usize = 1600;

/// Tests whether `candidate` tends to be larger than `baseline` (scipy's
/// `mannwhitneyu(candidate, baseline, alternative="greater")`, method
/// "exact" for small samples without ties, else "asymptotic" with the
/// continuity correction). Ties get midranks and the variance correction
/// for ties. `None` when either sample is empty or holds a NaN.
pub(crate) fn mann_whitney_greater(candidate: &[f64], baseline: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (candidate.len(), baseline.len());
    if n1 == 0 || n2 == 0 || candidate.iter().chain(baseline).any(|x| x.is_nan()) {
        return None;
    }
    let mut all: Vec<(f64, bool)> = candidate
        .iter()
        .map(|&x| (x, true))
        .chain(baseline.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = all.len();
    let mut rank_sum = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        // Ranks are 1-based; a run of ties shares the mean of its ranks.
        let midrank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        rank_sum += midrank * all[i..=j].iter().filter(|(_, c)| *c).count() as f64;
        i = j + 1;
    }
    let n1f = n1 as f64;
    let u = rank_sum - n1f * (n1f + 1.0) / 2.0;
    if tie_term == 0.0 && n1 * n2 <= EXACT_MAX_PAIRS {
        return Some(MannWhitney {
            u,
            p: exact_sf(n1, n2, u),
            method: Method::Exact,
        });
    }
    Some(MannWhitney {
        u,
        p: asymptotic_sf(n1, n2, u, tie_term),
        method: Method::Asymptotic,
    })
}

/// P(U ≥ u) by the normal approximation, with the tie correction
/// (`tie_term` is Σ t³ − t over runs of t tied values) and the continuity
/// correction.
fn asymptotic_sf(n1: usize, n2: usize, u: f64, tie_term: f64) -> f64 {
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let nf = n1f + n2f;
    let mean = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)).max(1.0));
    let p = if var <= 0.0 {
        // Every value the same: no evidence either way.
        1.0
    } else {
        let z = (u - mean - 0.5) / var.sqrt();
        normal_sf(z)
    };
    p.clamp(0.0, 1.0)
}

/// The shifted test the regression objective names: is the candidate
/// slower than `factor` × the baseline? The Mann–Whitney U of the
/// candidate against the baseline multiplied by `factor`. A candidate
/// exactly `factor` times slower is rejected in at most α of samples.
pub(crate) fn slower_than_scaled(
    candidate: &[f64],
    baseline: &[f64],
    factor: f64,
) -> Option<MannWhitney> {
    let scaled: Vec<f64> = baseline.iter().map(|b| b * factor).collect();
    mann_whitney_greater(candidate, &scaled)
}

/// P(U ≥ u) under the null hypothesis, from the exact distribution of U
/// for samples of `n1` and `n2` without ties: the number of arrangements
/// giving each U, by the recurrence c(m, n, u) = c(m−1, n, u−n) +
/// c(m, n−1, u), over C(n1+n2, n1). Counts are kept as f64 (only added,
/// so their relative precision holds).
fn exact_sf(n1: usize, n2: usize, u: f64) -> f64 {
    let max_u = n1 * n2;
    // row[n][k]: arrangements of m candidates and n baselines with U = k,
    // for the current m; m = 0 has U = 0 only.
    let mut row: Vec<Vec<f64>> = (0..=n2).map(|_| vec![1.0]).collect();
    for m in 1..=n1 {
        let mut next: Vec<Vec<f64>> = Vec::with_capacity(n2 + 1);
        next.push(vec![1.0]);
        for n in 1..=n2 {
            let mut c = vec![0.0; m * n + 1];
            // The largest value is a baseline's: U as for (m, n−1).
            for (k, v) in next[n - 1].iter().enumerate() {
                c[k] += v;
            }
            // The largest is a candidate's: it beats all n baselines.
            for (k, v) in row[n].iter().enumerate() {
                c[k + n] += v;
            }
            next.push(c);
        }
        row = next;
    }
    let dist = &row[n2];
    debug_assert_eq!(dist.len(), max_u + 1);
    let total: f64 = dist.iter().sum();
    // U is a whole number without ties; round away float noise.
    let from = (u.round().max(0.0) as usize).min(max_u + 1);
    let tail: f64 = dist[from..].iter().sum();
    (tail / total).clamp(0.0, 1.0)
}

/// P(Z > z) for a standard normal Z.
pub(crate) fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The z with P(Z > z) = `p`, by bisection on [`normal_sf`] (precise to
/// 1e-9, far finer than a sample-size estimate needs).
pub(crate) fn normal_isf(p: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0_f64, 40.0_f64);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if normal_sf(mid) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// The power the smallest detectable slowdown is stated at.
pub(crate) const DETECT_POWER: f64 = 0.8;

/// The smallest slowdown (candidate over baseline, as a factor) that the
/// shifted test at level `alpha` detects with [`DETECT_POWER`], for
/// samples of `n1` and `n2` whose latencies' logarithms have standard
/// deviation `log_sd` (latencies are close to log-normal, so a slowdown is
/// a shift of the logarithm). From the normal approximation of U: under a
/// shift δ, P(candidate > baseline) is Φ(δ / (σ√2)), and U's z-score must
/// reach z_α + z_β. `None` when the samples are too small for any shift to
/// reach that power.
pub(crate) fn detectable_slowdown(
    n1: usize,
    n2: usize,
    log_sd: f64,
    factor: f64,
    alpha: f64,
) -> Option<f64> {
    if n1 == 0 || n2 == 0 || !log_sd.is_finite() {
        return None;
    }
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let z = normal_isf(alpha) + normal_isf(1.0 - DETECT_POWER);
    let theta = 0.5 + z * ((n1f + n2f + 1.0) / (12.0 * n1f * n2f)).sqrt();
    if theta >= 1.0 {
        return None;
    }
    let shift = log_sd * std::f64::consts::SQRT_2 * normal_isf(1.0 - theta);
    Some(factor * shift.exp())
}

/// The standard deviation of the logarithms of positive finite `xs`.
pub(crate) fn log_sd(xs: &[f64]) -> Option<f64> {
    let logs: Vec<f64> = xs
        .iter()
        .filter(|x| x.is_finite() && **x > 0.0)
        .map(|x| x.ln())
        .collect();
    if logs.len() < 2 {
        return None;
    }
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (logs.len() - 1) as f64;
    Some(var.sqrt())
}

/// `value` and `limit` with the same number of decimals, starting at
/// `decimals` and adding more until they read differently (when they
/// differ), so "0.5 % is above 0.5 %" cannot be printed.
pub(crate) fn alike(value: f64, limit: f64, decimals: usize) -> (String, String) {
    let show = |x: f64, d: usize| {
        if x.is_infinite() {
            "∞".to_string()
        } else {
            format!("{x:.d$}")
        }
    };
    let mut d = decimals;
    while d < 6 && value != limit && show(value, d) == show(limit, d) {
        d += 1;
    }
    (show(value, d), show(limit, d))
}

/// The complementary error function, by the Chebyshev fit in Numerical
/// Recipes (fractional error below 1.2e-7 everywhere): far finer than a
/// 0.05 significance level needs.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixture made once with an independent implementation (Python 3.11,
    /// `pip install scipy`: numpy and scipy versions in the generated
    /// file), printing the constants of `stats_fixture.rs` as they are:
    ///
    /// ```python
    /// import numpy as np, scipy.stats as st
    /// def mw(x, y, m):
    ///     r = st.mannwhitneyu(x, y, alternative="greater", method=m, use_continuity=True)
    ///     return float(r.statistic), float(r.pvalue)
    /// scaled = [b * 1.2 for b in BASE]          # Python floats: the same products as Rust's
    /// print([(q, np.percentile(A, q)) for q in (50, 95, 99)])
    /// print(mw(A, B, "asymptotic"), mw(B, A, "asymptotic"))
    /// print(mw(CAND, scaled, "exact"), mw(CAND, scaled, "asymptotic"))
    /// print(mw(scaled, CAND, "exact"))
    /// print(mw(CAND + [np.inf] * 3, scaled, "asymptotic"))   # failed requests, tied
    /// print(mw(CAND, BASE, "exact"))
    /// ```
    ///
    /// with `A`, `B`, `CAND` and `BASE` the lists below (`CAND` and the
    /// scaled `BASE` have no ties, so the exact method applies).
    const A: &[f64] = &[
        12.1, 15.3, 9.8, 22.4, 15.3, 18.0, 11.2, 30.5, 14.4, 16.6, 15.3, 19.9,
    ];
    const B: &[f64] = &[10.2, 11.8, 9.8, 13.5, 12.0, 14.4, 10.9, 12.7, 11.1, 15.3];
    const CAND: &[f64] = &[31.7, 24.9, 28.3, 40.2, 26.6, 35.1, 22.8, 29.9, 45.6, 27.4];
    const BASE: &[f64] = &[20.3, 18.7, 25.1, 21.9, 17.2, 23.6, 19.4, 22.2, 24.0];
    include!("stats_fixture.rs");

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    fn agrees(r: MannWhitney, want: (f64, f64), method: Method) {
        assert_eq!(r.method, method, "{r:?}");
        assert!(close(r.u, want.0, 1e-9), "{r:?} vs {want:?}");
        assert!(close(r.p, want.1, 1e-6), "{r:?} vs {want:?}");
    }

    #[test]
    fn percentiles_match_numpy() {
        for (q, want) in PERCENTILES_A {
            let got = percentile(A, *q).unwrap();
            assert!(close(got, *want, 1e-9), "p{q}: {got} vs {want}");
        }
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
    }

    #[test]
    fn a_percentile_reaching_a_failure_is_infinite() {
        let mut xs: Vec<f64> = (1..=19).map(f64::from).collect();
        xs.push(f64::INFINITY);
        assert_eq!(percentile(&xs, 50.0), Some(10.5));
        assert_eq!(percentile(&xs, 100.0), Some(f64::INFINITY));
        assert_eq!(percentile(&xs, 95.0), Some(f64::INFINITY));
        assert!(percentile(&[f64::INFINITY; 3], 50.0).unwrap().is_infinite());
    }

    #[test]
    fn mann_whitney_matches_scipy() {
        agrees(
            mann_whitney_greater(A, B).unwrap(),
            MW_A_B,
            Method::Asymptotic,
        );
        agrees(
            mann_whitney_greater(B, A).unwrap(),
            MW_B_A,
            Method::Asymptotic,
        );
        agrees(
            mann_whitney_greater(CAND, BASE).unwrap(),
            UNSHIFTED_EXACT,
            Method::Exact,
        );
    }

    #[test]
    fn the_shifted_test_matches_scipy_on_the_scaled_baseline() {
        let r = slower_than_scaled(CAND, BASE, 1.2).unwrap();
        agrees(r, SHIFTED_EXACT, Method::Exact);
        let scaled: Vec<f64> = BASE.iter().map(|b| b * 1.2).collect();
        let p = asymptotic_sf(CAND.len(), BASE.len(), r.u, 0.0);
        assert!(
            close(p, SHIFTED_ASYMPTOTIC.1, 1e-6),
            "{p} vs {SHIFTED_ASYMPTOTIC:?}"
        );
        agrees(
            mann_whitney_greater(&scaled, CAND).unwrap(),
            SHIFTED_REVERSED_EXACT,
            Method::Exact,
        );
        let mut failed = CAND.to_vec();
        failed.extend([f64::INFINITY; 3]);
        agrees(
            slower_than_scaled(&failed, BASE, 1.2).unwrap(),
            SHIFTED_WITH_FAILURES,
            Method::Asymptotic,
        );
    }

    #[test]
    fn the_exact_distribution_is_a_distribution() {
        // P(U ≥ 0) = 1; P(U ≥ n1·n2) = 1 / C(n1+n2, n1): one arrangement of 35.
        assert!(close(exact_sf(3, 4, 0.0), 1.0, 1e-12));
        assert!(close(exact_sf(3, 4, 12.0), 1.0 / 35.0, 1e-12));
        // Symmetry: P(U ≥ k) = P(U ≤ n1·n2 − k) = 1 − P(U ≥ n1·n2 − k + 1).
        for k in 0..=20 {
            let lhs = exact_sf(4, 5, k as f64);
            let rhs = 1.0 - exact_sf(4, 5, (20 - k + 1) as f64);
            assert!(close(lhs, rhs, 1e-12), "k={k}: {lhs} vs {rhs}");
        }
    }

    #[test]
    fn identical_samples_give_no_evidence() {
        let r = mann_whitney_greater(&[5.0; 10], &[5.0; 10]).unwrap();
        assert_eq!(r.p, 1.0);
        assert_eq!(r.u, 50.0);
        assert_eq!(mann_whitney_greater(&[], &[1.0]), None);
        assert_eq!(mann_whitney_greater(&[f64::NAN], &[1.0]), None);
    }

    #[test]
    fn the_detectable_slowdown_shrinks_with_the_sample_and_grows_with_the_spread() {
        let d = |n, sd| detectable_slowdown(n, n, sd, 1.2, 0.05).unwrap();
        assert!(d(100, 0.2) < d(20, 0.2));
        assert!(d(100, 0.1) < d(100, 0.3));
        assert!(close(d(100, 0.0), 1.2, 1e-12));
        // n = 100 a side, σ = 0.25: Φ(δ/(σ√2)) = 0.5 + 2.486·√(201/120000) ≈ 0.6017,
        // δ ≈ 0.0910, so 1.2·e^δ ≈ 1.314.
        assert!(close(d(100, 0.25), 1.314, 0.002), "{}", d(100, 0.25));
        assert_eq!(detectable_slowdown(1, 1, 0.2, 1.2, 0.05), None);
        assert!(close(normal_isf(0.05), 1.644_853_6, 1e-6));
        assert!(close(
            log_sd(&[1.0, std::f64::consts::E]).unwrap(),
            0.5_f64.sqrt(),
            1e-12
        ));
    }

    #[test]
    fn values_and_limits_are_rounded_alike() {
        assert_eq!(alike(0.5004, 0.5, 1), ("0.5004".into(), "0.5000".into()));
        assert_eq!(alike(2.0, 1.2, 1), ("2.0".into(), "1.2".into()));
        assert_eq!(alike(1.0, 1.0, 1), ("1.0".into(), "1.0".into()));
        assert_eq!(alike(f64::INFINITY, 100.0, 1).0, "∞");
    }

    #[test]
    fn erfc_is_accurate() {
        // Known values: erfc(0) = 1, erfc(1) = 0.157299207..., erfc(-1) = 1.842700792...
        assert!(close(erfc(0.0), 1.0, 1e-7));
        assert!(close(erfc(1.0), 0.157_299_207_050_285, 1e-7));
        assert!(close(erfc(-1.0), 1.842_700_792_949_715, 1e-7));
    }
}
