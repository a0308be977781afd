"""Hand-computed cases for pipeline.stats."""

import math

import numpy as np
import pytest

from pipeline import stats
from pipeline.stats import bootstrap_mean_ci, cohen_kappa, paired_diff_ci, pearson


def test_constant_values_give_zero_width_interval():
    mean, lo, hi = bootstrap_mean_ci([0.4] * 7, n_boot=500)
    assert mean == pytest.approx(0.4)
    assert lo == pytest.approx(0.4) and hi == pytest.approx(0.4)


def test_bootstrap_interval_contains_mean_and_is_seeded():
    values = [0.1, 0.2, 0.35, 0.5, 0.9]
    mean, lo, hi = bootstrap_mean_ci(values, n_boot=2000, seed=3)
    assert mean == pytest.approx(0.41)
    assert lo < mean < hi
    # Bounds are sample means, so within the range of the data.
    assert 0.1 <= lo and hi <= 0.9
    assert bootstrap_mean_ci(values, n_boot=2000, seed=3) == (mean, lo, hi)
    assert bootstrap_mean_ci(values, n_boot=2000, seed=4) != (mean, lo, hi)


def test_bootstrap_wider_at_smaller_alpha():
    values = [0.0, 1.0, 0.2, 0.8, 0.5, 0.3]
    _, lo95, hi95 = bootstrap_mean_ci(values, alpha=0.05)
    _, lo50, hi50 = bootstrap_mean_ci(values, alpha=0.5)
    assert lo95 < lo50 and hi50 < hi95


def test_bootstrap_two_points_interval_spans_extremes():
    # Resamples of {0, 1} of size 2 have means 0, 0.5, 1 with probability 1/4, 1/2, 1/4:
    # the 2.5% and 97.5% quantiles are 0 and 1.
    mean, lo, hi = bootstrap_mean_ci([0.0, 1.0], n_boot=4000)
    assert (mean, lo, hi) == (0.5, 0.0, 1.0)


def test_bootstrap_drops_missing_and_rejects_empty():
    assert bootstrap_mean_ci([1.0, None, float("nan"), 3.0], n_boot=100)[0] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="no finite values"):
        bootstrap_mean_ci([None, float("nan")])
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_mean_ci([1.0], alpha=1.5)


def test_paired_diff_uses_common_rooms_only():
    a = {"r1": 0.6, "r2": 0.8, "r3": 0.5, "only_a": 1.0}
    b = {"r1": 0.4, "r2": 0.6, "r3": 0.3, "only_b": 0.0}
    mean, lo, hi, n = paired_diff_ci(a, b, n_boot=500)
    # Every common room improved by exactly 0.2: the interval has zero width.
    assert n == 3
    assert mean == pytest.approx(0.2) and lo == pytest.approx(0.2) and hi == pytest.approx(0.2)


def test_paired_diff_sign_and_no_overlap():
    mean, lo, hi, n = paired_diff_ci({"x": 0.1, "y": 0.3}, {"x": 0.5, "y": 0.4}, n_boot=1000)
    assert n == 2 and mean == pytest.approx(-0.25)
    assert lo == pytest.approx(-0.4) and hi == pytest.approx(-0.1)
    with pytest.raises(ValueError, match="no room"):
        paired_diff_ci({"x": 1.0}, {"y": 1.0})


def test_pearson_known_values_and_undefined():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # x = 1..4, y = 1, 3, 2, 4: sxy = 4, sxx = syy = 5, so r = 4 / 5.
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # NaN / None pairs are dropped, leaving the perfectly correlated ones.
    assert pearson([1, 2, None, 4, 5], [1, 2, 100, float("nan"), 5]) == pytest.approx(1.0)
    assert pearson([1, 1, 1], [1, 2, 3]) is None
    assert pearson([1], [2]) is None
    with pytest.raises(ValueError):
        pearson([1, 2], [1])


def test_cohen_kappa_from_2x2_table():
    # 50 items: both pass 20, a only 5, b only 10, neither 15.
    # p_o = 0.7; p_a = 0.5, p_b = 0.6; p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = 0.2/0.5 = 0.4.
    a = [True] * 20 + [True] * 5 + [False] * 10 + [False] * 15
    b = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_cohen_kappa_edges():
    assert cohen_kappa([True, False, True], [True, False, True]) == pytest.approx(1.0)
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)
    assert cohen_kappa([], []) is None
    # Both raters said pass to everything: chance agreement is 1, kappa undefined.
    assert cohen_kappa([True, True], [True, True]) is None
    assert not math.isnan(cohen_kappa([True, True, False], [True, False, False]))
    with pytest.raises(ValueError):
        cohen_kappa([True], [True, False])


# --------------------------------------------------------------------------- the paired cluster interval


def _simulated_lift(
    rng, n_rooms: int, k: int, effect: float, batch_sd: float = 0.0
) -> dict[int, list[float]]:
    """Paired differences as the evaluation sees them: a room effect on the lift, a per-room session
    (batch) shift shared by a room's seeds (rooms are sampled in blocks), and per-seed noise; episode
    scores live in [0, 1], so a difference lives in [-1, 1]."""
    room_effect = rng.normal(effect, 0.075, n_rooms)
    batch = rng.normal(0.0, batch_sd, n_rooms)
    return {
        i: list(np.clip(room_effect[i] + batch[i] + rng.normal(0, 0.25, k), -1, 1)) for i in range(n_rooms)
    }


@pytest.mark.parametrize(("n_rooms", "k"), [(5, 4), (20, 4), (20, 1)])  # (20, 1): the default recipe's
def test_the_cluster_interval_covers_the_truth_and_rarely_promotes_noise(n_rooms, k):
    """Against known truth, with batch effects: coverage at least 93%, and the one-sided rate of a lower
    bound above zero when there is no effect at most 2.5% (within 2 Monte Carlo standard errors)."""
    rng = np.random.default_rng(2026)
    trials, covered, false_pos = 1500, 0, 0
    for t in range(trials):
        truth = 0.0 if t % 2 == 0 else 0.1
        lift = stats.cluster_paired_ci(
            _simulated_lift(rng, n_rooms, k, truth, batch_sd=0.1), n_boot=400, seed=t
        )
        covered += lift["lo"] <= truth <= lift["hi"]
        false_pos += truth == 0.0 and lift["lo"] > 0
    coverage, fpr = covered / trials, false_pos / (trials // 2)
    assert coverage >= 0.93, coverage
    assert fpr <= 0.025 + 2 * (0.025 * 0.975 / (trials // 2)) ** 0.5, fpr


def test_the_cluster_interval_finds_a_real_lift_and_states_what_it_can_detect():
    rng = np.random.default_rng(3)
    lift = stats.cluster_paired_ci(_simulated_lift(rng, 20, 4, 0.2), seed=0)
    assert lift["lo"] > 0 and lift["n_rooms"] == 20 and lift["n_pairs"] == 80
    assert 0.03 < lift["mde"] < 0.2  # 20 rooms x 4 seeds at this noise: about 0.09
    worse = stats.cluster_paired_ci(_simulated_lift(rng, 20, 4, -0.2), seed=0)
    assert worse["hi"] < 0
    # rooms count equally however many seeds each holds; one room gives no interval to speak of
    one = stats.cluster_paired_ci({"a": [0.1, 0.3]})
    assert one["lo"] == one["hi"] == pytest.approx(0.2) and one["mde"] == float("inf")
    with pytest.raises(ValueError):
        stats.cluster_paired_ci({"a": []})


def test_every_pair_equal_states_no_minimum_detectable_effect():
    """Two policies that sample the same episodes on the same seeds: a zero lift with a zero-width
    interval, and no MDE (a zero spread cannot power a test); the printed lines say so."""
    from pipeline.champion import reason
    from pipeline.metrics import mde_text

    lift = stats.cluster_paired_ci({f"r{i}": [0.0] for i in range(20)})
    assert lift["mean"] == lift["lo"] == lift["hi"] == 0.0 and math.isnan(lift["mde"])
    assert "not estimable" in mde_text(lift["mde"]) and mde_text(0.0912) == "0.091 (80% power)"
    row = {"value": 0.0, "ci_low": 0.0, "ci_high": 0.0, "n_rooms": 20}
    assert "no minimum detectable effect" in reason(row, lift["mde"], 0.02)
