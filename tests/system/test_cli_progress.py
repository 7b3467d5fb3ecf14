"""Every long step of a run shows something on a terminal, and nothing off one.

Issue 24: a 10M-row ``run correlated --user-column ... --per-user sample``
showed nothing for 30 s (grouping by user, calibration, randomizing). Reading
and shuffling have progress bars; the other steps now show a status line
(``grouping rows by user: 00:05``) after a second, which steps aside while a
bar of the same step is open, so that there is always one line and never two.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from shuffledp._progress import STATUS_DELAY_VARIABLE

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")

EXE = str(Path(sys.executable).with_name("shuffledp"))


def _on_a_terminal(
    argv: list[str], timeout: float = 300, env: dict[str, str] | None = None
) -> tuple[int, str, float]:
    """Run ``argv`` with stderr on a 100-column pseudo-terminal; return code, stderr, seconds."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=child, env=env)
    os.close(child)
    seen = b""
    try:
        while time.monotonic() - started < timeout:
            ready, _, _ = select.select([main], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(main, 4096)
                except OSError:  # the child closed its end
                    break
                if not chunk:
                    break
                seen += chunk
            elif process.poll() is not None:
                break
        process.wait(timeout=60)
    finally:
        os.close(main)
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, seen.decode("utf-8", "replace"), time.monotonic() - started


#: A status line around a block that opens a bar of its own in the middle.
_STEPS = """
import time
from shuffledp._progress import progress_bar, working
with working("outer status", after=0.1):
    time.sleep(1.0)
    with progress_bar(total=4, desc="inner bar") as bar:
        for _ in range(4):
            time.sleep(0.3)
            bar.update(1)
    time.sleep(1.0)
"""


def test_the_status_line_steps_aside_for_a_bar_and_comes_back() -> None:
    code, terminal, _ = _on_a_terminal([sys.executable, "-c", _STEPS])
    assert code == 0, terminal
    first_status = terminal.find("outer status:")
    first_bar = terminal.find("inner bar")
    last_bar = terminal.rfind("inner bar")
    assert 0 <= first_status < first_bar, terminal
    assert "outer status" not in terminal[first_bar:last_bar], "two lines at once"
    assert terminal.rfind("outer status:") > last_bar, "the status line did not come back"
    piped = subprocess.run(
        [sys.executable, "-c", _STEPS], capture_output=True, text=True, timeout=60, check=True
    )
    assert piped.stderr == ""


#: Rows of the run below: enough for grouping them by user to take seconds.
ROWS = 300_000

_WRITE = """
import sys
import numpy as np
rng = np.random.default_rng(0)
rows = int(sys.argv[2])
users, values = rng.integers(0, rows // 2, rows), rng.integers(0, 20, rows)
with open(sys.argv[1], "w") as handle:
    handle.write("user,value\\n")
    for start in range(0, rows, 1_000_000):
        end = start + 1_000_000
        handle.write("".join(f"u{u},v{v}\\n" for u, v in zip(users[start:end], values[start:end])))
"""


@pytest.mark.slow
def test_grouping_by_user_shows_a_status_line(tmp_path: Path) -> None:
    data = tmp_path / "users.csv"
    subprocess.run([sys.executable, "-c", _WRITE, str(data), str(ROWS)], check=True, timeout=300)
    argv = [
        EXE, "run", "correlated", "--input", str(data), "--column", "value",
        "--user-column", "user", "--per-user", "sample",
        "--domain", ",".join(f"v{i}" for i in range(20)),
        "--epsilon", "1", "--delta", "1e-6", "--quiet", "--output", str(tmp_path / "r.json"),
    ]  # fmt: skip
    code, terminal, _ = _on_a_terminal(argv, env={**os.environ, STATUS_DELAY_VARIABLE: "0"})
    assert code == 0, terminal
    assert "grouping rows by user:" in terminal
    piped = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert (piped.returncode, piped.stderr) == (0, "")
