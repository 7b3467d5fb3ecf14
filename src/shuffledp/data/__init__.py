"""Data: loaders (CSV/Parquet), encoders to bin indices, synthetic generators."""

from shuffledp.data.encoding import EncodedColumn, encode_values, parse_domain, sorted_domain
from shuffledp.data.loaders import read_column
from shuffledp.data.synthetic import zipf_histogram, zipf_values

__all__ = [
    "EncodedColumn",
    "encode_values",
    "parse_domain",
    "read_column",
    "sorted_domain",
    "zipf_histogram",
    "zipf_values",
]
