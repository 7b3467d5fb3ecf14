"""Client, shuffler and analyzer as separate processes (the deployment path).

The three roles of the shuffle model run as services that talk HTTP (Starlette
under uvicorn on the server side, httpx on the client side):

* :mod:`~shuffledp.service.client`: a user's device. It runs the protocol's
  randomizer for one user, encrypts every message separately to the analyzer
  (HPKE, :mod:`~shuffledp.service.wire`) and posts them to the shuffler with an
  idempotency key.
* :mod:`~shuffledp.service.shuffler`: collects submissions it cannot read,
  cuts a batch once at least ``min_batch_users`` users are waiting, applies one
  CSPRNG permutation to all their messages, forgets which submission sent which
  message, and forwards the batch to the analyzer.
* :mod:`~shuffledp.service.analyzer`: decrypts and counts each batch exactly
  once and publishes an estimate in the same JSON shape as ``shuffledp run``
  (:mod:`~shuffledp.service.release`).

A :mod:`~shuffledp.service.task` document fixes everything public about one
collection: the protocol and its calibrated parameters, the domain, the
minimum batch size and the analyzer's public key. State lives in a store
(the interfaces in :mod:`~shuffledp.service.store_protocols`, opened from its URL by
:mod:`~shuffledp.service.store`: SQLite in :mod:`~shuffledp.service.sqlite_store`,
PostgreSQL in :mod:`~shuffledp.service.postgres_store`).

These modules need the ``service`` extra: ``pip install 'shuffledp[service]'``.

Layering: :mod:`shuffledp.backends` sits above this package and this package
never imports it. The backends read the analyzer's store through its interfaces
(:mod:`~shuffledp.service.store_protocols`), open messages with
:mod:`~shuffledp.service.wire` and take the :class:`~shuffledp.service.task.Task`;
the analyzer service decrypts and counts its batches itself
(``tests/unit/test_layering.py`` keeps the arrow one way).
"""

from __future__ import annotations

from shuffledp._lazy import lazy_exports

__all__ = ["Client", "Task", "create_task", "fetch_task", "load_task", "save_task"]

# Imported on first use, so that ``shuffledp.service._extra`` can name the
# missing extra before anything needs it.
_LAZY = {
    "Client": "shuffledp.service.client",
    "fetch_task": "shuffledp.service.client",
    "Task": "shuffledp.service.task",
    "create_task": "shuffledp.service.task",
    "load_task": "shuffledp.service.task",
    "save_task": "shuffledp.service.task",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
