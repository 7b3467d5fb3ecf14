"""The backend interface: the data-parallel steps of the analyzer and of large simulations.

A backend runs four steps on messages, and nothing else:

1. read batches (a :class:`~shuffledp.backends.dataset.MessageDataset`, or
   the tasks of a :class:`~shuffledp.backends.simulation.SimulationPlan`);
2. decrypt (ciphertexts, with the analyzer's key);
3. decode to bins (:mod:`shuffledp.backends.kernels`);
4. count per (batch, bin) and combine (:mod:`shuffledp.backends.counts`).

It returns :class:`~shuffledp.backends.counts.MessageCounts`. Everything the
protocols do with counts (debiasing, estimates, privacy reports, the release)
stays on the driver and knows no backend, as in PipelineDP's split between
the pipeline and its local, Spark or Beam backend.
"""

from __future__ import annotations

import sys
from typing import Literal, Protocol

from shuffledp._validation import InvalidParameterError
from shuffledp.backends.counts import MessageCounts
from shuffledp.backends.dataset import MessageDataset
from shuffledp.backends.simulation import SimulationPlan

__all__ = ["BACKENDS", "Backend", "BackendName", "make_backend"]

BackendName = Literal["local", "spark"]
#: Names accepted by :func:`make_backend` and the ``--backend`` options.
BACKENDS: tuple[str, ...] = ("local", "spark")


class Backend(Protocol):
    """Where the data-parallel steps run (:class:`LocalBackend`, :class:`SparkBackend`)."""

    name: str

    def count(self, dataset: MessageDataset, *, private_key: bytes | None = None) -> MessageCounts:
        """Read, decrypt (ciphertexts), decode and count every message of a dataset.

        Messages that do not decrypt or decode are counted as such, never fatal.

        Args:
            dataset: The messages.
            private_key: The analyzer's raw X25519 private key (ciphertexts only).
        """
        ...

    def simulate(self, plan: SimulationPlan) -> MessageCounts:
        """Generate every task's messages, shuffle them (sort by key) and count per replicate."""
        ...

    def permute(self, dataset: MessageDataset, location: str) -> MessageDataset:
        """Write a copy of the dataset with each batch's messages in uniformly random order."""
        ...

    def close(self) -> None:
        """Release what the backend started (a Spark session it created)."""
        ...


def make_backend(name: str, *, spark_master: str | None = None) -> Backend:
    """Return a backend by name: ``"local"`` or ``"spark"`` (``spark_master`` for Spark only).

    Raises:
        InvalidParameterError: On an unknown name, or a master given to the local backend.
        MissingExtraError: If Spark is asked for and pyspark is not installed.
    """
    if name == "local":
        if spark_master is not None:
            raise InvalidParameterError("--spark-master needs --backend spark")
        from shuffledp.backends.local import LocalBackend

        return LocalBackend()
    if name == "spark":
        from shuffledp.backends.spark import SparkBackend

        # Spark's stage bars are for a terminal; elsewhere they only clutter the log.
        quiet = {} if sys.stderr.isatty() else {"spark.ui.showConsoleProgress": "false"}
        return SparkBackend(master=spark_master, config=quiet)
    raise InvalidParameterError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
