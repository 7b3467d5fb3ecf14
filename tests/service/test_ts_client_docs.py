"""The TypeScript client's documented examples run, as written, against the real services.

The code blocks of docs/clients/typescript.md and clients/ts/README.md are read from the
files (not copied here) and run with only what a reader replaces: the shuffler's URL (the
examples say ``https://shuffler.example.org`` or ``http://127.0.0.1:8080``), the pinned
digest, and the CA file's and task's paths. The Node examples run in a project that
installed the package (``node_modules/@shuffledp/client`` links to clients/ts); the page
runs in headless Chromium from a loopback origin the shuffler allows. Each must leave one
submission stored at the shuffler, with the value the example names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from _browsers import browser_deployment, self_signed_certificate, serve_over_tls
from _deploy import wait_until
from _ts_client import PACKAGE, ROOT, ensure_built, node
from test_ts_client_browser import _require_browser, run_page, static_site

pytestmark = pytest.mark.slow

DOCS = ROOT / "docs" / "clients" / "typescript.md"
README = PACKAGE / "README.md"


def _blocks(path: Path, heading: str, language: str) -> list[str]:
    """The ``language`` code blocks under the ``## heading`` section of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    section = text[start : None if end < 0 else end]
    blocks = re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)
    assert blocks, f"no {language} block under '## {heading}' in {path}"
    return blocks


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, f"the example no longer holds {old!r}: update this test"
    return text.replace(old, new)


def _project(tmp_path: Path) -> Path:
    """A Node project in which ``@shuffledp/client`` is installed (linked to clients/ts)."""
    ensure_built()
    project = tmp_path / "project"
    (project / "node_modules" / "@shuffledp").mkdir(parents=True)
    (project / "node_modules" / "@shuffledp" / "client").symlink_to(PACKAGE)
    (project / "package.json").write_text('{"type": "module"}\n', encoding="utf-8")
    return project


def _run(script: Path, digest: str) -> subprocess.CompletedProcess[str]:
    """``node script`` in its project with ``TASK_DIGEST`` set (killed after 60 s)."""
    return subprocess.run(
        [node(), script.name],
        cwd=script.parent,
        env={**os.environ, "TASK_DIGEST": digest},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _accepted(dep) -> int:
    return int(dep.shuffler_metrics().get("submissions_accepted", 0))


@pytest.mark.parametrize("page", [DOCS, README], ids=["docs", "readme"])
def test_the_node_example_submits(deploy, tmp_path: Path, page: Path):
    dep = deploy("krr", min_batch_users=100)
    [example, *_] = _blocks(page, "In Node", "js")
    project = _project(tmp_path)
    shutil.copy(dep.workdir / "task.json", project / "task.json")
    script = _replace(example, "http://127.0.0.1:8080", dep.shuffler.url)
    (project / "example.mjs").write_text(script, encoding="utf-8")
    done = _run(project / "example.mjs", dep.task.digest())
    assert done.returncode == 0, done.stderr
    assert _accepted(dep) == 1
    if "console.log" in example:  # the docs' example prints the id and the ciphertext count
        submission_id, count = done.stdout.split()
        assert re.fullmatch(r"[0-9a-f]{32}", submission_id) and count == "1"
    # A wrong digest stops it before anything is sent.
    failed = _run(project / "example.mjs", "0" * 64)
    assert failed.returncode != 0 and "TaskError" in failed.stderr
    assert _accepted(dep) == 1


def test_the_private_ca_example_submits_over_https(deploy, tmp_path: Path):
    cert, key = self_signed_certificate(tmp_path)
    dep = deploy("krr", min_batch_users=100, start=False)
    serve_over_tls(dep, cert, key)
    [_, example] = _blocks(DOCS, "In Node", "js")
    project = _project(tmp_path)
    shutil.copy(cert, project / "ca.pem")
    script = _replace(
        example,
        "https://shuffler.example.org:8443/v1/tasks/ID",
        f"{dep.shuffler.url}/v1/tasks/{dep.task.task_id}",
    )
    script = _replace(script, "https://shuffler.example.org:8443", dep.shuffler.url)
    # The example leaves what to do with the client and the pinned digest to the reader.
    prelude = "const expectedDigest = process.env.TASK_DIGEST;\n"
    script = prelude + script + '\nawait client.submit("red");\n'
    (project / "example.mjs").write_text(script, encoding="utf-8")
    done = _run(project / "example.mjs", dep.task.digest())
    assert done.returncode == 0, done.stderr
    with dep.shuffler.http() as http:
        metrics = http.get(f"{dep.shuffler.url}/v1/metrics").json()
    assert metrics["submissions_accepted"] == 1


@pytest.mark.parametrize("page", [DOCS, README], ids=["docs", "readme"])
def test_the_web_page_example_submits_from_chromium(deploy, tmp_path: Path, page: Path):
    _require_browser()
    ensure_built()
    [example] = _blocks(page, "In a web page", "html")
    site = tmp_path / "site"
    site.mkdir()
    for bundle in (PACKAGE / "dist").glob("*.js"):  # served beside the page, as the docs say
        shutil.copy(bundle, site / bundle.name)
    with static_site(site) as origin:
        dep = browser_deployment(deploy, [origin], protocol="krr", min_batch_users=100)
        shutil.copy(dep.workdir / "task.json", site / "task.json")
        html = _replace(example, "<the 64 hex digits of the task digest>", dep.task.digest())
        html = _replace(html, "https://shuffler.example.org", dep.shuffler.url)
        # What the driver waits for: the example's end, or the error that stopped it.
        report = (
            "<script>\n"
            "  const fail = (e) => { globalThis.__shuffledpResult = "
            "{ ok: false, error: String(e.reason ?? e.error ?? e.message) }; };\n"
            '  addEventListener("error", fail);\n'
            '  addEventListener("unhandledrejection", fail);\n'
            "</script>\n"
        )
        html = report + _replace(
            html, "</script>", "  globalThis.__shuffledpResult = { ok: true };\n</script>"
        )
        (site / "index.html").write_text(html, encoding="utf-8")
        outcome = run_page(f"{origin}/index.html", timeout=60)
        assert outcome["result"] == {"ok": True}, outcome
        wait_until(lambda: _accepted(dep) == 1, 10, "the page's submission stored")
    assert json.loads((site / "task.json").read_text())["task_id"] == dep.task.task_id
