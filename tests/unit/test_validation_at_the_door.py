"""Validation at the door: a public call checks its inputs once; its search runs kernels.

A calibration's public entry validates what it was given (the ``check_*``
functions of :mod:`shuffledp._validation`), and its search then evaluates the
certificate's unchecked kernel, never the public, validating function. Before
this was so, ``calibrate_correlated(10_000, 100, 1.0, 1e-6)`` made 2663 checks
(ε 890 times: its search called the public ``correlated_delta`` at every step;
later 21, ε 10 times, through the public ``cheapest_flooding``,
``flooding_floor`` and ``central_dlap_parameter``), and ``calibrate_flip_q``
checked ε, q, k and n at every q its search tried (154 checks at n = 1e4, where
4 remain).

Each test counts every validator call during one public call, at two targets
whose searches differ in length (the kernel's evaluations are counted too, so
a search that ran from a cache cannot pass for one that checks nothing), and
asserts that the checks are few, that the count is the same at both targets
(nothing is checked per step) and, for the accountant's own searches, that no
input is checked more than once (twice where the public call hands it to one
public function after its search, or a check delegates to another).

Not counted here (tallied apart): checks made inside the numerical core
(``accounting/numerics``, which checks its own ``rounding`` argument and its
pairs' fields, per line or pair) and by value types' ``__post_init__`` (a law
or mechanism built for each candidate of a search checks its own fields).
"""

from __future__ import annotations

import collections
import functools
import gc
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from shuffledp import _validation
from shuffledp.accounting.certificates import augmented as augmented_accountant
from shuffledp.accounting.certificates import correlated as correlated_accountant
from shuffledp.accounting.certificates import flip as flip_accountant
from shuffledp.accounting.certificates import krr as krr_accountant

_VALIDATORS = tuple(name for name in _validation.__all__ if name.startswith("check_"))
_NUMERICS = str(Path("accounting") / "numerics")


@dataclass
class Tally:
    """Validator calls during one public call, by where they were made.

    Attributes:
        door: Checks made by functions outside the numerical core, by the
            parameter name they check (their ``name`` argument).
        callers: The same checks by validator and calling function.
        numerics: Checks made inside ``accounting/numerics``.
        values: Checks made by value types' ``__post_init__``.
        kernel: Evaluations of the search's kernel (for a vectorized kernel, the
            points it was evaluated at).
    """

    door: collections.Counter[str] = field(default_factory=collections.Counter)
    callers: collections.Counter[str] = field(default_factory=collections.Counter)
    numerics: int = 0
    values: int = 0
    kernel: int = 0

    def record(self, validator: str, name: str, caller: Any) -> None:
        """File one check made by the code object ``caller``."""
        if _NUMERICS in caller.co_filename:
            self.numerics += 1
        elif caller.co_name == "__post_init__":
            self.values += 1
        else:
            self.door[name] += 1
            where = Path(caller.co_filename).stem
            self.callers[f"{validator} <- {where}.{caller.co_name}"] += 1

    @property
    def total(self) -> int:
        """Checks made at the doors (what the tests bound)."""
        return sum(self.door.values())


def _package_modules() -> list[ModuleType]:
    return [
        module
        for name, module in list(sys.modules.items())
        if module is not None and (name == "shuffledp" or name.startswith("shuffledp."))
    ]


def _clear_caches() -> None:
    """Empty every in-memory cache of the package, so the counted call runs its search."""
    for obj in gc.get_objects():
        if isinstance(obj, functools._lru_cache_wrapper) and str(
            getattr(obj, "__module__", "")
        ).startswith("shuffledp"):
            obj.cache_clear()


@contextmanager
def counting(
    kernel: tuple[ModuleType, str], points: Callable[..., int] | None = None
) -> Iterator[Tally]:
    """Count validator calls (the outermost of nested ones) and the kernel's evaluations.

    Every module of the package that imported a validator gets a counting
    wrapper in its place, undone on exit. Import what the call needs first: a
    module imported during the count keeps the uncounted validators.
    """
    tally = Tally()
    depth = 0
    patch = pytest.MonkeyPatch()

    def wrap(validator: str, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            nonlocal depth
            if depth == 0:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                name = str(bound.arguments.get("name", validator))
                tally.record(validator, name, sys._getframe(1).f_code)
            depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                depth -= 1

        return wrapper

    try:
        for validator in _VALIDATORS:
            original = getattr(_validation, validator)
            wrapper = wrap(validator, original)
            for module in _package_modules():
                if vars(module).get(validator) is original:
                    patch.setattr(module, validator, wrapper)
        module, name = kernel
        evaluate = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            tally.kernel += 1 if points is None else points(*args, **kwargs)
            return evaluate(*args, **kwargs)

        patch.setattr(module, name, counted)
        _clear_caches()
        yield tally
    finally:
        patch.undo()


def _tallies(
    call: Callable[[float], object],
    kernel: tuple[ModuleType, str],
    targets: tuple[float, ...],
    points: Callable[..., int] | None = None,
) -> list[Tally]:
    call(targets[0] * 10.0)  # imports everything the call needs, away from the targets
    found = []
    for target in targets:
        with counting(kernel, points) as tally:
            call(target)
        found.append(tally)
    return found


def _assert_no_check_per_step(tallies: list[Tally]) -> None:
    """The search ran, and the two targets' searches (of different lengths) checked alike."""
    first, *others = tallies
    assert first.kernel > 1, "the search did not run: nothing was measured"
    for other in others:
        assert other.kernel != first.kernel, "both searches took as many steps: pick targets"
        assert other.door == first.door, (
            f"checks change with the search's length: {dict(first.callers)} against "
            f"{dict(other.callers)}"
        )


def _assert_checked_at_the_door(tallies: list[Tally], *, total: int, each: int | None = 1) -> None:
    """No check per step, at most ``total`` checks, no input checked more than ``each`` times.

    ``each=None`` for a protocol's calibration, which asks several public questions
    after its search (the certified δ, a lower bound, ...), each checking its inputs.
    """
    _assert_no_check_per_step(tallies)
    shown = f"door checks by caller: {dict(tallies[0].callers)}"
    assert tallies[0].total <= total, shown
    if each is not None:
        assert max(tallies[0].door.values(), default=0) <= each, shown


# -- (a) the correlated protocol ------------------------------------------------------------


def test_cheapest_flooding_checks_each_input_once() -> None:
    alpha = correlated_accountant.largest_alpha(1.1 * correlated_accountant.dlap_std(0.5))
    tallies = _tallies(
        lambda delta: correlated_accountant.cheapest_flooding(1.0, delta, alpha),
        (correlated_accountant, "_replacement_delta"),
        (1e-6, 1e-10),
    )
    _assert_checked_at_the_door(tallies, total=3)  # ε, δ, α (171 kernel evaluations)


def test_calibrate_correlated_checks_each_input_once() -> None:
    from shuffledp.protocols.correlated import calibrate_correlated

    tallies = _tallies(
        lambda delta: calibrate_correlated(10_000, 100, 1.0, delta),
        (correlated_accountant, "_replacement_delta"),
        (1e-6, 1e-10),
    )
    # n, d, ε, δ, slack and m, then ε, tail and rounding of the calibration's lower
    # bound (a public correlated_delta): 9, ε twice. It was 21, ε 10 times (2663 when
    # the search called correlated_delta at each of its ~900 steps).
    _assert_checked_at_the_door(tallies, total=9, each=2)


def test_calibrate_correlated_add_remove_checks_each_input_once() -> None:
    from shuffledp.protocols.correlated import calibrate_correlated

    tallies = _tallies(
        lambda delta: calibrate_correlated(100_000, 3, 2.0, delta, neighbours="add-remove"),
        (correlated_accountant, "_single_bin_delta"),  # the proxy its search runs on
        (1e-6, 1e-9),
    )
    _assert_checked_at_the_door(tallies, total=9, each=2)


def test_epsilon_with_fewer_honest_checks_each_input_once() -> None:
    noise = correlated_accountant.CorrelatedNoise(0.7788, 15.76, 0.96)
    tallies = _tallies(
        lambda delta: correlated_accountant.epsilon_with_fewer_honest(delta, noise, 0.5),
        (correlated_accountant, "_generic_bin_delta"),
        (1e-3, 1e-9),
    )
    _assert_checked_at_the_door(tallies, total=1)  # δ (ε, tail, shape at each step before)


# -- (b) FLIP ------------------------------------------------------------------------------


def test_calibrate_flip_q_checks_each_input_once() -> None:
    tallies = _tallies(
        lambda delta: flip_accountant.calibrate_flip_q(1.0, delta, 10_000, 1),
        (flip_accountant, "_symmetric_delta"),
        (1e-6, 1e-12),
    )
    _assert_checked_at_the_door(tallies, total=4)  # ε, δ, n, k (30 kernel evaluations)


def test_flip_lower_bound_checks_each_input_once_over_its_splits() -> None:
    tallies = _tallies(
        lambda n: flip_accountant.flip_delta_lower_bound(0.5, 0.2, 1, int(n), 2),
        (flip_accountant, "_pair_delta"),
        (10.0, 100.0),  # 10 and 33 splits of the other users between the two values
    )
    _assert_checked_at_the_door(tallies, total=5)  # ε, q, k, n, d (236 at n = 100 before)


def test_calibrate_flip_checks_nothing_per_step() -> None:
    from shuffledp.protocols.flip import calibrate_flip

    tallies = _tallies(
        lambda delta: calibrate_flip(10_000, 10, 1.0, delta),
        (flip_accountant, "_symmetric_delta"),
        (1e-6, 1e-12),
    )
    # After its search the protocol asks several public questions once each (the
    # certified δ, a lower bound, the local ε, a randomizer), each checking its own
    # inputs: 29 checks, whatever the search's length (175 and 180 before).
    _assert_checked_at_the_door(tallies, total=30, each=None)


# -- (d) the augmented shuffle ---------------------------------------------------------------


def _nu_points(epsilon: float, nu: Any, *args: Any) -> int:
    """How many shifts ν one call of the vectorized SAGeo block sum evaluates."""
    return len(nu)


def test_calibrate_sageo_nu_checks_each_input_once() -> None:
    tallies = _tallies(
        lambda delta: augmented_accountant.calibrate_sageo_nu(1.0, delta, 0.9),
        (augmented_accountant, "_block_delta"),
        (1e-6, 1e-12),
        _nu_points,
    )
    # ε twice: check_beta(β, ε) checks it again for SAGeo's least β.
    _assert_checked_at_the_door(tallies, total=3, each=2)


def test_calibrate_sbin_trials_checks_each_input_once() -> None:
    tallies = _tallies(
        lambda delta: augmented_accountant.calibrate_sbin_trials(1.0, delta),
        (augmented_accountant, "_on_grid_delta"),
        (1e-6, 1e-12),
    )
    _assert_checked_at_the_door(tallies, total=2)  # ε, δ (17 kernel evaluations)


@pytest.mark.parametrize("variant", ["sageo", "sbin"])
def test_calibrate_augmented_checks_nothing_per_step(variant: str) -> None:
    from shuffledp.protocols.augmented import calibrate_augmented

    kernel = "_block_delta" if variant == "sageo" else "_on_grid_delta"
    tallies = _tallies(
        lambda delta: calibrate_augmented(10_000, 10, 1.0, delta, variant=variant),  # type: ignore[arg-type]
        (augmented_accountant, kernel),
        (1e-6, 1e-12),
        _nu_points if variant == "sageo" else None,
    )
    # SAGeo: the paper's ν and its δ, the search, the law, its certified δ and lower
    # bound, each a public call: 27 checks whatever the search's length.
    _assert_checked_at_the_door(tallies, total=30, each=None)


# -- (c, e) k-RR and the accountant's questions ----------------------------------------------


def test_krr_binary_split_checks_each_input_once_over_its_splits() -> None:
    tallies = _tallies(
        lambda n: krr_accountant.krr_binary_split_delta(0.3, 1.0, int(n)),
        (krr_accountant, "_one_dimensional_delta"),
        (20.0, 200.0),  # every split: 20 and 200
    )
    # rounding, ε, n, ε₀, k = 2 (ε₀ and k again by krr_probabilities): 807 at n = 200 before.
    _assert_checked_at_the_door(tallies, total=6, each=2)


def test_krr_delta_checks_each_input_once() -> None:
    tallies = _tallies(
        lambda eps: krr_accountant.krr_delta(eps, 3.0, 10, 10_000),
        (krr_accountant, "_blanket_mixture"),
        (0.3,),
    )
    # rounding, ε, ε₀, k, n; ε₀ and k again by krr_probabilities (the randomizer's).
    assert tallies[0].kernel == 1
    assert tallies[0].total <= 7, dict(tallies[0].callers)
    assert max(tallies[0].door.values()) <= 2, dict(tallies[0].callers)


def test_calibrate_krr_checks_nothing_per_step() -> None:
    from shuffledp.protocols.krr import calibrate_krr

    tallies = _tallies(
        lambda delta: calibrate_krr(1000, 10, 1.0, delta),
        (krr_accountant, "_blanket_mixture"),
        (1e-4, 1e-10),
    )
    # After its search the protocol asks its public questions once each (the certified
    # delta, the lower bounds, the two-count marginal, the homogeneous bound, the
    # randomizer's probabilities): 31 checks in all, the same at both targets.
    _assert_checked_at_the_door(tallies, total=32, each=None)


def test_amplified_epsilon_checks_nothing_per_step() -> None:
    from shuffledp.accounting import amplified_epsilon

    tallies = _tallies(
        lambda delta: amplified_epsilon(
            delta, n=1000, epsilon0=2.0, mechanism="krr", domain_size=10
        ),
        (krr_accountant, "_blanket_mixture"),
        (1e-6, 1e-10),
    )
    _assert_checked_at_the_door(tallies, total=10, each=2)


def test_calibrate_level_checks_nothing_per_step() -> None:
    from shuffledp.accounting.certificates import segmented

    tallies = _tallies(
        lambda delta: segmented.calibrate_level(
            1.0, delta, message_domain=11, items=2, n=1000, blanket_rate=0.1
        ),
        (segmented, "_level_delta"),
        (1e-6, 1e-10),
    )
    _assert_checked_at_the_door(tallies, total=10, each=2)
