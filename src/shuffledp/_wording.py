"""Texts that name a parameter, spelled for Python or for the command line.

The data loaders and protocols are shared by the Python API and the
``shuffledp`` command, so a message that tells the user what to change must
name ``per_user='first'`` in Python and ``--per-user first`` on the command
line. Such a message is a :class:`Worded` string: its value is the Python
spelling (what ``str(exc)`` and the Python objects show) and its
:attr:`Worded.command_line` the command line's, which the CLI prints and
writes into its JSON documents (:func:`for_command_line`,
:func:`command_line_document`, :func:`command_line_message`).

The module also spells counts with their noun (:func:`plural`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Parameter",
    "Worded",
    "command_line_document",
    "command_line_message",
    "for_command_line",
    "plural",
]


@dataclass(frozen=True)
class Parameter:
    """A parameter (with a value or a placeholder) as Python and the command line write it.

    Attributes:
        name: The Python keyword, e.g. ``"per_user"``.
        value: A value to show (``"first"``, ``True``); ``None``: the name alone.
        placeholder: A stand-in for any value (``"LABEL"``, ``"..."``); overrides ``value``.
        flag: The command-line flag; default ``--`` and the name with dashes.

    Example:
        >>> Parameter("per_user", "first").python, Parameter("per_user", "first").command_line
        ("per_user='first'", '--per-user first')
        >>> Parameter("drop_missing", True).command_line
        '--drop-missing'
    """

    name: str
    value: Any = None
    placeholder: str | None = None
    flag: str | None = None

    @property
    def python(self) -> str:
        """``name=value`` (the value as Python writes it), ``name=PLACEHOLDER`` or ``name``."""
        if self.placeholder is not None:
            return f"{self.name}={self.placeholder}"
        if self.value is None:
            return self.name
        return f"{self.name}={self.value!r}"

    @property
    def command_line(self) -> str:
        """``--flag value`` (shell-quoted when needed), ``--flag PLACEHOLDER`` or ``--flag``."""
        flag = self.flag or "--" + self.name.replace("_", "-")
        if self.placeholder is not None:
            return f"{flag} {self.placeholder}"
        if self.value is None or self.value is True:
            return flag
        return f"{flag} {shlex.quote(str(self.value))}"


class Worded(str):
    """A message whose value is its Python spelling; :attr:`command_line` is the CLI's.

    ``template`` uses :meth:`str.format` fields; each is filled with a
    :class:`Parameter` (spelled for each side), another :class:`Worded` (its
    own spellings) or any other value (the same text on both sides; data such
    as file names go here, never into the template, so braces in them are
    safe).

    Example:
        >>> text = Worded("choose {rule}", rule=Parameter("per_user", "first"))
        >>> str(text), text.command_line
        ("choose per_user='first'", 'choose --per-user first')
    """

    command_line: str

    def __new__(cls, template: str, /, **fields: Any) -> Worded:
        python = template.format(**{k: _python(v) for k, v in fields.items()})
        text = super().__new__(cls, python)
        text.command_line = template.format(**{k: for_command_line(v) for k, v in fields.items()})
        return text

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (str(self), self.command_line))


def _rebuild(python: str, command_line: str) -> Worded:
    """Rebuild a pickled :class:`Worded` (e.g. in a worker process's result)."""
    return Worded("{text}", text=_Spelled(python, command_line))


@dataclass(frozen=True)
class _Spelled:
    """Two finished spellings (what unpickling gives back)."""

    python: str
    command_line: str


def _python(value: Any) -> str:
    if isinstance(value, (Parameter, _Spelled)):
        return value.python
    return str(value)


def for_command_line(value: Any) -> str:
    """The command line's spelling of a :class:`Worded` or :class:`Parameter`; ``str`` otherwise."""
    if isinstance(value, (Parameter, _Spelled)):
        return value.command_line
    if isinstance(value, Worded):
        return value.command_line
    return str(value)


def command_line_document(document: Any) -> Any:
    """``document`` (JSON-ready dicts, lists, values), every :class:`Worded` spelled for the CLI."""
    if isinstance(document, Worded):
        return document.command_line
    if isinstance(document, dict):
        return {key: command_line_document(value) for key, value in document.items()}
    if isinstance(document, (list, tuple)):
        return [command_line_document(value) for value in document]
    return document


def command_line_message(exc: BaseException) -> str:
    """The message of ``exc`` for the command line (its :class:`Worded` spelling if it has one)."""
    if len(exc.args) == 1 and isinstance(exc.args[0], Worded):
        return exc.args[0].command_line
    return str(exc)


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``"1 release"``, ``"2 releases"``, ``"1,000 users"`` (``plural_form`` for irregular nouns).

    Example:
        >>> plural(1, "release"), plural(3, "release"), plural(2, "query", "queries")
        ('1 release', '3 releases', '2 queries')
    """
    word = noun if count == 1 else (plural_form or noun + "s")
    return f"{count:,} {word}"
