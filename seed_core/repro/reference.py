"""A results table against the committed multi-seed reference: per method, inside or outside its 95% range.

The reference is a committed sweep's ``learning.json`` (``seed sweep``; ``benchmarks/results/learning.json``):
per method the success rate of each seed (``methods[m]["per_seed"]``). A user's ``seed run`` is one new draw:
another random seed, or the same seed on a CPU whose floats differ (the testbed amplifies a last-bit difference
chaotically, so such a run behaves like another seed). The question is therefore whether that one value is
plausible under the reference, a *prediction* range, not the confidence interval of the mean (``ci95`` in
learning.json, far narrower than the spread of single runs). The reference's seeds share one base model, so its
ranges span RL seeds only: where other floats also build another base model, its variation is not in them (one
run under ``SEED_NUMERICS=native``: GRPO 13.3 against [22.4, 44.5], benchmarks/results/numerics_run_cost.json);
``flows.results.base_model_lines`` says so under the verdict.

The range rule (``prediction_range``), for a method with per-seed values x_1..x_n (mean m, sample sd s) and
evaluations of E episodes (the reference's ``setting.episodes``, 128 by default):

    half = t_{0.975, n-1} * s * sqrt(1 + 1/n)        (the Student-t 95% prediction interval of one new value)
    half = max(half, 1.96 * sqrt(m (1 - m) / E))      (at least one E-episode evaluation's own binomial noise)
    range = [max(0, m - half), min(1, m + half)]

Why this rule: under normality of the per-seed values the t interval covers a new seed's value with
probability 95% for any n >= 2 (the [min, max] of 5 seeds would cover it only with (n-1)/(n+1) = 67%), and it
widens by itself when few seeds are committed. The binomial floor keeps a method whose seeds happened to agree
(s ~ 0) from getting a zero-width range: one evaluation of 128 episodes alone moves by ~4 points at 30%.
With one seed (n = 1) the floor alone is the range. A method the reference does not have is said so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import fmean, stdev
from typing import Any, Sequence

Z95 = 1.959963984540054
"""The standard normal's 97.5% quantile."""


def prediction_range(per_seed: Sequence[float], episodes: int) -> tuple[float, float]:
    """The 95% range of one new run's success rate (the module's rule); ``per_seed`` in [0, 1]."""
    from scipy import stats

    if not per_seed:
        raise ValueError("a reference method needs at least one per-seed value")
    n, mean = len(per_seed), fmean(per_seed)
    half = stats.t.ppf(0.975, n - 1) * stdev(per_seed) * math.sqrt(1 + 1 / n) if n >= 2 else 0.0
    half = max(half, Z95 * math.sqrt(mean * (1 - mean) / max(episodes, 1)))
    return max(0.0, float(mean - half)), min(1.0, float(mean + half))


@dataclass(frozen=True)
class RowVerdict:
    """One method of the table: its success rate, the reference's range (None: not in the reference) and how far
    outside it lies (signed, in the rate's units; 0 inside)."""

    method: str
    label: str
    value: float
    low: float | None = None
    high: float | None = None
    n_seeds: int = 0

    @property
    def status(self) -> str:
        if self.low is None or self.high is None:
            return "missing"
        return "inside" if self.low <= self.value <= self.high else "outside"

    @property
    def by(self) -> float:
        """How far outside: ``value - high`` above the range, ``value - low`` (negative) below it, else 0."""
        if self.status != "outside":
            return 0.0
        assert self.low is not None and self.high is not None
        return self.value - self.high if self.value > self.high else self.value - self.low

    def line(self, width: int) -> str:
        head = f"  {self.label:<{width}} {100 * self.value:5.1f}"
        if self.status == "missing":
            return f"{head}  not in the reference (no committed per-seed values for {self.method!r})"
        assert self.low is not None and self.high is not None
        rng = f"[{100 * self.low:.1f}, {100 * self.high:.1f}]"
        if self.status == "inside":
            return f"{head}  inside {rng}"
        return f"{head}  OUTSIDE {rng} by {100 * self.by:+.1f} points"


def judge(rows: Sequence[dict[str, Any]], reference: dict[str, Any]) -> list[RowVerdict]:
    """Each table row (``method``, ``label``, ``success_rate``) against ``reference`` (a learning.json mapping)."""
    methods = reference.get("methods", {})
    episodes = int(reference.get("setting", {}).get("episodes", 128))
    out = []
    for row in rows:
        ref = methods.get(row["method"])
        value = float(row["success_rate"])
        label = str(row.get("label") or row["method"])
        if not ref or not ref.get("per_seed"):
            out.append(RowVerdict(row["method"], label, value))
            continue
        low, high = prediction_range([float(v) for v in ref["per_seed"]], episodes)
        out.append(RowVerdict(row["method"], label, value, low, high, len(ref["per_seed"])))
    return out


def verdict_lines(verdicts: Sequence[RowVerdict], source: str, description: str = "") -> list[str]:
    """The statistical verdict as lines for ``seed run``'s end: a heading, one line per method, a summary."""
    seeds = max((v.n_seeds for v in verdicts), default=0)
    head = (f"seed: your table against the committed {seeds}-seed reference ({source}"
            f"{'; ' + description if description else ''}), 95% range of one run:")
    width = max((len(v.label) for v in verdicts), default=0)
    lines = [head, *(v.line(width) for v in verdicts)]
    outside = [v for v in verdicts if v.status == "outside"]
    missing = [v for v in verdicts if v.status == "missing"]
    judged = len(verdicts) - len(missing)
    if outside:
        names = ", ".join(f"{v.label} ({100 * v.by:+.1f})" for v in outside)
        lines.append(f"seed: {len(outside)} of {judged} methods outside the reference's range: {names}; "
                     f"beyond seed-to-seed variation: check the config against the reference's setting and "
                     f"`dvc metrics diff`")
    elif judged:
        lines.append(f"seed: all {judged} methods the reference has lie inside its range")
    else:
        lines.append("seed: no method of the table is in the reference")
    if missing:
        lines.append(f"seed: not in the reference: {', '.join(v.label for v in missing)}")
    return lines
