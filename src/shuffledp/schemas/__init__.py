"""JSON Schemas of every JSON document the command line writes, shipped with the package.

Each document carries a ``schema`` key whose value is the ``$id`` of its
schema, ``urn:shuffledp:schema:NAME:MAJOR``. The ``$id`` is a name, not an
address: nothing is fetched, the schemas are the ``NAME.schema.json`` files of
this package and refer to each other (the shared definitions are in ``defs``)
through :func:`registry`. The major version changes when a field is removed or
changes meaning; a field added keeps the ``$id`` (see ``docs/schemas.md`` and
``CHANGELOG.md``).

Reading the schemas needs nothing beyond the standard library; :func:`validate`
needs the ``jsonschema`` package (``pip install jsonschema``, part of the
``dev`` extra).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from shuffledp._optional import MissingExtraError
from shuffledp._validation import ShuffleDPError

if TYPE_CHECKING:
    from referencing import Registry

__all__ = [
    "SCHEMA_IDS",
    "SCHEMA_PREFIX",
    "SCHEMA_VERSIONS",
    "SchemaValidationError",
    "registry",
    "schema_for",
    "schema_id",
    "schema_name",
    "validate",
]

#: What every ``$id`` starts with; then the schema's name, a colon and its major version.
SCHEMA_PREFIX = "urn:shuffledp:schema:"

#: The major version of every shipped schema, by name (the file is ``NAME.schema.json``).
SCHEMA_VERSIONS: Mapping[str, int] = {
    "defs": 2,
    "release": 2,
    "simulation": 2,
    "demo": 2,
    "segmented-release": 2,
    "per-user-report": 2,
    "account-bounds": 1,
    "account-calibrate": 1,
    "account-compose": 1,
    "account-flip": 2,
    "account-krr": 2,
    "account-segmented": 2,
    "correlated-release": 1,
    "account-correlated": 1,
    "task": 1,
    "flip-spec": 1,
    "krr-spec": 1,
    "correlated-spec": 1,
    "augmented-spec": 1,
    "submission": 1,
    "message-dataset": 1,
    "experiment-segmented-summary": 2,
    "experiment-per-user-summary": 1,
    "experiment-near-central-summary": 1,
    "augmented-release": 1,
    "account-augmented": 1,
    "account-task": 1,
}

#: The ``$id`` of every shipped schema, by name.
SCHEMA_IDS: Mapping[str, str] = {
    name: f"{SCHEMA_PREFIX}{name}:{major}" for name, major in SCHEMA_VERSIONS.items()
}

_NAMES_BY_ID = {schema: name for name, schema in SCHEMA_IDS.items()}
#: Longest part of the document a validation message may quote before it is named instead.
_QUOTED_CHARACTERS = 80
#: Longest validation message quoted in an error.
_MESSAGE_CHARACTERS = 300


class SchemaValidationError(ShuffleDPError):
    """A document does not match its schema, or names no schema this package ships."""


def schema_id(name: str) -> str:
    """Return the ``$id`` of the schema called ``name`` (the value of a document's ``schema``).

    Raises:
        SchemaValidationError: If no schema has that name.
    """
    try:
        return SCHEMA_IDS[name]
    except KeyError:
        raise SchemaValidationError(
            f"no schema named {name!r}; the schemas are: {', '.join(SCHEMA_IDS)}"
        ) from None


def schema_name(name_or_id: str) -> str:
    """Return the name of a schema given its name or its ``$id``.

    Raises:
        SchemaValidationError: If it is neither.
    """
    if name_or_id in SCHEMA_IDS:
        return name_or_id
    if name_or_id in _NAMES_BY_ID:
        return _NAMES_BY_ID[name_or_id]
    if name_or_id.startswith(SCHEMA_PREFIX):
        raise SchemaValidationError(
            f"unknown schema {name_or_id!r}: this version of shuffledp ships "
            f"{', '.join(SCHEMA_IDS.values())} (a different major version is a different "
            "document format)"
        )
    raise SchemaValidationError(
        f"no schema named {name_or_id!r}; the schemas are: {', '.join(SCHEMA_IDS)}"
    )


@cache
def _load(name: str) -> Mapping[str, Any]:
    text = resources.files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def schema_for(name_or_id: str) -> dict[str, Any]:
    """Return the schema (a fresh copy of the packaged JSON), by name or ``$id``.

    Raises:
        SchemaValidationError: If no shipped schema has that name or ``$id``.
    """
    loaded: dict[str, Any] = json.loads(json.dumps(_load(schema_name(name_or_id))))
    return loaded


def registry() -> Registry:
    """Return a ``referencing`` registry holding every packaged schema under its ``$id``.

    References between the schemas resolve in it; nothing is fetched.

    Raises:
        MissingExtraError: If ``jsonschema`` (which brings ``referencing``) is not installed.
    """
    _jsonschema()
    return _registry()


@cache
def _registry() -> Registry:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    return Registry().with_resources(
        (schema, Resource.from_contents(dict(_load(name)), default_specification=DRAFT202012))
        for name, schema in SCHEMA_IDS.items()
    )


def _jsonschema() -> Any:
    try:
        return importlib.import_module("jsonschema")
    except ImportError:
        raise MissingExtraError(
            "jsonschema is required to validate documents; install it with: "
            "pip install jsonschema (it is part of shuffledp's dev extra)"
        ) from None


def validate(document: Any, name: str | None = None) -> None:
    """Check a document against its schema (draft 2020-12, with format checks).

    Args:
        document: The parsed JSON document.
        name: The schema's name or ``$id``; by default the document's own ``schema`` value.

    Raises:
        SchemaValidationError: Naming the schema, where in the document and what is
            wrong, if the document does not match (or names no shipped schema).
        MissingExtraError: If ``jsonschema`` is not installed.
    """
    if name is None:
        if not isinstance(document, Mapping) or not isinstance(document.get("schema"), str):
            raise SchemaValidationError(
                "the document has no 'schema' key naming its schema; pass the schema's name"
            )
        name = document["schema"]
    resolved = schema_name(name)
    schema = SCHEMA_IDS[resolved]
    jsonschema = _jsonschema()
    validator = jsonschema.Draft202012Validator(
        dict(_load(resolved)),
        registry=registry(),
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(the document)"
        message = str(error.message)
        quoted = repr(error.instance)
        if len(quoted) > _QUOTED_CHARACTERS and quoted in message:
            kinds: dict[type, str] = {dict: "object", list: "array"}
            kind = kinds.get(type(error.instance), "value")
            message = message.replace(quoted, f"the {kind}")
        if len(message) > _MESSAGE_CHARACTERS:
            message = message[: _MESSAGE_CHARACTERS - 1] + "…"
        raise SchemaValidationError(f"document does not match {schema} at {where}: {message}")
