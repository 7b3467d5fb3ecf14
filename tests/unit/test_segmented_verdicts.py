"""The segmented experiment's verdicts, from made-up settings: bands, noise, groups, untested."""

from __future__ import annotations

import math
from typing import Any

import pytest

from shuffledp.experiments.segmented import (
    BLANKET_GRID,
    QUICK_GRID,
    REDUCTION_BANDS,
    SegmentedExperimentConfig,
    _verdicts,
)


def _entry(
    n: int,
    shares: str = "S1",
    *,
    reduction: float = 0.5,
    ratio_se: float = 0.01,
    best_m: float = 2.01,
    m_range: tuple[float, float] | None = None,
    messages: tuple[float, float] = (4.0, 4.5),
    s: int = 4,
) -> dict[str, Any]:
    """One setting of the summary's table, the same for both accountings."""
    ours = {
        "best_m": best_m,
        "mse": 1e-3,
        "se": 1e-5,
        "messages_per_user": messages[0],
        "best_m_range": list(m_range or (best_m, best_m)),
        "messages_per_user_range": list(messages),
    }
    return {
        "n": n,
        "items_per_user": s,
        "shares": shares,
        "ours": {"exact": dict(ours), "paper": dict(ours)},
        "best_baseline": "mm-shuffle",
        "reduction": {
            acc: {"reduction": reduction, "ratio_se": ratio_se} for acc in ("exact", "paper")
        },
    }


def _config(grid: tuple[float, ...] = BLANKET_GRID, data: str = "synthetic"):
    return SegmentedExperimentConfig(data=data, blanket_grid=grid)


def test_the_two_reduction_bands_never_both_hold():
    assert REDUCTION_BANDS["error_reduction_50"][1] <= REDUCTION_BANDS["error_reduction_70"][0]
    for value in [x / 100 for x in range(20, 95)]:
        for se in (0.0, 0.005, 0.02, 0.05):
            out = _verdicts(_config(), [_entry(5_000, reduction=value, ratio_se=se)])
            both = [out[k]["verdict"] for k in ("error_reduction_50", "error_reduction_70")]
            assert both != ["reproduced", "reproduced"], (value, se)


def test_a_reduction_of_061_is_about_70_and_not_about_50():
    out = _verdicts(_config(), [_entry(5_000, reduction=0.61, ratio_se=0.002)])
    assert out["error_reduction_70"]["verdict"] == "reproduced"
    assert out["error_reduction_50"]["verdict"] == "contradicted"
    assert out["error_reduction_50"]["evidence"][0]["band"] == "about 70%"


def test_a_reduction_within_two_standard_errors_of_the_boundary_decides_nothing():
    out = _verdicts(_config(), [_entry(5_000, reduction=0.61, ratio_se=0.02)])
    for key in ("error_reduction_50", "error_reduction_70"):
        assert out[key]["verdict"] == "inconclusive"
        assert out[key]["evidence"][0]["within"] is None
    # No standard error (one repetition): nothing is decided either.
    out = _verdicts(_config(), [_entry(5_000, reduction=0.5, ratio_se=math.nan)])
    assert out["error_reduction_50"]["verdict"] == "inconclusive"


def test_settings_are_tallied_per_n_so_a_failing_n_shows():
    # 4 of 6 settings in the band: a pooled 2-of-3 rule would say "reproduced".
    table = [_entry(5_000, share, reduction=0.5) for share in ("S1", "S2", "S3")]
    table += [
        _entry(50_000, "S1", reduction=0.5),
        _entry(50_000, "S2", reduction=0.2),
        _entry(50_000, "S3", reduction=0.8),
    ]
    verdict = _verdicts(_config(), table)["error_reduction_50"]
    assert verdict["verdict"] == "mixed"
    assert verdict["groups"]["exact"] == {"n=5,000": "reproduced", "n=50,000": "contradicted"}


def test_best_m_is_untested_when_the_grid_stops_inside_the_claims_band():
    table = [_entry(5_000, best_m=4.01, m_range=(4.01, math.inf))]
    out = _verdicts(_config(QUICK_GRID), table)
    for key in ("best_m", "best_m_below_4", "best_m_decreases_with_n", "n_scaling"):
        assert out[key]["verdict"] == "untested", key
        assert out[key]["note"], key
    assert "4.01" in out["best_m_below_4"]["note"]


def test_best_m_judged_on_the_range_of_near_best_m():
    inside = _entry(5_000, best_m=4.01, m_range=(2.97, 5.5))
    wide = _entry(5_000, "S2", best_m=4.01, m_range=(1.97, 7.5))
    out = _verdicts(_config(), [inside])
    assert out["best_m"]["verdict"] == "reproduced"
    assert out["best_m_below_4"]["verdict"] == "inconclusive"  # 5.5 > 4.01
    out = _verdicts(_config(), [wide])
    assert out["best_m"]["verdict"] == "inconclusive"
    far = _entry(50_000, best_m=5.5, m_range=(4.0, 7.5))
    out = _verdicts(_config(), [far])
    assert out["best_m"]["verdict"] == "contradicted"
    assert out["best_m_below_4"]["verdict"] == "inconclusive"


def test_the_decrease_of_best_m_with_n_is_its_own_verdict():
    small = _entry(5_000, best_m=4.01, m_range=(2.97, 5.5))
    large = _entry(50_000, best_m=1.45, m_range=(1.01, 2.01))
    out = _verdicts(_config(), [small, large])
    assert out["best_m_decreases_with_n"]["verdict"] == "reproduced"
    overlapping = _entry(50_000, best_m=2.01, m_range=(1.01, 3.97))
    out = _verdicts(_config(), [small, overlapping])
    assert out["best_m_decreases_with_n"]["verdict"] == "inconclusive"
    rising = _entry(50_000, best_m=7.5, m_range=(5.5, 10.0))
    out = _verdicts(_config(), [small, rising])
    assert out["best_m_decreases_with_n"]["verdict"] == "contradicted"


def test_a_claim_without_evidence_is_untested():
    out = _verdicts(_config(data="movies"), [_entry(5_000, s=2)])
    assert out["best_m"]["verdict"] == "untested" and "synthetic" in out["best_m"]["note"]
    out = _verdicts(_config(), [])
    assert all(v["verdict"] == "untested" for v in out.values())


@pytest.mark.parametrize(
    ("messages", "expected"),
    [((4.0, 4.6), "reproduced"), ((6.0, math.inf), "contradicted"), ((4.5, 5.5), "inconclusive")],
)
def test_messages_per_user_over_the_near_best_range(messages, expected):
    out = _verdicts(_config(), [_entry(5_000, messages=messages)])
    assert out["messages_per_user"]["verdict"] == expected
