"""Data: public domains, file loaders, encoders to bin indices, synthetic generators.

The path from a data file to bin indices is :func:`load_values` (streaming,
one value per user); :func:`encode_values` does the same for values already
in memory. Both need the public domain: :func:`parse_domain`,
:func:`read_domain_file` or :func:`builtin_domain`.
"""

from shuffledp.data.domains import (
    BUILTIN_DOMAINS,
    builtin_domain,
    builtin_domain_names,
    parse_domain,
    read_domain_file,
)
from shuffledp.data.encoding import DEFAULT_NA_VALUES, EncodedColumn, encode_values, sorted_domain
from shuffledp.data.ingest import LoadedValues, load_values
from shuffledp.data.loaders import ColumnReader, read_column
from shuffledp.data.synthetic import zipf_histogram, zipf_values
from shuffledp.data.users import PER_USER_POLICIES

__all__ = [
    "BUILTIN_DOMAINS",
    "DEFAULT_NA_VALUES",
    "PER_USER_POLICIES",
    "ColumnReader",
    "EncodedColumn",
    "LoadedValues",
    "builtin_domain",
    "builtin_domain_names",
    "encode_values",
    "load_values",
    "parse_domain",
    "read_column",
    "read_domain_file",
    "sorted_domain",
    "zipf_histogram",
    "zipf_values",
]
