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


@pytest.mark.slow
def test_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    command = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    proc = subprocess.run(
        [*command, "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=tmp_path,  # the config, not the working directory, locates every file
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr
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
