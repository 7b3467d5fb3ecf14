"""``analyzer export`` writes its files 0600 and its directories 0700 whatever the umask."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _stores import write_task_files


def _modes(root: Path) -> dict[str, int]:
    return {
        str(path.relative_to(root)): stat.S_IMODE(path.stat().st_mode)
        for path in [root, *root.rglob("*")]
    }


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_export_is_owner_only_whatever_the_umask(stores, tmp_path, umask):
    stored = stores("flip")
    task, _ = write_task_files(stored, tmp_path)
    out = tmp_path / "new" / "dataset"  # two directories the export creates
    done = subprocess.run(
        [sys.executable, "-m", "shuffledp", "analyzer", "export", "--task", str(task),
         "--store", stored.url, "--output", str(out), "--rows-per-file", "100"],
        capture_output=True, text=True, timeout=120, check=False, umask=umask,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    modes = _modes(out)
    files = {name: mode for name, mode in modes.items() if (out / name).is_file()}
    directories = {name: mode for name, mode in modes.items() if (out / name).is_dir()}
    assert len(files) >= 3  # the metadata and several Parquet files (100 rows each)
    assert set(files.values()) == {0o600}, modes
    assert set(directories.values()) == {0o700}, modes
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700


def test_export_into_an_existing_directory_keeps_its_mode(stores, tmp_path):
    stored = stores("krr", bad=False)
    task, _ = write_task_files(stored, tmp_path)
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-m", "shuffledp", "analyzer", "export", "--task", str(task),
         "--store", stored.url, "--output", str(out)],
        capture_output=True, text=True, timeout=120, check=False, umask=0,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o755  # the user's directory is left as it was
    files = [path for path in out.rglob("*") if path.is_file()]
    assert files and {stat.S_IMODE(path.stat().st_mode) for path in files} == {0o600}
