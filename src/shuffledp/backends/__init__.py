"""Where the data-parallel steps run: in this process (numpy) or on Apache Spark.

The analyzer's aggregation (read batches, decrypt, decode, count, combine) and
large message-level simulations run on a :class:`~shuffledp.backends.base.Backend`:

* :class:`~shuffledp.backends.local.LocalBackend`: pyarrow and numpy, streaming
  in chunks with bounded memory;
* :class:`~shuffledp.backends.spark.SparkBackend`: the same kernels in Spark
  ``mapInArrow`` tasks (the ``spark`` extra), with the analyzer's key broadcast
  to the executors.

Both return the same counts, bit for bit, on the same input. Messages are read
from a :class:`~shuffledp.backends.dataset.MessageDataset` (Parquet files plus
a metadata file; the layout is in :mod:`shuffledp.backends.dataset`). Protocol
code (debiasing, estimates, privacy reports) never sees a backend.

Layering: this package sits above :mod:`shuffledp.service`. It imports the
analyzer's store interfaces (:mod:`shuffledp.service.store_protocols`), the
wire format (:mod:`shuffledp.service.wire`) and the task
(:mod:`shuffledp.service.task`); nothing in :mod:`shuffledp.service` imports a
backend (``tests/unit/test_layering.py`` keeps the arrow one way).
"""

from __future__ import annotations

from typing import Any

from shuffledp.backends.base import BACKENDS, Backend, make_backend
from shuffledp.backends.counts import BinTriples, MessageCounts
from shuffledp.backends.dataset import (
    DATASET_FORMAT,
    METADATA_FILE,
    DatasetBatch,
    DatasetWriter,
    MessageDataset,
    export_analyzer_store,
    open_dataset,
)
from shuffledp.backends.local import LocalBackend
from shuffledp.backends.simulation import SimulationPlan

__all__ = [
    "BACKENDS",
    "DATASET_FORMAT",
    "METADATA_FILE",
    "Backend",
    "BinTriples",
    "DatasetBatch",
    "DatasetWriter",
    "LocalBackend",
    "MessageCounts",
    "MessageDataset",
    "SimulationPlan",
    "SparkBackend",
    "export_analyzer_store",
    "make_backend",
    "open_dataset",
]


def __getattr__(name: str) -> Any:
    """Import :class:`SparkBackend` (and pyspark) only when it is asked for."""
    if name == "SparkBackend":
        from shuffledp.backends.spark import SparkBackend

        return SparkBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
