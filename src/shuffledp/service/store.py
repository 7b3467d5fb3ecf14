"""Open the shuffler's or the analyzer's store from its URL (SQLite or PostgreSQL).

The store URL picks the implementation: ``sqlite:///PATH`` opens
:mod:`shuffledp.service.sqlite_store`, ``postgresql://…`` or ``postgres://…``
:mod:`shuffledp.service.postgres_store` (psycopg is imported only then). Both
are the same two classes, :mod:`shuffledp.service.sql_store`, written once over
a SQL dialect (:mod:`shuffledp.service.sql_dialect`). What a store holds and
the operations it offers are the interfaces in
:mod:`shuffledp.service.store_protocols`, re-exported here so that
``from shuffledp.service.store import AnalyzerStore`` keeps working.

The store modules import one way: this factory imports the implementations
(inside the functions); they import :mod:`~shuffledp.service.sql_store` and
:mod:`~shuffledp.service.sql_dialect`, which import no backend, and all of
them import :mod:`~shuffledp.service.store_common` (helpers) and
:mod:`~shuffledp.service.store_protocols`; none of those imports back.
"""

from __future__ import annotations

from pathlib import Path

from shuffledp._validation import InvalidParameterError
from shuffledp.service.store_protocols import (
    AggregateTotals,
    Aggregation,
    AnalyzerStore,
    BatchConflictError,
    ClientAlreadySubmittedError,
    NewSubmission,
    OutboxBatch,
    ReceivedBatch,
    ShufflerStore,
    StoreError,
    SubmitOutcome,
)

__all__ = [
    "AggregateTotals",
    "Aggregation",
    "AnalyzerStore",
    "BatchConflictError",
    "ClientAlreadySubmittedError",
    "NewSubmission",
    "OutboxBatch",
    "ReceivedBatch",
    "ShufflerStore",
    "StoreError",
    "SubmitOutcome",
    "check_store_url",
    "open_analyzer_store",
    "open_shuffler_store",
    "sqlite_path",
]


def sqlite_path(url: str) -> Path:
    """Return the file of a ``sqlite:///PATH`` URL.

    ``sqlite:///data/x.db`` is the relative path ``data/x.db`` and
    ``sqlite:////var/lib/x.db`` the absolute ``/var/lib/x.db`` (SQLAlchemy's
    convention).

    Raises:
        InvalidParameterError: If ``url`` is not such a URL.
    """
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise InvalidParameterError(
            f"store URL must look like sqlite:///relative/path.db or sqlite:////abs/path.db, "
            f"got {url!r}"
        )
    return Path(url[len(prefix) :])


_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def check_store_url(url: str) -> None:
    """Check that ``url`` names a supported store (before anything is started).

    Nothing is opened or contacted: a PostgreSQL URL is only parsed.

    Raises:
        InvalidParameterError: If it does not.
        MissingExtraError: For a PostgreSQL URL without psycopg (the ``service`` extra).
    """
    if url.startswith(_POSTGRES_SCHEMES):
        from shuffledp.service.postgres_store import check_postgres_url

        check_postgres_url(url)
        return
    if not url.startswith("sqlite:///"):
        from shuffledp.service.postgres_store import redact_url

        raise InvalidParameterError(
            "store URL must be sqlite:///relative/path.db, sqlite:////abs/path.db or "
            f"postgresql://[USER@]HOST[:PORT]/DBNAME, got {redact_url(url)!r}"
        )
    sqlite_path(url)


def open_shuffler_store(url: str, task_id: str) -> ShufflerStore:
    """Open (creating if needed) the shuffler's store for one task.

    Raises:
        InvalidParameterError: On an unsupported URL.
        StoreError: If the store belongs to another task or cannot be reached.
    """
    check_store_url(url)
    if url.startswith(_POSTGRES_SCHEMES):
        from shuffledp.service.postgres_store import PostgresShufflerStore

        return PostgresShufflerStore(url, task_id)
    from shuffledp.service.sqlite_store import SQLiteShufflerStore

    return SQLiteShufflerStore(sqlite_path(url), task_id)


def open_analyzer_store(url: str, task_id: str, *, read_only: bool = False) -> AnalyzerStore:
    """Open the analyzer's store for one task (``read_only`` for publishing).

    Raises:
        InvalidParameterError: On an unsupported URL.
        StoreError: If the store belongs to another task, cannot be reached or
            (read-only) does not exist.
    """
    check_store_url(url)
    if url.startswith(_POSTGRES_SCHEMES):
        from shuffledp.service.postgres_store import PostgresAnalyzerStore

        return PostgresAnalyzerStore(url, task_id, read_only=read_only)
    from shuffledp.service.sqlite_store import SQLiteAnalyzerStore

    return SQLiteAnalyzerStore(sqlite_path(url), task_id, read_only=read_only)
