"""Output files (shuffledp._files): refused targets, atomic writes, clean-up after failures."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from shuffledp import _files
from shuffledp._files import (
    check_output_dir,
    check_output_file,
    forget_created_outputs,
    make_output_dir,
    remove_created_outputs,
    write_file_atomically,
    write_text_atomically,
)
from shuffledp._validation import InvalidParameterError


@pytest.fixture(autouse=True)
def _fresh_record():
    forget_created_outputs()
    yield
    forget_created_outputs()


def _entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_refuses_every_existing_path_that_is_not_a_regular_file(tmp_path: Path) -> None:
    target = tmp_path / "target.json"
    target.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    cases = {
        link: "is a symbolic link",
        fifo: "is a FIFO (named pipe)",
        tmp_path: "is a directory",
    }
    for path, words in cases.items():
        with pytest.raises(InvalidParameterError, match=re.escape(f"--output: '{path}' {words}")):
            check_output_file(str(path), "--output")
        with pytest.raises(InvalidParameterError, match=re.escape(words)):
            write_text_atomically(path, "new")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "keep"
    assert _entries(tmp_path) == ["fifo.json", "link.json", "target.json"]


def test_device_is_refused_and_untouched() -> None:
    if not os.path.exists("/dev/null"):
        pytest.skip("no /dev/null")
    before = os.stat("/dev/null")
    with pytest.raises(InvalidParameterError, match="'/dev/null' is a device"):
        check_output_file("/dev/null", "--plot")
    with pytest.raises(InvalidParameterError, match="is a device"):
        write_text_atomically("/dev/null", "x")
    after = os.stat("/dev/null")
    assert (after.st_ino, after.st_mode, after.st_rdev) == (
        before.st_ino,
        before.st_mode,
        before.st_rdev,
    )


def test_messages_name_the_given_path_only(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo.csv")
    with pytest.raises(InvalidParameterError, match=re.escape("--output: './fifo.csv' is a FIFO")):
        check_output_file("./fifo.csv", "--output")  # as typed, not normalized to 'fifo.csv'
    with pytest.raises(InvalidParameterError, match="directory 'missing' does not exist"):
        check_output_file("missing/x.json", "--output")
    if os.path.isdir("/proc") and os.path.exists("/proc/version"):
        with pytest.raises(InvalidParameterError) as info:
            check_output_file("/proc/version", "--output")
        assert "'/proc/version'" in str(info.value)
        assert ".version." not in str(info.value)  # never a temporary file's name


def test_write_errors_name_the_target_not_the_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "out.bin"

    def fail(tmp: Path) -> None:
        raise OSError(28, "No space left on device", str(tmp))

    with pytest.raises(OSError) as info:
        write_file_atomically(out, fail)
    assert info.value.filename == str(out)
    assert _entries(tmp_path) == []  # the temporary file is gone

    def fail_in_words(tmp: Path) -> None:  # as pyarrow reports: the path inside the message
        raise OSError(f"Failed to write {tmp}: disk full")

    with pytest.raises(OSError) as info:
        write_file_atomically(out, fail_in_words)
    assert str(out) in str(info.value) and ".out.bin." not in str(info.value)
    assert _entries(tmp_path) == []


def test_interrupt_inside_a_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "table.csv"
    out.write_text("old\n")

    def interrupted(tmp: Path) -> None:
        tmp.write_text("half a ta")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file_atomically(out, interrupted)
    assert out.read_text() == "old\n"
    assert _entries(tmp_path) == ["table.csv"]


def test_replacing_keeps_the_mode_and_new_files_follow_the_umask(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text("{}")
    old.chmod(0o640)
    write_text_atomically(old, '{"a": 1}')
    assert old.read_text() == '{"a": 1}'
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    previous = os.umask(0o027)
    try:
        new = write_text_atomically(tmp_path / "new.json", "{}")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(new.stat().st_mode) == 0o640  # 0666 less the umask 027
    assert _entries(tmp_path) == ["new.json", "old.json"]


def test_remove_created_outputs_spares_what_existed_before(tmp_path: Path) -> None:
    existing = tmp_path / "existing.json"
    existing.write_text("old")
    write_text_atomically(existing, "replaced")
    out_dir = make_output_dir(tmp_path / "a" / "b")
    write_text_atomically(out_dir / "x.csv", "1\n")
    write_text_atomically(tmp_path / "new.json", "{}")
    remove_created_outputs()
    assert _entries(tmp_path) == ["existing.json"]  # a/b, a, x.csv and new.json are gone
    assert existing.read_text() == "replaced"  # replaced whole; never deleted
    assert _files._CREATED == []


def test_output_dir_checks_create_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new" / "deeper"
    assert check_output_dir(str(target), "--output-dir") == target
    assert not (tmp_path / "new").exists()
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(InvalidParameterError, match="is not a directory"):
        check_output_dir(str(afile), "--output-dir")
    with pytest.raises(InvalidParameterError, match="is not a directory"):
        check_output_dir(str(afile / "sub"), "--output-dir")
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path, target_is_directory=True)
    assert check_output_dir(str(linked), "--output-dir") == linked  # written inside, not replaced
    assert _entries(tmp_path) == ["file", "linked"]


_READ_ONLY_CHECK = """
import sys
from shuffledp._validation import InvalidParameterError
from shuffledp._files import check_output_file
for path, expected in ((sys.argv[1], "is read-only"), (sys.argv[2], "no file can be created")):
    try:
        check_output_file(path, "--output")
    except InvalidParameterError as exc:
        assert expected in str(exc), str(exc)
    else:
        raise SystemExit(f"{path} was accepted")
print("refused both")
"""


def test_read_only_targets_are_refused() -> None:
    # Root may write read-only files, so the check runs as an unprivileged user there
    # (nobody, through setpriv), in a directory that user can read.
    base = Path(tempfile.mkdtemp(prefix="shuffledp-readonly-", dir="/tmp"))
    try:
        base.chmod(0o755)
        locked = base / "locked.json"
        locked.write_text("keep")
        locked.chmod(0o444)
        shut = base / "shut"
        shut.mkdir()
        shut.chmod(0o555)
        command = [sys.executable, "-c", _READ_ONLY_CHECK, str(locked), str(shut / "x.json")]
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            assert setpriv, "setpriv (util-linux) is needed to run this check as a non-root user"
            command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0 and "refused both" in done.stdout, done.stderr
        assert locked.read_text() == "keep"
        assert list(shut.iterdir()) == []
    finally:
        shut_dir = base / "shut"
        if shut_dir.exists():
            shut_dir.chmod(0o755)
        shutil.rmtree(base)


def test_json_is_strict_with_non_finite_numbers_as_null(tmp_path: Path) -> None:
    import json
    import math

    import numpy as np

    from shuffledp._files import write_json_atomically

    document = {"a": math.nan, "b": [1.5, -math.inf, np.float64(math.inf)], 3: np.int64(7)}
    path = write_json_atomically(tmp_path / "s.json", document)
    text = path.read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text and text.endswith("}\n")
    assert json.loads(text) == {"a": None, "b": [1.5, None, None], "3": 7}


def test_csv_has_the_header_and_fills_missing_fields(tmp_path: Path) -> None:
    import csv

    from shuffledp._files import write_csv_atomically

    path = write_csv_atomically(tmp_path / "t.csv", ["x", "y"], [{"x": 1, "y": 2}, {"x": 3}])
    with path.open(newline="", encoding="utf-8") as handle:
        assert list(csv.reader(handle)) == [["x", "y"], ["1", "2"], ["3", ""]]
    with pytest.raises(ValueError, match="z"):
        write_csv_atomically(tmp_path / "u.csv", ["x"], [{"x": 1, "z": 2}])
    assert not (tmp_path / "u.csv").exists()
