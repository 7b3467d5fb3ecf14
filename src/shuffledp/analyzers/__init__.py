"""Analyzers: debiasing estimators, error summaries and top-t selection."""

from shuffledp.analyzers.error import expected_max_abs_normal
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.analyzers.flip_debias import FlipAnalyzer, flip_count_stderr
from shuffledp.analyzers.top_t import TopTMetrics, top_t, top_t_metrics

__all__ = [
    "FlipAnalyzer",
    "HistogramEstimate",
    "TopTMetrics",
    "expected_max_abs_normal",
    "flip_count_stderr",
    "top_t",
    "top_t_metrics",
]
