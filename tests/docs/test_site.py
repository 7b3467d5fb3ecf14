"""The documentation site builds with ``mkdocs build --strict``, and its figures come from scripts.

The build is the one ``make docs`` runs (broken links and anchors, missing
cross-references and docstring warnings are errors), into a temporary
directory. It runs in ``make test``, so a broken page fails CI.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "docs" / "figures"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The site as ``make docs`` builds it (once per module), and the build's stderr."""
    work = tmp_path_factory.mktemp("docs")
    site = work / "site"
    command = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    proc = subprocess.run(
        [*command, "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=work,  # the config, not the working directory, locates every file
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return site, proc.stderr


@pytest.mark.slow
def test_site_builds_strictly(built_site: tuple[Path, str]) -> None:
    site, stderr = built_site
    assert "WARNING" not in stderr
    # The API reference is generated from the code, and docstrings' Sphinx roles became links.
    api = (site / "reference" / "api" / "index.html").read_text()
    assert 'id="shuffledp.FlipProtocol"' in api and 'id="shuffledp.compose"' in api
    accounting = (site / "reference" / "accounting" / "index.html").read_text()
    assert 'id="shuffledp.accounting.api.calibrate"' in accounting
    assert ":func:" not in accounting and ":class:" not in accounting
    assert 'href="../privacy/#shuffledp.privacy.PrivacyReport"' in accounting
    # Every example page shows the script the tests run, verbatim.
    for script in sorted((ROOT / "examples").glob("*.py")):
        page = (site / "examples" / script.stem / "index.html").read_text()
        text = html.unescape(re.sub(r"<[^>]+>", "", page))
        assert script.read_text().rstrip("\n") in text, f"{script.name} is not on its page"
    # The 404 page links relative to the site root, so it works opened from disk.
    page_404 = (site / "404.html").read_text()
    links = re.findall(r'(?:href|src)="([^"]*)"', page_404)
    local = [link for link in links if not re.match(r"(?:[a-z]+:|//|#)", link)]
    assert local and not [link for link in local if link.startswith("/")], local
    for link in local:
        assert (site / link.split("#")[0]).exists(), link
    # The protocol pages keep their figures.
    assert (site / "figures" / "flip_delta_vs_epsilon.png").is_file()
    assert not (site / "figures" / "make_flip_figures.py").exists()


#: An address on another host: http(s)://... or protocol-relative //...
_REMOTE = r"(?:https?:)?//"
#: Elements that load what their src/href/srcset/data/poster names when the page is shown
#: (``<a href>`` is a link the reader follows, not a request the page makes).
_LOADING_TAG = re.compile(
    r"<(?:link|script|img|iframe|source|audio|video|track|embed|object|input)\b[^>]*>", re.I
)
_LOADING_ATTRIBUTE = re.compile(
    r"""\b(?:href|src|srcset|data|poster)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^"'\s>]+))""", re.I
)
#: CSS that fetches: @import "x", @import url(x), url(x) (data: URLs stay on the page).
_CSS_FETCH = re.compile(
    r"""@import\s+(?:url\(\s*)?["']?([^"')\s;]*)|url\(\s*["']?([^"')\s]*)""", re.I
)


def _remote_css_fetches(css: str) -> list[str]:
    found = [a or b for a, b in _CSS_FETCH.findall(css)]
    return [url for url in found if re.match(_REMOTE, url.strip(), re.I)]


def _remote_tags(html_text: str) -> list[str]:
    """The tags of a page that load something from another host."""
    remote = []
    for tag in _LOADING_TAG.findall(html_text):
        for value in ("".join(groups) for groups in _LOADING_ATTRIBUTE.findall(tag)):
            # srcset lists several candidates, separated by commas
            urls = [part.split()[0] for part in value.split(",") if part.split()]
            if any(re.match(_REMOTE, url, re.I) for url in urls):
                remote.append(tag)
    return remote


@pytest.mark.slow
def test_no_page_loads_anything_from_another_host(built_site: tuple[Path, str]) -> None:
    """Reading the site makes no request outside it: no web fonts, scripts or images elsewhere.

    Material loads Roboto from Google Fonts unless ``theme.font`` is false (mkdocs.yml).
    """
    site, _ = built_site
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 30
    remote = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(site)
        remote += [f"{where}: {tag}" for tag in _remote_tags(text)]
        styles = re.findall(r"<style\b[^>]*>(.*?)</style>", text, re.I | re.S)
        styles += re.findall(r'\bstyle\s*=\s*"([^"]*)"', text, re.I)
        remote += [f"{where}: {url}" for css in styles for url in _remote_css_fetches(css)]
        # Material fetches mermaid from unpkg.com for a diagram: the site has none.
        assert 'class="mermaid"' not in text, where
    for sheet in sorted(site.rglob("*.css")):
        css = sheet.read_text(encoding="utf-8")
        remote += [f"{sheet.relative_to(site)}: {url}" for url in _remote_css_fetches(css)]
    assert not remote, remote


def test_the_remote_asset_scan_finds_what_it_should() -> None:
    """The scan above, on snippets: what it must flag and what it must let through."""
    flagged = [
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">',
        '<link rel="preconnect" href="https://fonts.gstatic.com" crossorigin>',
        '<script src="//cdn.example.org/x.js"></script>',
        "<img alt=x src=http://example.org/a.png>",
        '<img srcset="a.png 1x, https://example.org/b.png 2x">',
    ]
    for html_text in flagged:
        assert _remote_tags(html_text), html_text
    for css in (
        '@import "https://fonts.googleapis.com/css";',
        "@import url(//example.org/a.css);",
        "body { background: url( 'https://example.org/a.png') }",
    ):
        assert _remote_css_fetches(css), css
    kept = [
        '<a href="https://arxiv.org/abs/2104.02739">paper</a>',
        '<link rel="stylesheet" href="../assets/stylesheets/main.css">',
        '<script src="assets/javascripts/bundle.js"></script>',
    ]
    for html_text in kept:
        assert not _remote_tags(html_text), html_text
    svg = "url(\"data:image/svg+xml;charset=utf-8,<svg xmlns='http://www.w3.org/2000/svg'/>\")"
    assert not _remote_css_fetches(svg)


def test_every_figure_script_takes_quick_and_spares_the_committed_figures() -> None:
    scripts = sorted(FIGURES.glob("make_*.py"))
    assert scripts
    for script in scripts:
        shown = subprocess.run(
            [sys.executable, str(script), "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        assert "--quick" in shown, f"{script.name} has no --quick"
        assert "--figures-dir" in shown, f"{script.name} has no --figures-dir"


#: Which script draws the figures whose names start with each prefix.
DRAWN_BY = {
    "accounting_": "make_accounting_figures.py",
    "flip_": "make_flip_figures.py",
    "krr_vs_gaussian_": "make_krr_figures.py",
    "near_central_": "make_near_central_figures.py",
    "per_user_": "make_per_user_figures.py",
    "segmented_": "make_segmented_figures.py",
}


def test_every_figure_on_a_page_is_drawn_by_a_script() -> None:
    pages = ROOT.joinpath("docs").rglob("*.md")
    used = {m for page in pages for m in re.findall(r"figures/([\w.-]+\.png)", page.read_text())}
    assert used
    for name in sorted(used):
        assert (FIGURES / name).is_file(), name
        scripts = [script for prefix, script in DRAWN_BY.items() if name.startswith(prefix)]
        assert len(scripts) == 1 and (FIGURES / scripts[0]).is_file(), f"no script draws {name}"


#: Paths and file names of paper extracts that users do not have.
UNSHIPPED = re.compile(
    r"\.\./shared|shared/papers|segmented-multi-message-shuffle|fake-users-histograms"
    r"|tight-dp-shuffle-krr|per-user-histograms-shuffle|near-central-notes|reading-notes"
    r"|pdf-extract"
)


def test_no_page_or_docstring_points_at_papers_users_do_not_have() -> None:
    """Papers are cited by authors, title, venue and arXiv id, never by a path or file name."""
    roots = ["docs", "src", "examples", "benchmarks"]
    files = [ROOT / "README.md", ROOT / "DESIGN.md", ROOT / "CHANGELOG.md"]
    for root in roots:
        files += [p for p in (ROOT / root).rglob("*") if p.suffix in {".md", ".py", ".json"}]
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if UNSHIPPED.search(line)
    ]
    assert not found, found
    references = (ROOT / "docs" / "references.md").read_text(encoding="utf-8")
    for arxiv in ("2104.02739", "2205.08858", "2407.19639", "2504.07362", "2106.04247"):
        assert f"arXiv {arxiv}" in references, arxiv


def test_no_page_leans_on_figures_users_cannot_see() -> None:
    """A figure is stated with the command that measures it, never as unpublished planning."""
    pages = [ROOT / "README.md", *ROOT.joinpath("docs").rglob("*.md")]
    phrase = re.compile(r"unpublished|planning figure|our planning|our own,? .*figures", re.I)
    found = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in pages
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if phrase.search(line)
    ]
    assert not found, found


def test_the_entry_pages_name_the_near_central_protocols() -> None:
    """The home page and the analyst's page point at correlated and augmented, the most accurate."""
    entry_pages = {"index.md": "protocols/", "getting-started/analyst.md": "../protocols/"}
    for page, prefix in entry_pages.items():
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        for protocol in ("correlated", "augmented"):
            assert f"]({prefix}{protocol}.md" in text, (page, protocol)
