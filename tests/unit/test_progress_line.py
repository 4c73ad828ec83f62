"""Whole-stage progress lines of long stages (RL rounds): elapsed time and an ETA from the rounds run so far."""

from __future__ import annotations

from seed_core.runtime.logs import progress_line


def test_eta_is_the_mean_round_time_of_rounds_run_times_the_rounds_left() -> None:
    assert progress_line("round", 3, 10, 123.0, [40.0, 41.0, 42.0]) == "round 3/10 done, 2m03s elapsed, ETA 4m47s"


def test_resumed_rounds_do_not_count_in_the_pace_and_the_last_round_has_no_eta() -> None:
    assert progress_line("round", 2, 4, 1.0, []) == "round 2/4 done, 0m01s elapsed"  # only resumed rounds so far
    assert progress_line("round", 4, 4, 3725.0, [900.0]) == "round 4/4 done, 1h02m elapsed"
