"""Statistics over seeds for the results users compare (rliable's recommendations, with scipy).

* ``mean_ci``: mean and its 95% percentile-bootstrap confidence interval over seeds
  (``scipy.stats.bootstrap``; percentile rather than BCa because BCa is unstable at 5 seeds and undefined
  when every seed ties).
* ``iqm``: interquartile mean, the mean of the middle 50% (``scipy.stats.trim_mean(x, 0.25)``).
* ``paired_difference``: methods evaluated on the same seed share tasks and Stage 1, so the difference is
  taken per seed, d_i = a_i - b_i, and its mean gets a bootstrap CI over seeds.
* ``probability_of_improvement``: P(X > Y) = (1 / mn) sum_{i,j} [1(x_i > y_j) + 0.5 * 1(x_i = y_j)], the
  Mann-Whitney statistic normalised as in rliable (Agarwal et al., 2021), with a two-sample bootstrap CI.

All take plain sequences of per-seed scores (success as a fraction) and return floats.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 10_000


def _as_array(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what}: need a non-empty list of per-seed values, got {values!r}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: per-seed values must be finite, got {values!r}")
    return arr


def _bootstrap(samples: tuple[np.ndarray, ...], statistic, paired: bool, seed: int) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic(*samples)``; a single or constant sample gives a point."""
    if all(s.size < 2 or np.all(s == s[0]) for s in samples):
        value = float(statistic(*samples))
        return value, value
    res = stats.bootstrap(samples, statistic, paired=paired, vectorized=False, confidence_level=CONFIDENCE,
                          n_resamples=RESAMPLES, method="percentile", rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def mean_ci(values: Sequence[float], seed: int = 0) -> tuple[float, tuple[float, float]]:
    """(mean, (lo, hi)): the mean over seeds and its 95% percentile-bootstrap interval."""
    x = _as_array(values, "mean_ci")
    return float(x.mean()), _bootstrap((x,), np.mean, paired=False, seed=seed)


def iqm(values: Sequence[float]) -> float:
    """Interquartile mean: drop the lowest and highest 25% of seeds (floor), average the rest."""
    return float(stats.trim_mean(_as_array(values, "iqm"), 0.25))


def paired_difference(a: Sequence[float], b: Sequence[float], seed: int = 0) -> dict[str, object]:
    """``{"mean_diff": mean(a - b), "ci95": [lo, hi]}`` over seeds (a[i] and b[i] share seed i)."""
    x, y = _as_array(a, "paired_difference a"), _as_array(b, "paired_difference b")
    if x.size != y.size:
        raise ValueError(f"paired_difference: {x.size} vs {y.size} seeds; pair the same seeds")
    diff = x - y
    lo, hi = _bootstrap((diff,), np.mean, paired=False, seed=seed)
    return {"mean_diff": float(diff.mean()), "ci95": [lo, hi]}


def _prob_improvement(x: np.ndarray, y: np.ndarray) -> float:
    greater = (x[:, None] > y[None, :]).mean()
    ties = (x[:, None] == y[None, :]).mean()
    return float(greater + 0.5 * ties)


def probability_of_improvement(x: Sequence[float], y: Sequence[float], seed: int = 0) -> dict[str, object]:
    """``{"prob_improvement": P(X > Y), "prob_improvement_ci95": [lo, hi]}`` (see module docstring)."""
    a, b = _as_array(x, "probability_of_improvement x"), _as_array(y, "probability_of_improvement y")
    lo, hi = _bootstrap((a, b), _prob_improvement, paired=False, seed=seed)
    return {"prob_improvement": _prob_improvement(a, b), "prob_improvement_ci95": [lo, hi]}


def summarize(per_seed: Sequence[float], seed: int = 0) -> dict[str, object]:
    """``{"per_seed", "mean", "ci95", "iqm", "n"}`` for one method."""
    mean, (lo, hi) = mean_ci(per_seed, seed)
    return {"per_seed": [float(v) for v in per_seed], "mean": mean, "ci95": [lo, hi], "iqm": iqm(per_seed),
            "n": len(per_seed)}


def paired_test(a: Sequence[float], b: Sequence[float]) -> dict[str, object]:
    """The paired test of a confirmatory comparison (issue 39): ``paired_wins`` = [#seeds a > b, ties, a < b], and
    ``p_paired``, the two-sided exact sign-flip (paired permutation) p-value of the mean difference: under H0 each
    seed's d_i = a_i - b_i is as likely -d_i, so p = #{s in {-1, 1}^n : |mean(s d)| >= |mean(d)|} / 2^n
    (``scipy.stats.permutation_test``, ``permutation_type="samples"``, every sign pattern enumerated up to n = 20)."""
    x, y = _as_array(a, "paired_test a"), _as_array(b, "paired_test b")
    if x.size != y.size:
        raise ValueError(f"paired_test: {x.size} vs {y.size} seeds; pair the same seeds")
    diff = x - y
    wins = [int((diff > 0).sum()), int((diff == 0).sum()), int((diff < 0).sum())]
    if np.all(diff == 0):
        return {"paired_wins": wins, "p_paired": 1.0}
    res = stats.permutation_test((x, y), lambda u, v, axis: np.mean(u - v, axis=axis), vectorized=True,
                                 permutation_type="samples", alternative="two-sided", n_resamples=2 ** 20)
    return {"paired_wins": wins, "p_paired": float(res.pvalue)}


def holm(pvalues: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment over a family: with p_(1) <= ... <= p_(m),
    p_holm(i) = min(1, max_{j <= i} (m - j + 1) p_(j)). Rejecting where p_holm < alpha keeps the family-wise error
    at alpha (Holm 1979)."""
    order = sorted(pvalues, key=lambda k: pvalues[k])
    m, running, out = len(order), 0.0, {}
    for j, name in enumerate(order):
        running = max(running, min(1.0, (m - j) * pvalues[name]))
        out[name] = running
    return out
