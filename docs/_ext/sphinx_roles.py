"""A griffe extension: render the Sphinx roles of shuffledp's docstrings as cross-references.

The docstrings are Google style but name other objects with Sphinx roles
(``:func:`delta```, ``:class:`~shuffledp.privacy.PrivacyReport```), which
mkdocstrings does not understand: it would print the role as text. Once the
package is loaded, this extension rewrites every role into an *optional*
autorefs cross-reference: a link when the target is rendered somewhere in the
API reference, plain code otherwise (never a warning, so ``mkdocs build
--strict`` stays meaningful for the references written in Markdown).

A target is resolved the way Python resolves the name in the docstring's
scope (the object, then its parents, then their imports), then followed
through re-exports to the object's canonical path, the anchor mkdocstrings
gives it. ``~`` shows only the last component, as in Sphinx.

Used from ``mkdocs.yml``: ``extensions: [docs/_ext/sphinx_roles.py]``.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|data|attr|exc|obj|const):`(~?)([^`<>]+)`")


def _canonical(root: griffe.Object, path: str) -> str:
    """Follow ``path`` from the package through aliases to the object's canonical path."""
    parts = path.split(".")
    if parts[0] != root.name:
        return path
    obj: griffe.Object | griffe.Alias = root
    for part in parts[1:]:
        try:
            obj = obj.members[part]
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return path
    try:
        return obj.canonical_path
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return path


def _resolve(obj: griffe.Object, root: griffe.Object, target: str) -> str | None:
    """The canonical path of ``target`` as named in ``obj``'s docstring, or ``None``."""
    target = target.strip().lstrip(".")
    head, _, rest = target.partition(".")
    if head == root.name:
        return _canonical(root, target)
    try:
        resolved = obj.resolve(head)
    except griffe.NameResolutionError:
        return None
    return _canonical(root, f"{resolved}.{rest}" if rest else resolved)


def _rewrite(text: str, obj: griffe.Object, root: griffe.Object) -> str:
    def replace(match: re.Match[str]) -> str:
        short, target = match.group(1), match.group(2).strip()
        shown = target.rsplit(".", 1)[-1] if short else target
        identifier = _resolve(obj, root, target) or target
        return f'<autoref identifier="{html.escape(identifier)}" optional>`{shown}`</autoref>'

    return ROLE.sub(replace, text)


def _objects(obj: griffe.Object) -> list[griffe.Object]:
    """``obj`` and every object defined under it (aliases skipped: their targets are visited)."""
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found.extend(_objects(member))  # type: ignore[arg-type]
    return found


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring of a loaded package (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite the docstrings of ``pkg`` once it is fully loaded."""
        for obj in _objects(pkg):
            docstring = obj.docstring
            if docstring is not None and ROLE.search(docstring.value):
                docstring.value = _rewrite(docstring.value, obj, pkg)
