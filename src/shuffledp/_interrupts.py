"""Telling Ctrl-C apart from the errors it can surface as.

A SIGINT that arrives while a C extension module initialises (scipy's
``pypocketfft`` does) surfaces as ``ImportError: initialization failed`` whose
cause is the ``KeyboardInterrupt``; code that turns import errors into its own
errors must not turn that one into "install the extra".
"""

from __future__ import annotations

__all__ = ["caused_by_interrupt"]


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a ``KeyboardInterrupt`` is ``exc`` or in its chain of causes and contexts."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False
