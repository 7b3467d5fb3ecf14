"""Data: public domains, file loaders, encoders to bin indices, synthetic generators.

The path from a data file to bin indices is :func:`load_values` (streaming,
one value per user), and to the histogram :func:`load_histogram` (counted
chunk by chunk: memory bounded by the domain and the chunk without a user
column); :func:`encode_values` does the same for values already in memory.
All need the public domain: :func:`parse_domain`, :func:`read_domain_file` or
:func:`builtin_domain`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shuffledp._lazy import lazy_exports

if TYPE_CHECKING:
    from shuffledp.data.domains import (
        BUILTIN_DOMAINS,
        builtin_domain,
        builtin_domain_names,
        parse_domain,
        read_domain_file,
    )
    from shuffledp.data.encoding import (
        DEFAULT_NA_VALUES,
        EncodedColumn,
        encode_values,
        sorted_domain,
    )
    from shuffledp.data.ingest import LoadedHistogram, LoadedValues, load_histogram, load_values
    from shuffledp.data.loaders import ColumnReader, read_column
    from shuffledp.data.synthetic import zipf_histogram, zipf_values
    from shuffledp.data.users import PER_USER_POLICIES

__all__ = [
    "BUILTIN_DOMAINS",
    "DEFAULT_NA_VALUES",
    "PER_USER_POLICIES",
    "ColumnReader",
    "EncodedColumn",
    "LoadedHistogram",
    "LoadedValues",
    "builtin_domain",
    "builtin_domain_names",
    "encode_values",
    "load_histogram",
    "load_values",
    "parse_domain",
    "read_column",
    "read_domain_file",
    "sorted_domain",
    "zipf_histogram",
    "zipf_values",
]

#: Where each re-exported name lives, imported on first use: the light modules
#: (``shuffledp.data.domains``) can be imported without numpy or the loaders.
_LAZY: dict[str, str] = {
    "builtin_domain": "shuffledp.data.domains",
    "builtin_domain_names": "shuffledp.data.domains",
    "BUILTIN_DOMAINS": "shuffledp.data.domains",
    "ColumnReader": "shuffledp.data.loaders",
    "DEFAULT_NA_VALUES": "shuffledp.data.encoding",
    "encode_values": "shuffledp.data.encoding",
    "EncodedColumn": "shuffledp.data.encoding",
    "load_histogram": "shuffledp.data.ingest",
    "load_values": "shuffledp.data.ingest",
    "LoadedHistogram": "shuffledp.data.ingest",
    "LoadedValues": "shuffledp.data.ingest",
    "parse_domain": "shuffledp.data.domains",
    "PER_USER_POLICIES": "shuffledp.data.users",
    "read_column": "shuffledp.data.loaders",
    "read_domain_file": "shuffledp.data.domains",
    "sorted_domain": "shuffledp.data.encoding",
    "zipf_histogram": "shuffledp.data.synthetic",
    "zipf_values": "shuffledp.data.synthetic",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
