"""The TypeScript client's browser bundle, in headless Chromium, against the real services.

A page served from a loopback origin (http://127.0.0.1:PORT, a secure context) loads
clients/ts/dist/shuffledp-client.min.js, reads the task document (pinned by its digest)
and submits 200 users' values to a real shuffler started with ``--allow-origin`` for that
origin (a cross-origin POST: preflight, then JSON); the analyzer must count every message
the page's receipts report and publish an estimate within its stated error
(_ts_client.check_end_to_end). Chromium runs through clients/ts/test/browser/driver.ts
(puppeteer-core over a pipe, in its own process group, killed if the test fails).

Without /usr/bin/chromium the test is skipped, saying so, unless SHUFFLEDP_REQUIRE_BROWSER=1
(CI sets it), where it fails.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from _browsers import browser_deployment, stored_submissions
from _deploy import DOMAIN
from _ts_client import BUILD, PACKAGE, check_end_to_end, ensure_built, node, read_receipts

pytestmark = pytest.mark.slow

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
DRIVER = BUILD / "test" / "browser" / "driver.js"
USERS = 200


def _require_browser() -> None:
    if CHROMIUM.exists():
        return
    message = f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    if os.environ.get("SHUFFLEDP_REQUIRE_BROWSER") == "1":
        pytest.fail(f"SHUFFLEDP_REQUIRE_BROWSER=1 but {message}", pytrace=False)
    pytest.skip(f"{message}: browser test skipped (SHUFFLEDP_REQUIRE_BROWSER=1 fails instead)")


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None


@contextlib.contextmanager
def static_site(root: Path) -> Iterator[str]:
    """Serve ``root`` from 127.0.0.1 on a free port; yield the origin; stop it afterwards."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def run_page(url: str, timeout: float = 120) -> dict:
    """The page's result through the driver; the driver's process group is killed on failure."""
    process = subprocess.Popen(
        [node(), str(DRIVER), url, str(int(timeout))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Chromium's processes join this group
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout + 30)
    finally:
        if process.poll() is None or process.returncode != 0:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    assert process.returncode == 0, stderr[-4000:]
    return json.loads(stdout)


@pytest.mark.parametrize("protocol", ["correlated", "krr"])
def test_browser_page_submits_to_the_real_services(deploy, tmp_path: Path, protocol: str):
    _require_browser()
    ensure_built()
    site = tmp_path / "site"
    shutil.copytree(PACKAGE / "dist", site / "dist")
    for name in ("page.html", "page.js"):
        shutil.copy(PACKAGE / "test" / "browser" / name, site / name)
    rng = np.random.default_rng(23)  # the users' values; the page's randomness is the OS's
    values = [DOMAIN[i] for i in rng.choice(len(DOMAIN), size=USERS, p=[0.4, 0.3, 0.15, 0.1, 0.05])]
    with static_site(site) as origin:
        dep = browser_deployment(deploy, [origin], protocol=protocol, min_batch_users=100)
        shutil.copy(dep.workdir / "task.json", site / "task.json")
        config = {
            "bundle": "/dist/shuffledp-client.min.js",
            "task_url": "/task.json",
            "digest": dep.task.digest(),
            "shuffler": dep.shuffler.url,
            "mode": "submit",
            "values": values,
            "per_request": 25,
        }
        (site / "config.json").write_text(json.dumps(config), encoding="utf-8")
        outcome = run_page(f"{origin}/page.html?config=/config.json")
    result = outcome["result"]
    assert result["ok"], (result, outcome["console"])
    assert result["secure"] is True and result["kem"] == "webcrypto"
    receipts = read_receipts("\n".join(json.dumps(r) for r in result["receipts"]),
                             dep.task.task_id, USERS)  # fmt: skip
    release = check_end_to_end(dep, values, receipts)
    assert release["service"]["batches"] == 2


def test_a_page_on_another_site_cannot_make_its_visitors_submit(deploy, tmp_path: Path):
    """The cross-site injection of issue 26, from real pages in Chromium.

    A page on an origin the shuffler does not list tries what needs no preflight (fetch
    in no-cors mode with text/plain, an HTML form posting text/plain) and a JSON fetch
    in cors mode (whose preflight is refused); a page on the listed origin tries the
    no-cors text/plain fetch and the form. The body is a well-formed submission (a real
    client's sealed message): only its origin or its Content-Type is wrong. The shuffler
    must store nothing, and its metrics say why each was refused.
    """
    from shuffledp.service.shuffler import SUBMISSIONS_FORMAT

    _require_browser()
    ensure_built()
    allowed_site, other_site = tmp_path / "allowed", tmp_path / "other"
    for site in (allowed_site, other_site):
        site.mkdir()
        for name in ("attack.html", "attack.js"):
            shutil.copy(PACKAGE / "test" / "browser" / name, site / name)
    with static_site(allowed_site) as allowed, static_site(other_site) as other:
        dep = browser_deployment(deploy, [allowed], protocol="krr", min_batch_users=100)
        item = dep.client(seed=1).prepare(DOMAIN[0]).to_json()
        body = json.dumps({"format": SUBMISSIONS_FORMAT, "submissions": [item]})
        for site in (allowed_site, other_site):  # (the listed page's JSON fetch would be honest)
            config = {"url": dep.submissions_url, "body": body, "cors_json": site is other_site}
            (site / "config.json").write_text(json.dumps(config), encoding="utf-8")
        from_other = run_page(f"{other}/attack.html")["result"]
        from_allowed = run_page(f"{allowed}/attack.html")["result"]
    assert from_other["ok"] and from_allowed["ok"], (from_other, from_allowed)
    assert from_other["outcomes"]["cors_json"].startswith("blocked"), from_other
    assert stored_submissions(dep) == (0, 0)
    rejected = dep.shuffler_metrics()["rejected"]
    # The other site's no-cors fetch, its form and its preflight: refused for their origin;
    # the listed site's no-cors fetch and form: refused for their Content-Type.
    assert rejected == {"origin_not_allowed": 3, "unsupported_media_type": 2}, rejected
