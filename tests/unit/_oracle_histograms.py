"""Brute-force laws of a message histogram, for the segmented protocol's tests (no package code)."""

from __future__ import annotations

from collections import defaultdict

Histogram = tuple[int, ...]
Law = dict[Histogram, float]


def add_message(law: Law, choices: dict[int | None, float]) -> Law:
    """Law of the histogram after one more message drawn from ``choices`` {item or None: prob}."""
    out: dict[Histogram, float] = defaultdict(float)
    for hist, p in law.items():
        for item, q in choices.items():
            if q == 0:
                continue
            if item is None:
                out[hist] += p * q
            else:
                new = list(hist)
                new[item] += 1
                out[tuple(new)] += p * q
    return dict(out)
