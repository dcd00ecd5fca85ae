//! The numbers behind a verdict: exact percentiles of a sample and the
//! one-sided Mann–Whitney U test (is the candidate slower than the
//! baseline?). Pure functions over plain slices.

/// The `q`-th percentile (0..=100) of `xs`, by linear interpolation
/// between the closest ranks (numpy's default): exact, no sketch. `None`
/// for an empty sample.
pub(crate) fn percentile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = (q / 100.0).clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    Some(v[lo] + (v[hi] - v[lo]) * (pos - lo as f64))
}

/// The result of a one-sided Mann–Whitney U test.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub(crate) struct MannWhitney {
    /// U of the candidate: how many (candidate, baseline) pairs have the
    /// candidate slower, ties counting one half.
    pub(crate) u: f64,
    /// The probability of a U this large if both came from one
    /// distribution (normal approximation, tie and continuity corrected).
    pub(crate) p: f64,
}

/// Tests whether `candidate` tends to be larger than `baseline`. Samples
/// of a few hundred make the normal approximation exact enough; ties
/// (latencies rounded by the clock) get midranks and the variance
/// correction for ties. `None` when either sample is empty.
pub(crate) fn mann_whitney_greater(candidate: &[f64], baseline: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (candidate.len(), baseline.len());
    if n1 == 0 || n2 == 0 {
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
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let u = rank_sum - n1f * (n1f + 1.0) / 2.0;
    let mean = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)).max(1.0));
    let p = if var <= 0.0 {
        // Every value the same: no evidence either way.
        1.0
    } else {
        let z = (u - mean - 0.5) / var.sqrt();
        normal_sf(z)
    };
    Some(MannWhitney {
        u,
        p: p.clamp(0.0, 1.0),
    })
}

/// P(Z > z) for a standard normal Z.
fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
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

    /// Fixture made once with an independent implementation (Python 3,
    /// numpy 2 and scipy 1.x, `pip install scipy`):
    ///
    /// ```python
    /// import numpy as np, scipy.stats as st
    /// a = [12.1, 15.3, 9.8, 22.4, 15.3, 18.0, 11.2, 30.5, 14.4, 16.6, 15.3, 19.9]
    /// b = [10.2, 11.8, 9.8, 13.5, 12.0, 14.4, 10.9, 12.7, 11.1, 15.3]
    /// for q in (50, 95, 99): print(np.percentile(a, q))
    /// r = st.mannwhitneyu(a, b, alternative="greater", method="asymptotic", use_continuity=True)
    /// print(r.statistic, r.pvalue)
    /// r = st.mannwhitneyu(b, a, alternative="greater", method="asymptotic", use_continuity=True)
    /// print(r.statistic, r.pvalue)
    /// ```
    const A: &[f64] = &[
        12.1, 15.3, 9.8, 22.4, 15.3, 18.0, 11.2, 30.5, 14.4, 16.6, 15.3, 19.9,
    ];
    const B: &[f64] = &[10.2, 11.8, 9.8, 13.5, 12.0, 14.4, 10.9, 12.7, 11.1, 15.3];
    include!("stats_fixture.rs");

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
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
    fn mann_whitney_matches_scipy() {
        let r = mann_whitney_greater(A, B).unwrap();
        assert!(close(r.u, MW_A_B.0, 1e-9), "{r:?}");
        assert!(close(r.p, MW_A_B.1, 1e-6), "{r:?} vs {MW_A_B:?}");
        let r = mann_whitney_greater(B, A).unwrap();
        assert!(close(r.u, MW_B_A.0, 1e-9), "{r:?}");
        assert!(close(r.p, MW_B_A.1, 1e-6), "{r:?} vs {MW_B_A:?}");
    }

    #[test]
    fn identical_samples_give_no_evidence() {
        let r = mann_whitney_greater(&[5.0; 10], &[5.0; 10]).unwrap();
        assert_eq!(r.p, 1.0);
        assert_eq!(r.u, 50.0);
        assert_eq!(mann_whitney_greater(&[], &[1.0]), None);
    }

    #[test]
    fn erfc_is_accurate() {
        // Known values: erfc(0) = 1, erfc(1) = 0.157299207..., erfc(-1) = 1.842700792...
        assert!(close(erfc(0.0), 1.0, 1e-7));
        assert!(close(erfc(1.0), 0.157_299_207_050_285, 1e-7));
        assert!(close(erfc(-1.0), 1.842_700_792_949_715, 1e-7));
    }
}
