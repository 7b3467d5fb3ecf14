import numpy as np
import pytest

from shuffledp._rng import make_rng
from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_flip_probability,
    check_int,
)
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1", None, True])
def test_epsilon_rejects(bad):
    with pytest.raises(InvalidParameterError, match="epsilon must be a finite number > 0"):
        check_epsilon(bad)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -1e-9, "0.1", None])
def test_delta_rejects(bad):
    with pytest.raises(InvalidParameterError, match=r"delta must be in the open interval \(0, 1\)"):
        check_delta(bad)


def test_messages_name_parameter_and_value():
    with pytest.raises(
        InvalidParameterError, match=r"^--epsilon must be a finite number > 0, got -2$"
    ):
        check_epsilon(-2, "--epsilon")
    with pytest.raises(InvalidParameterError, match="fake_users must be an integer >= 0, got -1"):
        check_int(-1, "fake_users")
    with pytest.raises(InvalidParameterError, match=r"n must be an integer, got 5\.0"):
        check_int(5.0, "n", minimum=1)
    with pytest.raises(InvalidParameterError, match=r"q must be in the open interval \(0, 0.5\)"):
        check_flip_probability(0.5)


def test_accepts_valid_values():
    assert check_epsilon(np.float64(0.5)) == 0.5
    assert check_delta(1e-9) == 1e-9
    assert check_int(np.int64(3), "n", minimum=1) == 3
    assert check_flip_probability(0.25) == 0.25


def test_rng_policy():
    a = make_rng(7).integers(0, 1 << 30, 5)
    b = make_rng(7).integers(0, 1 << 30, 5)
    np.testing.assert_array_equal(a, b)
    # Without a seed two generators draw from fresh OS entropy (2^-150 chance of equality).
    assert not np.array_equal(
        make_rng(None).integers(0, 1 << 30, 5), make_rng(None).integers(0, 1 << 30, 5)
    )
    gen = np.random.default_rng(1)
    assert make_rng(gen) is gen
    with pytest.raises(InvalidParameterError):
        make_rng(-1)
    with pytest.raises(TypeError):
        make_rng(1.5)  # type: ignore[arg-type]


def test_privacy_types():
    report = PrivacyReport(ApproxDP(1.0, 1e-6), method="m", bound=BoundKind.UPPER, n=10)
    d = report.to_dict()
    assert d["epsilon"] == 1.0 and d["delta"] == 1e-6 and d["bound"] == "upper"
    with pytest.raises(InvalidParameterError):
        ApproxDP(0.0, 1e-6)
    with pytest.raises(ValueError, match="delta must be in"):
        ApproxDP(1.0, 1.0)
