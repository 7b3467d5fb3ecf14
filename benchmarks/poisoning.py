"""One malicious client against one bin's estimate (issue 18 §2); prints one JSON object.

Setting. A protocol is calibrated for n users; n − 1 of them are honest (Zipf
data) and run the protocol's message path (randomizer, shuffler, analyzer).
The last client is the adversary's: it sends whatever the protocol lets one
client send, every message aimed at one target bin j. The shift is

    ĥ_j(honest messages + the client's) − ĥ_j(honest messages alone),

everything else fixed (the same honest messages and the same shuffler
randomness, so the difference is the client's doing alone). It is reported
analytically (largest and expected shift) and measured on the message path
over ``--repeats`` runs (largest and mean), and in units of the per-bin
standard error, next to what one honest client holding j contributes (1 in
expectation: the estimators are unbiased).

* FLIP (Cheu & Zhilyaev, IEEE S&P 2022): the messages carry bin indices
  only, so a client can send any number m of messages of value j, each adding
  1/(1 − 2q) to ĥ_j. Rows: m = k + 1 (every one of its k + 1 reports sets bit
  j, an output the honest randomizer can produce), and m = the services'
  per-submission cap (``FlipSpec.max_messages``, which the shuffler enforces);
  without a cap the shift is unbounded.
* augmented (Murakami, Sei & Eriguchi, arXiv 2504.07362): a client sends one
  ciphertext of one value; the shuffler keeps it with probability β, so the
  shift is 1/β when kept and 0 otherwise (expected 1, as for an honest client).
* correlated (Ghazi, Kumar, Manurangsi & Pagh, ICML 2020; Ghazi et al., ICML
  2021): a message is any (j, ±1), each (j, +1) adding 1 to ĥ_j. An honest
  client's message count is unbounded (negative binomial shares), so rows are
  an honest client's expected count and the count it exceeds with probability
  at most the services' tail (1e-30), all sent as (j, +1).

Adding a protocol (e.g. ``correlated``): write a function with the signature
of :func:`flip_rows` returning rows with the keys of :func:`_row`, and add it
to :data:`PROTOCOLS`.

Usage: python benchmarks/poisoning.py [--n N] [--domain-size D] [--epsilon E]
[--delta DELTA] [--repeats R] [--protocols flip,augmented]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from shuffledp.data.synthetic import zipf_values
from shuffledp.messages import MessageBatch
from shuffledp.protocols.augmented import AugmentedProtocol
from shuffledp.protocols.correlated import CorrelatedProtocol
from shuffledp.protocols.flip import FlipProtocol
from shuffledp.service.task import MESSAGE_TAIL_PROBABILITY
from shuffledp.shuffler.uniform import UniformShuffler
from shuffledp.specs import FlipSpec


@dataclass(frozen=True)
class Setting:
    """What every protocol's rows are computed for."""

    n: int
    domain_size: int
    epsilon: float
    delta: float
    repeats: int
    seed: int
    target: int  # the bin the adversary pushes (the least popular Zipf bin)


def _row(
    protocol: str,
    attack: str,
    messages: int,
    max_analytic: float,
    mean_analytic: float,
    measured: list[float],
    stderr: float,
    parameters: dict[str, Any],
) -> dict[str, Any]:
    return {
        "protocol": protocol,
        "attack": attack,
        "malicious_messages": messages,
        "max_shift_analytic": max_analytic,
        "expected_shift_analytic": mean_analytic,
        "max_shift_measured": max(measured),
        "mean_shift_measured": float(np.mean(measured)),
        "runs": len(measured),
        "per_bin_stderr": stderr,
        "max_shift_in_stderrs": max_analytic / stderr,
        "parameters": parameters,
    }


def _honest_values(setting: Setting) -> np.ndarray:
    return zipf_values(setting.n - 1, setting.domain_size, seed=setting.seed)


def _target_shift(protocol: Any, base: Any, mixed: Any, target: int) -> float:
    """ĥ_target(mixed) − ĥ_target(base): the client's messages' doing alone."""
    before = protocol.estimate(protocol.statistic_from_messages(base)).counts
    after = protocol.estimate(protocol.statistic_from_messages(mixed)).counts
    return float(after[target] - before[target])


def _appended_shifts(
    protocol: Any,
    values: np.ndarray,
    payload: int,
    m: int,
    setting: Setting,
    rng: np.random.Generator,
) -> list[float]:
    """The target bin's shift when one client appends m messages ``payload``, per repeat.

    Each repeat draws the honest messages and one shuffle seed, and shuffles the
    batch with and without the client's messages under that seed.
    """
    measured = []
    for _ in range(setting.repeats):
        honest = protocol.randomize(values, rng)
        shuffle_seed = int(rng.integers(2**63))
        base = UniformShuffler().shuffle(honest, seed=shuffle_seed)
        attacked = MessageBatch(
            payload=np.concatenate([honest.payload, np.full(m, payload)]),
            sender=np.concatenate([honest.sender, np.full(m, setting.n - 1)]),
            n_users=setting.n,
        )
        mixed = UniformShuffler().shuffle(attacked, seed=shuffle_seed)
        measured.append(_target_shift(protocol, base, mixed, setting.target))
    return measured


def flip_rows(setting: Setting) -> list[dict[str, Any]]:
    """FLIP: the client's m messages of value j, each worth 1/(1 − 2q)."""
    protocol = FlipProtocol.calibrated(
        setting.n, setting.domain_size, setting.epsilon, setting.delta
    )
    cal = protocol.calibration
    q, k = cal.q, cal.fake_users
    cap = FlipSpec(q, k).max_messages(setting.domain_size)
    values = _honest_values(setting)
    rng = np.random.default_rng(setting.seed + 1)
    rows = []
    attacks = (
        ("k + 1 reports all on j: an output the randomizer can produce (message model)", k + 1),
        ("as many messages as the services' per-submission cap lets through", cap),
    )
    for attack, m in attacks:
        measured = _appended_shifts(protocol, values, setting.target, m, setting, rng)
        shift = m / (1.0 - 2.0 * q)
        rows.append(
            _row("flip", attack, m, shift, shift, measured, cal.stderr, {"q": q, "fake_users": k})
        )
    return rows


def augmented_rows(setting: Setting) -> list[dict[str, Any]]:
    """Augmented: one ciphertext of value j, kept with probability β."""
    rows = []
    values = _honest_values(setting)
    for beta in (1.0, 0.8):
        protocol = AugmentedProtocol.calibrated(
            setting.n, setting.domain_size, setting.epsilon, setting.delta, beta=beta
        )
        cal = protocol.calibration
        honest = protocol.client.randomize(values)
        attacked = protocol.client.randomize(np.append(values, setting.target))
        rng = np.random.default_rng(setting.seed + 2)
        measured = []
        for _ in range(setting.repeats):
            seed = int(rng.integers(2**63))  # the same shuffler draws with and without it
            base = UniformShuffler().shuffle(protocol.randomizer.augment(honest, seed), seed=seed)
            mixed = UniformShuffler().shuffle(
                protocol.randomizer.augment(attacked, seed), seed=seed
            )
            measured.append(_target_shift(protocol, base, mixed, setting.target))
        rows.append(
            _row(
                "augmented",
                f"one valid ciphertext of value j (beta = {cal.beta:g})",
                1,
                1.0 / cal.beta,
                1.0,
                measured,
                cal.per_bin_std,
                {"variant": cal.variant, "beta": cal.beta, "nu": cal.nu},
            )
        )
    return rows


def _correlated_message_cap(protocol: CorrelatedProtocol, tail: float) -> int:
    """Smallest c with P[an honest client sends more than c messages] ≤ ``tail``.

    Its count is 1 + A + A′ + 2W, A + A′ ~ NB(2d/m, α), W ~ NB(d·r/m, q) (the
    shares of all d bins added), summed exactly on a grid.
    """
    from scipy.stats import nbinom

    cal = protocol.calibration
    d, m = cal.domain_size, cal.min_honest
    size = 1 << 16
    grid = np.arange(size)
    two_sided = nbinom.pmf(grid, 2.0 * d / m, 1.0 - cal.alpha)
    flood = np.zeros(size)
    flood[0::2] = nbinom.pmf(grid[: size // 2], d * cal.flood_r / m, 1.0 - cal.flood_q)
    total = np.convolve(two_sided, flood)[:size]
    above = np.cumsum(total[::-1])[::-1]  # above[c] = P[A + A′ + 2W ≥ c] on the grid
    assert above[-1] <= tail * 1e-3, "the grid is too short for this tail"
    return int(np.argmax(above <= tail))  # 1 + S > c exactly when S ≥ c


def correlated_rows(setting: Setting) -> list[dict[str, Any]]:
    """Correlated: any number of (j, +1) messages, each worth 1."""
    protocol = CorrelatedProtocol.calibrated(
        setting.n, setting.domain_size, setting.epsilon, setting.delta
    )
    cal = protocol.calibration
    values = _honest_values(setting)
    rng = np.random.default_rng(setting.seed + 3)
    target = 2 * setting.target  # the payload of (j, +1)
    rows = []
    attacks = (
        ("an honest client's expected message count, all (j, +1)",
         max(1, round(cal.expected_messages_per_user))),
        ("the count an honest client exceeds with probability 1e-30, all (j, +1)",
         _correlated_message_cap(protocol, MESSAGE_TAIL_PROBABILITY)),
    )  # fmt: skip
    for attack, m in attacks:
        measured = _appended_shifts(protocol, values, target, m, setting, rng)
        rows.append(
            _row(
                "correlated", attack, m, float(m), float(m), measured,
                cal.per_bin_std_all_users,
                {"a": cal.a, "r": cal.flood_r, "q": cal.flood_q, "min_honest": cal.min_honest},
            )
        )  # fmt: skip
    return rows


#: Protocol name → the function computing its rows.
PROTOCOLS: dict[str, Callable[[Setting], list[dict[str, Any]]]] = {
    "flip": flip_rows,
    "augmented": augmented_rows,
    "correlated": correlated_rows,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--domain-size", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    args = parser.parse_args()
    names = [name.strip() for name in args.protocols.split(",") if name.strip()]
    unknown = [name for name in names if name not in PROTOCOLS]
    if unknown:
        parser.error(f"unknown protocol(s) {', '.join(unknown)}; known: {', '.join(PROTOCOLS)}")
    setting = Setting(
        args.n, args.domain_size, args.epsilon, args.delta, args.repeats, args.seed,
        target=args.domain_size - 1,
    )  # fmt: skip
    start = time.perf_counter()
    rows = [row for name in names for row in PROTOCOLS[name](setting)]
    result = {
        "n": setting.n,
        "domain_size": setting.domain_size,
        "epsilon": setting.epsilon,
        "delta": setting.delta,
        "target_bin": setting.target,
        "repeats": setting.repeats,
        "honest_client_expected_shift": 1.0,
        "rows": rows,
        "seconds": time.perf_counter() - start,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
    }
    assert all(math.isfinite(row["max_shift_analytic"]) for row in rows)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
