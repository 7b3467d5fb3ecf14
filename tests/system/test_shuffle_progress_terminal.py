"""The shuffle shows a progress bar on a terminal, as reading and randomizing do; none off one."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios

import pytest

#: A secure shuffle of 4·10^7 messages: about 1.5 s, so the bar (shown after 0.5 s) appears.
CHILD = """
import sys, time
import numpy as np
from shuffledp.messages import MessageBatch
from shuffledp.shuffler.uniform import UniformShuffler
n = 40_000_000
batch = MessageBatch(payload=np.zeros(n, np.int64), sender=np.zeros(n, np.int64), n_users=n)
start = time.perf_counter()
UniformShuffler().shuffle(batch)
print(f"{time.perf_counter() - start:.3f}")
"""


def _run(stderr_is_terminal: bool) -> tuple[float, str]:
    """Run the shuffle with stderr on a pseudo-terminal or a pipe; return its seconds and stderr."""
    if not stderr_is_terminal:
        done = subprocess.run(
            [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=True
        )
        return float(done.stdout), done.stderr
    main, child = pty.openpty()
    # A terminal 100 columns wide (a new pseudo-terminal has none, and tqdm draws nothing).
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=child, text=True
    )
    os.close(child)
    seen = b""
    while True:  # drain the terminal, or a full buffer would block the child
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
    os.close(main)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, seen
    return float(out), seen.decode("utf-8", "replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_shuffle_shows_a_bar_on_a_terminal_only() -> None:
    seconds, terminal = _run(stderr_is_terminal=True)
    if seconds < 0.8:
        pytest.skip(f"the shuffle took {seconds:.2f} s, too short for the bar to show")
    assert "shuffling:" in terminal and "%|" in terminal
    _, piped = _run(stderr_is_terminal=False)
    assert piped == ""
