"""zoo.core.stats.bootstrap_ci against the binomial standard error and on degenerate inputs."""

import pytest

from zoo.core.stats import bootstrap_ci


def test_bootstrap_ci_brackets_the_mean_with_the_binomial_width():
    lo, hi = bootstrap_ci([1.0] * 60 + [0.0] * 40)
    # binomial sd of the mean: sqrt(0.6 * 0.4 / 100) = 0.049, so the 95% interval is about 0.6 +- 0.096
    assert lo < 0.6 < hi and 0.15 < hi - lo < 0.23


def test_bootstrap_ci_collapses_on_constant_values_and_is_seeded():
    assert bootstrap_ci([0.5] * 50) == pytest.approx((0.5, 0.5))
    values = [0.1, 0.9, 0.4, 0.7, 0.2]
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    with pytest.raises(ValueError):
        bootstrap_ci([])
