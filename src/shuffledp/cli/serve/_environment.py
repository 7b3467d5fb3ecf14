"""Every ``serve`` option from an environment variable: ``--store`` from ``SHUFFLEDP_STORE``.

The variable of ``--some-option`` is ``SHUFFLEDP_SOME_OPTION``
(:func:`variable_name`); ``--help`` shows it after each option's help. A flag
on the command line wins over its variable, and an empty variable counts as
unset. A variable's value is read and checked exactly as the flag's would be
(it becomes the option's default, which argparse converts with the option's
type), and an error says which variable it came from (``argument
--max-connections: expected an integer, got 'many' (from
SHUFFLEDP_MAX_CONNECTIONS)``). No option's type echoes a store URL, so a
password in ``SHUFFLEDP_STORE`` is never shown (the store's own errors
redact it).

A repeatable option (``action="append"``: ``--allow-origin``) takes all its
values from one variable, separated by commas or spaces
(``SHUFFLEDP_ALLOW_ORIGIN="https://a.example,https://b.example"``); one such
flag on the command line replaces them all, as a flag replaces any other
variable. Its values are checked one by one as the flag's would be.

So a service can be configured without its command line, which every user
of the machine can read (``ps``): a PostgreSQL password in
``SHUFFLEDP_STORE``, or better in libpq's own ``PGPASSWORD`` or a
``PGPASSFILE`` (psycopg reads both; the URL then names no password), stays
out of it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from typing import Any

from shuffledp._validation import InvalidParameterError
from shuffledp.cli._common import Checked

__all__ = ["ENV_PREFIX", "environment_defaults", "variable_name"]

#: What every variable's name starts with.
ENV_PREFIX = "SHUFFLEDP_"


def variable_name(option: str) -> str:
    """``--forward-token-file`` -> ``SHUFFLEDP_FORWARD_TOKEN_FILE``."""
    return ENV_PREFIX + option.lstrip("-").upper().replace("-", "_")


class _CheckedFromVariable(Checked):
    """A :class:`Checked` type whose errors about the variable's value name the variable."""

    def __init__(self, inner: Checked, variable: str, text: str) -> None:
        self.inner = inner
        self.variable = variable
        self.text = text
        self.limits = inner.limits
        self.__name__ = inner.__name__
        self.value: Any = None

    def __call__(self, text: str) -> Any:
        value = _parse_naming(self.inner, text, self.variable, self.text)
        if text == self.text:
            self.value = value
        return value

    def check(self, value: Any, flag: str) -> Any:
        try:
            return self.inner.check(value, flag)
        except InvalidParameterError as exc:
            if self.value is None or value != self.value:
                raise
            raise InvalidParameterError(f"{exc} (from {self.variable})") from None


def _parse_naming(parse: Callable[[str], Any], text: str, variable: str, env_text: str) -> Any:
    try:
        return parse(text)
    except (argparse.ArgumentTypeError, ValueError) as exc:
        if text != env_text:
            raise
        raise argparse.ArgumentTypeError(f"{exc} (from {variable})") from None


def _type_from_variable(
    parse: Callable[[str], Any], variable: str, text: str
) -> Callable[[str], Any]:
    def typed(value: str) -> Any:
        return _parse_naming(parse, value, variable, text)

    typed.__name__ = getattr(parse, "__name__", "value")
    return typed


class _VariableValues(str):
    """A repeatable option's variable, as its default: its type makes the list of values."""


def _split_values(text: str) -> list[str]:
    """The values of a repeatable option's variable: separated by commas or spaces."""
    return text.replace(",", " ").split()


class _AppendOverVariable(argparse._AppendAction):
    """``action="append"`` whose first flag replaces the values its variable gave."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if isinstance(getattr(namespace, self.dest, None), _VariableValues):
            setattr(namespace, self.dest, None)
        super().__call__(parser, namespace, values, option_string)


class _ListFromVariable(Checked):
    """The type of a repeatable option set by a variable: the variable's text -> its values.

    argparse converts a string default with the option's type once no flag
    was given; that string is the :class:`_VariableValues`, which this type
    splits, parsing each value with the option's own type. A flag's value is
    parsed as usual. Errors about the variable's values name the variable.
    """

    def __init__(self, inner: Callable[[str], Any] | None, variable: str) -> None:
        self.inner: Callable[[str], Any] = str if inner is None else inner
        self.variable = variable
        self.limits = getattr(inner, "limits", {})
        self.__name__ = getattr(inner, "__name__", "value")
        self.values: list[Any] | None = None

    def __call__(self, text: str) -> Any:
        if not isinstance(text, _VariableValues):
            return self.inner(text)
        self.values = [
            _parse_naming(self.inner, item, self.variable, item) for item in _split_values(text)
        ]
        return self.values

    def check(self, value: Any, flag: str) -> Any:
        if not isinstance(self.inner, Checked):
            return value
        try:
            return self.inner.check(value, flag)
        except InvalidParameterError as exc:
            if value is not self.values:
                raise
            raise InvalidParameterError(f"{exc} (from {self.variable})") from None


def environment_defaults(
    parser: argparse.ArgumentParser, environ: Mapping[str, str] | None = None
) -> None:
    """Give each option of ``parser`` its variable: named in its help, its default if set.

    Call it once every option is declared. A required option whose variable is
    set is no longer required on the command line.

    Args:
        parser: The ``serve ROLE`` parser.
        environ: The environment (default ``os.environ``).
    """
    environ = os.environ if environ is None else environ
    for action in parser._actions:  # argparse's list of declared options
        longs = [s for s in action.option_strings if s.startswith("--")]
        if not longs or isinstance(action, argparse._HelpAction) or action.nargs == 0:
            continue
        variable = variable_name(longs[0])
        action.help = f"{action.help or ''} [env {variable}]".strip()
        text = environ.get(variable, "")
        if not text:
            continue
        action.required = False
        if isinstance(action, argparse._AppendAction):  # repeatable: several values
            action.default = _VariableValues(text)
            action.__class__ = _AppendOverVariable
            inner = action.type if callable(action.type) else None
            action.type = _ListFromVariable(inner, variable)
            continue
        action.default = text  # a string default: argparse converts it with the type
        if isinstance(action.type, Checked):
            action.type = _CheckedFromVariable(action.type, variable, text)
        elif callable(action.type):
            action.type = _type_from_variable(action.type, variable, text)
