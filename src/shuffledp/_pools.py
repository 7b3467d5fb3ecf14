"""Process pools that stop at once on Ctrl-C, without a traceback from every worker.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group: the
workers of a :class:`~concurrent.futures.ProcessPoolExecutor` would each
print a ``KeyboardInterrupt`` traceback, and leaving the ``with`` block would
wait for the jobs still running. :func:`worker_pool` makes the workers ignore
SIGINT (the parent alone decides) and, when the parent is interrupted or
fails, cancels the queued jobs and terminates the workers.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

__all__ = ["worker_pool"]


def _start_worker(initializer: Callable[[], object] | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer()


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)


@contextmanager
def worker_pool(
    max_workers: int, initializer: Callable[[], object] | None = None
) -> Iterator[ProcessPoolExecutor]:
    """A :class:`ProcessPoolExecutor` whose workers ignore SIGINT and die with their parent's job.

    Args:
        max_workers: Worker processes.
        initializer: Run in every worker after SIGINT is ignored (a module-level
            function, as the pool pickles it).

    On normal exit the pool shuts down as usual (waiting for its jobs); on
    any exception, ``KeyboardInterrupt`` included, queued jobs are cancelled
    and the workers terminated before the exception propagates.
    """
    pool = ProcessPoolExecutor(
        max_workers=max_workers, initializer=_start_worker, initargs=(initializer,)
    )
    try:
        yield pool
    except BaseException:
        _terminate(pool)
        raise
    pool.shutdown(wait=True)
