"""plotting.save_readable(close=True) closes the figure, also when writing fails."""

from __future__ import annotations

from pathlib import Path

import pytest

plt = pytest.importorskip("matplotlib.pyplot")

from shuffledp.plotting import save_readable  # noqa: E402


def test_close_after_writing(tmp_path: Path) -> None:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    out = save_readable(fig, tmp_path / "a.png", dpi=50, close=True)
    assert out == tmp_path / "a.png" and out.stat().st_size > 0
    assert fig.number not in plt.get_fignums()


def test_close_when_writing_fails(tmp_path: Path) -> None:
    fig, _ = plt.subplots()
    with pytest.raises(OSError):
        save_readable(fig, tmp_path / "missing" / "a.png", dpi=50, close=True)
    assert fig.number not in plt.get_fignums()


def test_left_open_by_default(tmp_path: Path) -> None:
    fig, _ = plt.subplots()
    save_readable(fig, tmp_path / "a.png", dpi=50)
    assert fig.number in plt.get_fignums()
    plt.close(fig)
