"""Statistics over seeds against hand-computed cases (seed_core.stats)."""

from __future__ import annotations

import pytest

from seed_core.stats import iqm, mean_ci, paired_difference, probability_of_improvement, summarize


def test_mean_ci_two_values_is_the_full_percentile_range():
    # resampled means of [0, 1]: 0 (p 1/4), 0.5 (p 1/2), 1 (p 1/4) -> 2.5th pct 0, 97.5th pct 1
    mean, (lo, hi) = mean_ci([0.0, 1.0])
    assert mean == 0.5 and (lo, hi) == (0.0, 1.0)


def test_mean_ci_constant_and_single_seed_are_points():
    assert mean_ci([0.25, 0.25, 0.25]) == (0.25, (0.25, 0.25))
    assert mean_ci([0.4]) == (0.4, (0.4, 0.4))


def test_mean_ci_brackets_the_mean_and_is_narrower_than_the_range():
    values = [0.2, 0.3, 0.25, 0.4, 0.35]
    mean, (lo, hi) = mean_ci(values)
    assert mean == pytest.approx(0.3)
    assert 0.2 < lo < mean < hi < 0.4


def test_iqm_drops_a_quarter_at_each_end():
    # 5 seeds: floor(0.25 * 5) = 1 dropped at each end -> mean(0.1, 0.2, 0.3) = 0.2 (the mean is 0.32)
    assert iqm([1.0, 0.0, 0.2, 0.1, 0.3]) == pytest.approx(0.2)
    # 8 seeds: 2 dropped at each end -> mean(3, 4, 5, 6) = 4.5
    assert iqm([1, 2, 3, 4, 5, 6, 7, 100]) == pytest.approx(4.5)


def test_probability_of_improvement_counts_ties_as_half():
    # x=3 vs y in {1,2,3}: 1 + 1 + 0.5; x=4: 3 -> 5.5 / 6
    out = probability_of_improvement([3, 4], [1, 2, 3])
    assert out["prob_improvement"] == pytest.approx(5.5 / 6)
    lo, hi = out["prob_improvement_ci95"]
    assert 0.0 <= lo <= out["prob_improvement"] <= hi <= 1.0
    assert probability_of_improvement([1, 1], [1, 1])["prob_improvement"] == 0.5
    assert probability_of_improvement([0.1], [0.9])["prob_improvement"] == 0.0


def test_paired_difference_is_per_seed():
    # differences 0.1, 0.0, 0.2 -> mean 0.1; unpaired orderings would not matter for the mean but do for the CI
    out = paired_difference([0.5, 0.6, 0.7], [0.4, 0.6, 0.5])
    assert out["mean_diff"] == pytest.approx(0.1)
    lo, hi = out["ci95"]
    assert lo == pytest.approx(0.0) and hi == pytest.approx(0.2)
    # a constant improvement on every seed has a zero-width CI above 0
    assert paired_difference([0.3, 0.5], [0.1, 0.3])["ci95"] == pytest.approx([0.2, 0.2])


def test_summarize_and_bad_input():
    out = summarize([0.0, 1.0])
    assert out == {"per_seed": [0.0, 1.0], "mean": 0.5, "ci95": [0.0, 1.0], "iqm": 0.5, "n": 2}
    with pytest.raises(ValueError, match="non-empty"):
        summarize([])
    with pytest.raises(ValueError, match="pair the same seeds"):
        paired_difference([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="finite"):
        mean_ci([float("nan")])


def test_paired_test_is_the_exact_sign_flip_p_value() -> None:
    """d = (0.4, 0.2, -0.1, 0.5, 0.5), |mean| 0.3: of the 32 sign patterns, 4 reach it (counted by brute force
    below), so p = 4 / 32 = 0.125; scipy must enumerate, not sample."""
    import itertools

    from seed_core.stats import paired_test

    a, b = [0.9, 0.8, 0.5, 0.7, 0.6], [0.5, 0.6, 0.6, 0.2, 0.1]
    d = [x - y for x, y in zip(a, b)]
    by_hand = sum(abs(sum(s * v for s, v in zip(signs, d))) >= abs(sum(d)) - 1e-12
                  for signs in itertools.product((-1, 1), repeat=5))
    assert by_hand == 4
    out = paired_test(a, b)
    assert out["paired_wins"] == [4, 0, 1] and out["p_paired"] == pytest.approx(4 / 32)
    assert paired_test([1.0, 2.0], [1.0, 2.0]) == {"paired_wins": [0, 2, 0], "p_paired": 1.0}
    with pytest.raises(ValueError, match="pair the same seeds"):
        paired_test([1.0], [1.0, 2.0])


def test_holm_step_down() -> None:
    from seed_core.stats import holm

    # sorted 0.01, 0.03, 0.04: 3 x 0.01 = 0.03; 2 x 0.03 = 0.06; 1 x 0.04 = 0.04 -> kept monotone at 0.06
    assert holm({"x": 0.01, "y": 0.04, "z": 0.03}) == pytest.approx({"x": 0.03, "z": 0.06, "y": 0.06})
    assert holm({"only": 0.2}) == {"only": 0.2} and holm({"a": 0.6, "b": 0.7}) == {"a": 1.0, "b": 1.0}
