"""Top-t selection from a histogram estimate and the FLIP paper's metrics (Def. II.9).

Source: A. Cheu and M. Zhilyaev, "Differentially private histograms in the shuffle model
from fake users", IEEE S&P 2022, arXiv 2104.02739.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import InvalidParameterError, check_int

__all__ = ["TopTMetrics", "top_t", "top_t_metrics"]


def top_t(scores: NDArray[np.floating] | NDArray[np.integer], t: int) -> NDArray[np.int64]:
    """Return the indices of the t largest entries (the paper's top_t), ties to the lower index.

    The rank of the paper (Sec. II-D) is the position after a descending sort;
    a stable sort on −h makes it deterministic.
    """
    arr = np.asarray(scores, dtype=np.float64)
    t = check_int(t, "t", minimum=1, maximum=arr.shape[0])
    order = np.argsort(-arr, kind="stable")
    return np.sort(order[:t]).astype(np.int64)


@dataclass(frozen=True)
class TopTMetrics:
    """How well a candidate set approximates the true top-t items.

    Attributes:
        t: Number of items selected.
        alpha: The least α for which the candidates α-approximate the top t
            (Def. II.9 holds for every α > ``alpha``); ≤ 0 means every candidate
            is at least as frequent as the t-th largest item.
        precision: Fraction of candidates that are in the true top t.
        recall: Fraction of the true top t among the candidates (equal to
            precision when both sets have t elements).
    """

    t: int
    alpha: float
    precision: float
    recall: float


def top_t_metrics(
    candidates: NDArray[np.integer], true_counts: NDArray[np.integer] | NDArray[np.floating], t: int
) -> TopTMetrics:
    """Evaluate ``candidates`` against the true histogram (Def. II.9, precision, recall).

    Args:
        candidates: Selected bin indices, t of them, distinct.
        true_counts: The true histogram.
        t: Number of top items.
    """
    hist = np.asarray(true_counts, dtype=np.float64)
    cand = np.asarray(candidates, dtype=np.int64)
    t = check_int(t, "t", minimum=1, maximum=hist.shape[0])
    if cand.shape != (t,) or len(np.unique(cand)) != t:
        raise InvalidParameterError(f"candidates must be {t} distinct bin indices")
    truth = top_t(hist, t)
    t_th = float(np.sort(hist)[::-1][t - 1])
    alpha = t_th - float(hist[cand].min())
    hits = len(np.intersect1d(cand, truth))
    return TopTMetrics(t=t, alpha=alpha, precision=hits / t, recall=hits / len(truth))
