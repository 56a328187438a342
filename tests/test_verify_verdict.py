"""Verdict logic on noisy samples (pure Python)."""

import math

import pytest

from torchlint.verify import verdict as V


def s(*xs):
    return V.summarize(xs)


def test_summary_median_and_iqr():
    out = s(1, 2, 3, 4, 100)
    assert out.median == 3 and out.spread == 2 and out.min == 1 and out.max == 100 and out.n == 5
    assert V.summarize([None, None]) is None
    assert s(5).spread == 0


def test_quantile_interpolates():
    assert V.quantile([0, 10], 0.25) == 2.5
    with pytest.raises(ValueError):
        V.quantile([], 0.5)


def test_skipped_without_cuda():
    v = V.decide("busy_fraction", "up", 0.1, s(0.2), s(0.9), cuda=False, skip_reason="torch 2.13.0 is a CPU-only build")
    assert v.verdict == V.SKIPPED and "CPU-only" in v.reason


def test_points_pass_when_effect_beats_threshold_and_noise():
    v = V.decide("busy_fraction", "up", 0.10, s(0.30, 0.31, 0.29, 0.30, 0.32), s(0.62, 0.60, 0.61, 0.63, 0.60))
    assert v.verdict == V.PASS
    assert v.change == pytest.approx(0.31)
    assert v.noise == pytest.approx(3 * 0.02)


def test_points_threshold_is_absolute_not_relative():
    # +5 points from 5% is +100% relative, but the busy-fraction threshold is 10 points.
    v = V.decide("busy_fraction", "up", 0.10, s(0.05, 0.05, 0.05), s(0.10, 0.10, 0.10))
    assert v.verdict == V.FAIL


def test_inconclusive_when_spread_swamps_a_large_effect():
    v = V.decide("busy_fraction", "up", 0.10, s(0.2, 0.5, 0.3, 0.6, 0.1), s(0.5, 0.8, 0.4, 0.9, 0.45))
    assert v.effect > 0.10 and v.noise >= v.effect
    assert v.verdict == V.INCONCLUSIVE


def test_inconclusive_when_noise_could_carry_a_small_effect_over_the_threshold():
    v = V.decide("busy_fraction", "up", 0.10, s(0.40, 0.45, 0.50, 0.42, 0.48), s(0.45, 0.50, 0.55, 0.47, 0.53))
    assert v.effect < 0.10 < v.effect + v.noise
    assert v.verdict == V.INCONCLUSIVE


def test_fail_when_effect_clearly_short_of_threshold():
    v = V.decide("busy_fraction", "up", 0.10, s(0.50, 0.50, 0.51, 0.49), s(0.52, 0.52, 0.53, 0.51))
    assert v.verdict == V.FAIL


def test_fail_when_metric_moves_the_wrong_way():
    v = V.decide("samples_per_s", "up", 0.2, s(100, 101, 99), s(50, 51, 49))
    assert v.verdict == V.FAIL and v.effect < 0


def test_relative_down_metrics():
    v = V.decide("peak_mem_bytes", "down", 0.2, s(1000, 1000, 1010), s(500, 505, 500))
    assert v.verdict == V.PASS
    assert v.change == pytest.approx(-0.5)
    assert v.effect == pytest.approx(0.5)
    assert V.decide("peak_mem_bytes", "down", 0.6, s(1000, 1000), s(500, 500)).verdict == V.FAIL


def test_relative_noise_is_relative_to_the_bad_median():
    v = V.decide("wall_s", "down", 0.1, s(1.0, 1.2, 0.8, 1.1, 0.9), s(0.7, 0.75, 0.65, 0.7, 0.7))
    assert v.noise == pytest.approx(3 * 0.2 / 1.0)
    assert v.verdict == V.INCONCLUSIVE


def test_sync_count_to_zero_passes():
    v = V.decide("sync_count", "down", 0.5, s(50, 50, 50), s(0, 0, 0))
    assert v.verdict == V.PASS and v.change == -1.0


def test_zero_baseline():
    assert V.change("h2d_copies", 0, 0) == 0.0
    assert math.isinf(V.change("h2d_copies", 0, 3))
    assert V.decide("h2d_copies", "down", 0.2, s(0, 0), s(3, 3)).verdict == V.FAIL


def test_mechanism_failure_fails_even_with_a_big_effect():
    v = V.decide("h2d_copies", "down", 0.2, s(100, 100), s(0, 0), mechanism_ok=False, mechanism_reason="ran on cpu")
    assert v.verdict == V.FAIL and "mechanism" in v.reason and "cpu" in v.reason


def test_missing_samples_fail():
    v = V.decide("busy_fraction", "up", 0.1, None, s(0.5))
    assert v.verdict == V.FAIL and "bad" in v.reason


def test_exactly_at_threshold_is_not_a_pass():
    assert V.decide("sync_count", "down", 0.5, s(10, 10), s(5, 5)).verdict == V.FAIL


def test_bad_direction_is_an_error():
    with pytest.raises(ValueError):
        V.decide("wall_s", "sideways", 0.1, s(1), s(1))


def test_formatting():
    assert V.format_change("busy_fraction", 0.123) == "+12.3 pts"
    assert V.format_change("wall_s", -0.25) == "-25.0%"
    assert V.format_change("wall_s", None) == "n/a"
    assert V.format_threshold("busy_fraction", "up", 0.1) == "up >= 10 pts"
    assert V.format_threshold("peak_mem_bytes", "down", 0.2) == "down >= 20%"
