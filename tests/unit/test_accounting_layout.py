"""The accountant's layout: groups by kind of argument, old paths, reproductions never certified.

The import arrows between the groups are checked in ``test_layering.py``; here:
every name the flat 0.2 modules exported still imports from its old path (with
a deprecation warning naming the new home), and no method of the registry that
evaluates a printed formula (a function of ``shuffledp.accounting.reproductions``)
is a certified bound.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

import pytest

import shuffledp
from shuffledp import accounting
from shuffledp._validation import InvalidParameterError
from shuffledp.accounting import compare
from shuffledp.accounting._moved import MOVED
from shuffledp.accounting.methods import METHODS, Method
from shuffledp.privacy import BoundKind

#: Every name the flat modules of 0.2 exported (their ``__all__``): the old paths'
#: compatibility contract.
OLD_EXPORTS: dict[str, tuple[str, ...]] = {
    "_binomial": (
        "DEFAULT_TAIL",
        "Window",
        "binomial_pmf",
        "binomial_window",
        "binomial_windows",
        "convolve",
        "plus_bernoulli",
        "reflected",
    ),
    "hockey_stick": (
        "certified_hockey_stick",
        "certified_hockey_stick_product",
        "exp_or_inf",
        "hockey_stick",
        "hockey_stick_both",
        "hockey_stick_product",
        "rounding_allowance",
    ),
    "two_counts": (
        "BlockMemo",
        "FrozenLines",
        "TwoCountPair",
        "certify",
        "frozen_deltas",
        "frozen_upper_lines",
        "line_divergence",
        "line_divergence_each",
        "sample_two_count_loss",
        "two_count_delta",
        "two_count_delta_direct",
        "two_count_delta_lines",
        "two_count_deltas",
    ),
    "mixture": (
        "INNER_TOLERANCE",
        "OUTER_TOLERANCE",
        "DeltaCurve",
        "PairAt",
        "mixture_curve",
        "mixture_delta",
    ),
    "iid_blanket": (
        "MAX_CELLS",
        "IidBlanket",
        "iid_blanket_delta",
    ),
    "generic_bounds": (
        "Bound",
        "bbgn2019_bennett_delta",
        "bbgn2019_bennett_published_delta",
        "bbgn2019_hoeffding_delta",
        "erlingsson2019_delta",
        "erlingsson2019_epsilon",
        "fmt2021_closed_delta",
        "fmt2021_closed_epsilon",
    ),
    "variation_ratio": (
        "EPSILON0_MAX",
        "VariationRatio",
        "fmt2021_numeric_pair",
        "group_composition",
        "poisson_pair",
        "variation_ratio_from_channel",
        "vr_generic_pair",
        "vr_pair",
    ),
    "biswas": ("biswas2023_delta",),
    "flip_paper": (
        "PAPER_MAX_DELTA",
        "paper_error_bound",
        "paper_flip_q",
        "paper_min_fake_users",
    ),
    "correlated_paper": (
        "PAPER_GAMMA",
        "PaperCorrelatedRule",
        "paper_correlated_noise",
        "paper_flooding",
    ),
    "krr": (
        "ALL_SPLITS_UP_TO",
        "LOG_RANGE",
        "krr_binary_split_delta",
        "krr_delta",
        "krr_delta_curve",
        "krr_delta_for_dataset",
        "krr_delta_homogeneous",
        "krr_delta_lower_bound",
        "krr_delta_two_count_marginal",
        "krr_marginal_delta",
        "krr_probabilities",
        "krr_two_count_pair",
    ),
    "flip": (
        "flip_delta",
        "flip_delta_for_pair",
        "flip_delta_lower_bound",
        "flip_epsilon",
        "flip_local_epsilon",
    ),
    "poisson": (
        "poisson_delta",
        "poisson_delta_curve",
        "poisson_delta_lemma3",
    ),
    "segmented": (
        "VARIANTS",
        "LevelGuarantee",
        "SegmentedParameters",
        "Variant",
        "blanket_tries",
        "calibrate_level",
        "error_bound",
        "group_delta",
        "item_delta",
        "level_delta",
        "level_lower_bound",
        "lower_bound_slots",
        "optimize_parameters",
        "paper_report_probability",
        "thm3_group_delta",
    ),
    "per_user": (
        "PerUserEpsilons",
        "paper_per_user_epsilon",
        "per_user_epsilons",
        "regroup_attack",
        "release_guarantee",
    ),
    "correlated": (
        "NEIGHBOURS",
        "CorrelatedNoise",
        "Neighbours",
        "central_dlap_parameter",
        "cheapest_flooding",
        "correlated_delta",
        "correlated_epsilon",
        "dlap_std",
        "epsilon_with_fewer_honest",
        "flooding_floor",
        "generic_bin_delta",
        "largest_alpha",
        "negative_binomial_tail_point",
    ),
    "augmented": (
        "DESIGN_MARGIN",
        "MAX_EPSILON",
        "VARIANTS",
        "DummyLaw",
        "SAGeoLaw",
        "SBinLaw",
        "Variant",
        "augmented_delta",
        "augmented_delta_on_grid",
        "calibrate_sageo_nu",
        "calibrate_sbin_trials",
        "check_beta",
        "minimum_beta",
        "paper_sageo_nu",
        "s1geo_beta",
        "s1geo_law",
        "sageo_delta",
        "sageo_law",
    ),
    "pld": (
        "PLD_TAIL",
        "ApproxDPPair",
        "DistributionPair",
        "DominatingPair",
        "PairAccountant",
        "ProductPair",
        "RoundedLoss",
        "TwoCountMixture",
        "delta_from_distributions",
        "flip_certificate_distributions",
        "flip_dominating_pair",
        "krr_dominating_pair",
        "shuffled_randomizer_distributions",
        "two_count_distributions",
        "two_count_loss_distribution",
    ),
    "compose": (
        "BASIC_COMPOSITION_METHOD",
        "FLIP_CERTIFICATE_METHOD",
        "KRR_CERTIFICATE_METHOD",
        "PLD_COMPOSITION_METHOD",
        "Population",
        "basic_composition",
        "compose",
        "dominating_pair",
        "populations_from_json",
        "reports_from_json",
        "weakest_level",
    ),
    "calibration": (
        "calibrate_flip_q",
        "flip_delta_floor",
        "largest_passing",
        "settle_epsilon",
        "settle_largest",
        "settle_smallest",
        "smallest_passing",
    ),
}


@pytest.mark.parametrize("old", sorted(m for m in OLD_EXPORTS if m != "calibration"))
def test_an_old_path_imports_with_a_warning_and_exports_every_old_name(
    old: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"shuffledp.accounting.{old}"
    homes = MOVED[name]
    monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.warns(DeprecationWarning, match=homes[0].replace(".", r"\.")):
        module = importlib.import_module(name)
    missing = [n for n in OLD_EXPORTS[old] if not hasattr(module, n)]
    assert missing == []
    if len(homes) == 1:
        assert module is importlib.import_module(homes[0])
    else:
        assert set(OLD_EXPORTS[old]) <= set(dir(module))
        assert {"__name__", "__doc__", "__all__", "__spec__"} <= set(dir(module))
        with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
            _ = module.not_a_name


def test_every_old_module_has_a_home_and_every_home_exists() -> None:
    assert {f"shuffledp.accounting.{m}" for m in OLD_EXPORTS if m != "calibration"} == set(MOVED)
    for homes in MOVED.values():
        for home in homes:
            assert isinstance(importlib.import_module(home), types.ModuleType)


def test_calibration_keeps_its_names_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = importlib.import_module("shuffledp.accounting.calibration")
    assert [n for n in OLD_EXPORTS["calibration"] if not hasattr(module, n)] == []


def _reproduction_functions(method: Method) -> set[str]:
    """Functions of ``shuffledp.accounting.reproductions`` that a method's δ(ε) calls.

    Follows the names the method's callables use, through helper functions of
    the registry module, to the functions they name.
    """
    seen: set[int] = set()
    found: set[str] = set()
    pending = [f for f in (method.delta_fn, method.deciding_fn, method.curve_fn) if f is not None]
    while pending:
        fn = pending.pop()
        if id(fn) in seen or not inspect.isfunction(fn):
            continue
        seen.add(id(fn))
        module = fn.__module__
        if module.startswith("shuffledp.accounting.reproductions"):
            found.add(f"{module}.{fn.__name__}")
            continue
        if module != "shuffledp.accounting.methods":
            continue
        names = set(fn.__code__.co_names)
        for const in fn.__code__.co_consts:
            if isinstance(const, types.CodeType):
                names |= set(const.co_names)
        pending.extend(fn.__globals__[n] for n in names if n in fn.__globals__)
    return found


def test_a_method_that_evaluates_a_printed_formula_is_registered_as_a_reproduction() -> None:
    printed = {name: _reproduction_functions(m) for name, m in METHODS.items()}
    assert {name for name, fns in printed.items() if fns} == {
        name for name, m in METHODS.items() if m.bound is BoundKind.REPRODUCTION
    }
    # The walk does find them: each reproduction names its printed formula.
    assert printed["biswas2023"] == {"shuffledp.accounting.reproductions.biswas.biswas2023_delta"}
    assert printed["poisson-lemma3"] == {
        "shuffledp.accounting.reproductions.poisson_lemma3.poisson_delta_lemma3"
    }


@pytest.mark.parametrize(
    ("mechanism", "params"),
    [
        ("generic", {"epsilon0": 1.0}),
        ("generic", {"epsilon0": 4.0}),
        ("krr", {"epsilon0": 2.0, "domain_size": 3, "n_x0": 10}),
        ("poisson", {"report_probability": 0.3, "domain_size": 20, "blanket_messages": 400}),
    ],
)
@pytest.mark.parametrize("epsilon", [0.3, 1.0])
def test_no_reproduction_row_is_ever_certified(
    mechanism: str, params: dict[str, float], epsilon: float
) -> None:
    rows = compare(epsilon=epsilon, n=200, mechanism=mechanism, **params)
    reproductions = [r for r in rows if METHODS[r.method].bound is BoundKind.REPRODUCTION]
    assert reproductions  # every mechanism here has one
    assert [r.method for r in reproductions if r.certified] == []


def test_privacy_report_compose_forwards_to_shuffledp_compose_with_a_warning() -> None:
    from shuffledp.protocols.flip import FlipProtocol

    a = FlipProtocol.calibrated(1_000, 5, 1.0, 1e-6).privacy_report()
    b = FlipProtocol.calibrated(1_000, 5, 2.0, 1e-6).privacy_report()
    with pytest.warns(DeprecationWarning, match=r"shuffledp\.compose"):
        old = a.compose(b)
    assert old == shuffledp.compose(a, b)


def _functions_taking_rounding() -> list[tuple[str, Callable[..., Any]]]:
    found = []
    for info in pkgutil.walk_packages(accounting.__path__, "shuffledp.accounting."):
        if info.name.endswith("_moved"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isfunction(value)
                and value.__module__ == info.name
                and "rounding" in inspect.signature(value).parameters
                and not name.startswith("_")
            ):
                found.append((f"{info.name}.{name}", value))
    return sorted(found, key=lambda item: item[0])


ROUNDING_FUNCTIONS = _functions_taking_rounding()


def test_there_are_accountants_taking_rounding() -> None:
    assert len(ROUNDING_FUNCTIONS) >= 20, [name for name, _ in ROUNDING_FUNCTIONS]


@pytest.mark.parametrize(
    ("name", "function"), [pytest.param(*item, id=item[0]) for item in ROUNDING_FUNCTIONS]
)
@pytest.mark.parametrize("bad", ["UP", "Down", "upper", "", None, 1])
def test_every_rounding_parameter_refuses_anything_but_up_or_down(
    name: str, function: Callable[..., Any], bad: object
) -> None:
    """Anything but "up" used to mean "down": a typo turned a certificate into a lower bound."""
    signature = inspect.signature(function)
    required = {
        parameter.name: None
        for parameter in signature.parameters.values()
        if parameter.default is inspect.Parameter.empty and parameter.name != "rounding"
    }
    with pytest.raises(InvalidParameterError, match=r"^rounding must be 'up' .* or 'down'"):
        function(**required, rounding=bad)
