"""The command line, run as real processes, never damages its outputs; Ctrl-C stops it cleanly.

* An existing output that is not a regular file (FIFO, symbolic link, device,
  directory, /proc file) is refused with one line and exit 2 before any work,
  and the node is left exactly as it was; messages name only the path given.
* SIGINT (sent to the process group, as a terminal's Ctrl-C is) prints one
  line, exits with 130 within a short time and leaves no partial or temporary
  file, no created directory and no worker process.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

EXE = str(Path(sys.executable).with_name("shuffledp"))
FLIP = ["run", "flip", "--column", "v", "--domain", "a,b,c", "--epsilon", "1", "--delta", "1e-6"]
INTERRUPTED = "shuffledp: interrupted\n"


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _node(path: str | Path) -> tuple[int, int, int, int]:
    info = os.lstat(path)
    return info.st_ino, info.st_mode, info.st_rdev, info.st_size


@pytest.fixture
def small_csv(tmp_path: Path) -> Path:
    path = tmp_path / "in.csv"
    path.write_text("v\n" + "\n".join("abc"[i % 3] for i in range(300)) + "\n")
    return path


def _assert_refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # one line, no traceback
    for word in words:
        assert word in result.stderr, result.stderr


def test_fifo_is_refused_and_left_a_fifo(tmp_path: Path, small_csv: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    before = _node(fifo)
    result = _cli(*FLIP, "--input", str(small_csv), "--output", str(fifo), timeout=60)
    _assert_refused(result, f"--output: '{fifo}' is a FIFO (named pipe)")
    assert _node(fifo) == before and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.json"]


def test_symlink_is_refused_and_neither_it_nor_its_target_changes(
    tmp_path: Path, small_csv: Path
) -> None:
    target = tmp_path / "target.json"
    target.write_text("keep\n")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    before = _node(link)
    result = _cli(*FLIP, "--input", str(small_csv), "--output", str(link))
    _assert_refused(result, f"'{link}' is a symbolic link")
    assert _node(link) == before and os.readlink(link) == str(target)
    assert target.read_text() == "keep\n"


def test_dev_full_is_refused_and_the_device_node_stays(small_csv: Path) -> None:
    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("no /dev/full character device here")
    before = _node("/dev/full")
    result = _cli(*FLIP, "--input", str(small_csv), "--output", "/dev/full")
    _assert_refused(result, "--output: '/dev/full' is a device")
    assert _node("/dev/full") == before
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)


def test_a_device_node_of_our_own_is_refused(tmp_path: Path, small_csv: Path) -> None:
    node = tmp_path / "full"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except (PermissionError, OSError):
        pytest.skip("cannot create a device node in this sandbox")
    before = _node(node)
    result = _cli(*FLIP, "--input", str(small_csv), "--output", str(node))
    _assert_refused(result, "is a device")
    assert _node(node) == before


def test_proc_file_is_refused_naming_only_the_given_path(small_csv: Path) -> None:
    if not os.path.exists("/proc/version"):
        pytest.skip("no /proc")
    content = Path("/proc/version").read_text()
    result = _cli(*FLIP, "--input", str(small_csv), "--output", "/proc/version")
    _assert_refused(result, "cannot write '/proc/version'")
    assert ".version." not in result.stderr  # never the temporary file's name
    assert Path("/proc/version").read_text() == content


def test_a_directory_is_refused(tmp_path: Path, small_csv: Path) -> None:
    out = tmp_path / "dir.json"
    out.mkdir()
    result = _cli(*FLIP, "--input", str(small_csv), "--output", str(out))
    _assert_refused(result, "is a directory")
    assert out.is_dir() and list(out.iterdir()) == []


def _per_user_csv(tmp_path: Path) -> Path:
    path = tmp_path / "counts.csv"
    rows = [f"u{i},{'AB'[j]},{1 + (i + j) % 4}" for i in range(40) for j in range(2)]
    path.write_text("user,cls,n\n" + "\n".join(rows) + "\n")
    return path


PER_USER = [
    "run",
    "per-user",
    "--user-column",
    "user",
    "--class-column",
    "cls",
    "--count-column",
    "n",
    "--domain",
    "A,B",
    "--epsilon",
    "4",
    "--epsilon1",
    "1",
    "--c",
    "0.2",
    "--clusters",
    "2",
]


@pytest.mark.parametrize(
    "case", ["run --plot", "per-user --output", "per-user --report", "simulate", "experiment"]
)
def test_every_output_option_refuses_a_fifo_before_any_work(
    case: str, tmp_path: Path, small_csv: Path
) -> None:
    fifo = tmp_path / "node"
    os.mkfifo(fifo)
    good = tmp_path / "good.csv"
    if case == "run --plot":
        pytest.importorskip("matplotlib")
        argv = [*FLIP, "--input", str(small_csv), "--output", str(good), "--plot", f"{fifo}"]
        words = ["--plot:", "is a FIFO"]
    elif case == "per-user --output":
        pytest.importorskip("sklearn")
        argv = [*PER_USER, "--input", str(_per_user_csv(tmp_path)), "--output", str(fifo)]
        words = ["--output:", "is a FIFO"]
    elif case == "per-user --report":
        pytest.importorskip("sklearn")
        argv = [*PER_USER, "--input", str(_per_user_csv(tmp_path)), "--output", str(good)]
        argv += ["--report", str(fifo)]
        words = ["--report:", "is a FIFO"]
    elif case == "simulate":
        argv = ["simulate", "flip", "--n", "1000", "--domain-size", "4", "--epsilon", "1"]
        argv += ["--delta", "1e-6", "--output", str(fifo)]
        words = ["--output:", "is a FIFO"]
    else:
        argv = ["experiment", "per-user", "--quick", "--output-dir", str(fifo)]
        words = ["--output-dir:", "is not a directory"]
    before = _node(fifo)
    _assert_refused(_cli(*argv, timeout=60), *words)
    assert _node(fifo) == before
    assert not good.exists()  # refused before anything was written


def test_replacing_a_file_keeps_its_mode_and_leaves_no_temporary_file(
    tmp_path: Path, small_csv: Path
) -> None:
    out = tmp_path / "out.json"
    out.write_text("old")
    out.chmod(0o640)
    result = _cli(*FLIP, "--input", str(small_csv), "--output", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert out.read_text().startswith("{") and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.json"]


# -- Ctrl-C ------------------------------------------------------------------------------------


def _big_csv(path: Path, rows: int) -> Path:
    labels = np.array([b"a", b"b", b"c"])
    values = np.random.default_rng(0).integers(0, 3, rows)
    path.write_bytes(b"v\n" + b"\n".join(labels[values].tolist()) + b"\n")
    return path


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: CPU seconds after which the command is past Python's start-up and its imports (about
#: 0.5 s of CPU): a SIGINT during the imports, before the command line's code runs, still
#: ends with Python's own traceback.
STARTED_CPU = 1.5

#: The same for ``run flip``, which imports less (about 0.4 s of CPU before it reads).
RUN_STARTED_CPU = 0.9


def _interrupt(
    argv: list[str], after: float, cpu: float = STARTED_CPU
) -> tuple[int | None, str, float]:
    """Start the CLI in its own process group, SIGINT the group after ``after`` s.

    The signal waits until the command has used ``cpu`` seconds of CPU (by
    default :data:`STARTED_CPU`, so it is past start-up whatever the machine's
    load). Returns the exit code (None if it finished first), stderr and the
    seconds from the signal to the process's exit.
    """
    process = subprocess.Popen(
        [EXE, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(after)
    try:
        while process.poll() is None and _cpu_seconds(process.pid) < cpu:
            time.sleep(0.02)
    except OSError:
        pass  # the process ended meanwhile
    if process.poll() is not None:
        return None, process.communicate()[1], 0.0
    sent = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    latency = time.monotonic() - sent
    assert not _session_alive(process.pid), "a process of the command outlived it"
    return process.returncode, err, latency


def _session_alive(session: int) -> bool:
    """Whether any process of session ``session`` (a command's workers) still runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":  # field 6 of stat: the session id
            return True
    return False


@pytest.mark.slow
def test_ctrl_c_during_a_long_run_is_one_line_exit_130_and_leaves_nothing(tmp_path: Path) -> None:
    source = _big_csv(tmp_path / "big.csv", 16_000_000)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    output = out_dir / "result.json"
    argv = [*FLIP, "--input", str(source), "--output", str(output), "--quiet"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    finished = _cli(*argv, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert finished.returncode == 0, finished.stderr
    output.unlink()
    latencies = []
    # The signal comes at a fraction of the command's CPU time (not of its wall time, which
    # a loaded machine stretches in one run and not the next): reading, randomizing, the
    # shuffle (with 1.6e7 messages).
    for fraction in (0.3, 0.5, 0.7):
        code, err, latency = _interrupt(argv, 0.0, cpu=max(fraction * total_cpu, RUN_STARTED_CPU))
        if code is None:
            continue  # finished first: nothing to interrupt
        if code == 0:
            # The command had finished and Python was exiting when the signal came (then
            # ignored: during Python's exit SIGINT would kill the process silently).
            assert err == "" and json.loads(output.read_text())["n"] == 16_000_000
            output.unlink()
            continue
        assert code == 130, err
        assert err == INTERRUPTED
        latencies.append(latency)
        assert list(out_dir.iterdir()) == []  # no output, no temporary file
    assert latencies, "every run finished before the signal"
    assert max(latencies) < 3.0, latencies  # measured 0.3-1.1 s on two loaded cores


@pytest.mark.slow
def test_ctrl_c_lands_within_half_a_second_in_the_shuffle_sort() -> None:
    """A sort of 2e7 keys in blocks stops within ~0.5 s of SIGINT (one argsort took ~3 s)."""
    script = (
        "import numpy as np, secrets, sys\n"
        "from shuffledp.shuffler.uniform import argsort_random_keys\n"
        "keys = np.frombuffer(secrets.token_bytes(8 * 20_000_000), np.uint64)\n"
        "print('sorting', flush=True)\n"
        "for _ in range(20):\n"
        "    argsort_random_keys(keys)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "sorting\n"
    time.sleep(1.0)
    assert process.poll() is None
    sent = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    latency = time.monotonic() - sent
    assert "KeyboardInterrupt" in err
    assert latency < 1.0, latency


@pytest.mark.slow
def test_ctrl_c_during_an_experiment_stops_its_workers_without_tracebacks(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("matplotlib")
    out = tmp_path / "exp" / "sub"
    argv = ["experiment", "per-user", "--quick", "--workers", "2", "--output-dir", str(out)]
    seen = 0
    for after in (1.5, 3.0, 4.5, 7.0):
        code, err, latency = _interrupt(argv, after)
        if code is None:
            continue
        if code == 0 and (out / "summary.json").exists():
            # The run finished between the last poll and the signal: a late Ctrl-C is
            # ignored once the command is done (its files are complete).
            shutil.rmtree(tmp_path / "exp")
            continue
        seen += 1
        assert code == 130 and err == INTERRUPTED, err  # no worker printed a traceback
        assert latency < 5.0, latency
        assert not (tmp_path / "exp").exists()  # the output directory is created only at the end
    assert seen
