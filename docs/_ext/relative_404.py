"""A MkDocs hook: the 404 page links relative to the site root, so it works opened from disk.

MkDocs renders error pages with absolute links (``/assets/...``,
``/accounting/``) because a server may show them at any path; without a
``site_url`` it assumes the site is served at ``/``. Opened from disk
(``site/404.html``), or served below another path, those links lead nowhere
and the page has no style. The 404 page lives at the site root, so links
relative to it (``./assets/...``) work from disk and from a server that
serves it at its own address; a server that shows it for a missing deeper
path still shows its text.

Used from ``mkdocs.yml``: ``hooks: [docs/_ext/relative_404.py]``; tests/docs
checks that the built 404 page has no absolute link.
"""

from __future__ import annotations

from typing import Any


def on_template_context(context: Any, template_name: str, config: Any) -> Any:
    """Make the 404 page's base URL ``.`` (its own directory, the site root)."""
    if template_name == "404.html":
        context["base_url"] = "."
    return context
