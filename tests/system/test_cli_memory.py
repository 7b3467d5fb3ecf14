"""``--memory-limit``: a run that will not fit is refused before the work, naming ``--path count``.

Issue 24: the message path holds 52-62 bytes per row, and a 410M-row file grew
to 8.5 GB in 80 s with no warning (about 18 GB needed). The run now estimates
its peak before reading (the rows, one message each) and again before the
message path (the calibrated messages per user), and refuses one that would
pass the limit. The estimate must be at least the real peak: checked here on a
small and a medium input of every value protocol by running each, measuring its
peak resident memory, and running it again with the limit set to that peak,
which must be refused (``benchmarks/cli_memory.py`` prints the figures).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from shuffledp._memory import (
    MemoryLimit,
    count_text_rows,
    format_bytes,
    message_path_peak,
    resident_memory,
    rows_upper_bound,
)
from shuffledp._validation import InvalidParameterError
from shuffledp.cli import main
from shuffledp.cli.run._memory import check_before_messages, expected_messages

EXE = str(Path(sys.executable).with_name("shuffledp"))
DOMAIN = ",".join(f"v{i}" for i in range(100))
PROTOCOLS = ("krr", "flip", "correlated", "augmented")

#: Writes a CSV of N Zipf labels over DOMAIN (run in its own process: see _PEAKS).
_WRITE = """
import sys
import numpy as np
path, rows = sys.argv[1], int(sys.argv[2])
values = np.random.default_rng(0).zipf(1.3, rows) % 100
with open(path, "w") as handle:
    handle.write("value\\n")
    for start in range(0, rows, 1_000_000):
        handle.write("".join(f"v{v}\\n" for v in values[start : start + 1_000_000]))
"""

#: Runs a command twice from a small process (Linux starts a child's peak resident memory
#: at its parent's: pytest's own would hide a smaller peak): once as given, once with
#: --memory-limit at the first run's peak. Prints both exit codes, the peak and stderr.
_PEAKS = """
import json, os, subprocess, sys
argv = json.loads(sys.argv[1])
def run(extra):
    process = subprocess.Popen(argv + extra, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = process.stderr.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_maxrss * 1024, err
code, peak, err = run([])
limited, _, refusal = run(["--memory-limit", str(peak)])
print(json.dumps({"code": code, "err": err, "peak": peak, "limited": limited,
                  "refusal": refusal}))
"""


def _csv(path: Path, rows: int) -> Path:
    subprocess.run([sys.executable, "-c", _WRITE, str(path), str(rows)], check=True, timeout=300)
    return path


def _run(protocol: str, data: Path, *extra: str) -> list[str]:
    return [
        EXE, "run", protocol, "--input", str(data), "--column", "value", "--domain", DOMAIN,
        "--epsilon", "1", "--delta", "1e-6", "--seed", "1", "--quiet", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("memory")
    return {
        "small": _csv(folder / "small.csv", 200_000),
        "medium": _csv(folder / "medium.csv", 2_000_000),
    }


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB, wait4")
@pytest.mark.parametrize("size", ["small", "medium"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_run_is_refused_at_its_own_measured_peak(
    protocol: str, size: str, inputs: dict[str, Path]
) -> None:
    """The estimate is at least the peak: at a limit equal to the peak the run is refused."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAKS, json.dumps(_run(protocol, inputs[size]))],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["code"] == 0, result["err"]
    assert result["limited"] == 2, f"ran within its own peak {result['peak']}: {result}"
    (line,) = result["refusal"].splitlines()
    assert line.startswith("shuffledp: error: ") and "needs about" in line
    assert f"above --memory-limit {format_bytes(result['peak'])}" in line
    assert "use --path count" in line


def _tiny(tmp_path: Path, bad_last_row: bool = False) -> Path:
    rows = [f"v{i % 100}" for i in range(1000)] + (["not-a-label"] if bad_last_row else [])
    path = tmp_path / "tiny.csv"
    path.write_text("value\n" + "\n".join(rows) + "\n")
    return path


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def test_the_refusal_comes_before_reading_and_names_path_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The file's last row is outside the domain: a run that read it would say so instead.
    data = _tiny(tmp_path, bad_last_row=True)
    argv = _run("krr", data)[1:]
    code, err = _main([*argv, "--memory-limit", "1M"], capsys)
    assert code == 2
    assert err == (
        "shuffledp: error: reading 1,001 rows on the message path (one message a row, the "
        f"fewest any protocol sends) needs about {err.split('needs about ')[1].split(',')[0]}, "
        "above --memory-limit 1.00 MiB; use --path count, which draws the same counts with "
        "memory that does not grow with the rows, or a larger --memory-limit\n"
    )
    code, err = _main(argv, capsys)  # no limit given: the machine's available memory
    assert code == 2 and "'not-a-label'" in err
    # The count path's memory does not grow with the rows: the limit does not stop it.
    code, err = _main([*_run("krr", _tiny(tmp_path))[1:], "--path", "count",
                       "--memory-limit", "1M"], capsys)  # fmt: skip
    assert code == 0, err


def test_with_a_user_column_the_count_path_is_checked_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "users.csv"
    data.write_text("user,value\n" + "".join(f"u{i // 2},v{i % 100}\n" for i in range(1000)))
    argv = [*_run("flip", data)[1:], "--user-column", "user", "--per-user", "first"]
    code, err = _main([*argv, "--path", "count", "--memory-limit", "1M"], capsys)
    assert code == 2
    assert "reading 1,000 rows with --user-column 'user' on the count path needs about" in err
    assert err.rstrip().endswith("above --memory-limit 1.00 MiB; give a larger --memory-limit")


def test_parquet_rows_come_from_its_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "values.parquet"
    pq.write_table(pa.table({"value": [f"v{i % 100}" for i in range(12_345)]}), path)
    code, err = _main([*_run("augmented", path)[1:], "--memory-limit", "100M"], capsys)
    assert code == 2 and "reading 12,345 rows on the message path" in err


def test_a_bad_memory_limit_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = _main([*_run("krr", _tiny(tmp_path))[1:], "--memory-limit", "2X"], capsys)
    assert code == 2
    assert err == (
        "shuffledp: error: run krr: argument --memory-limit: expected an amount of memory "
        "such as 512M, 2G, 1.5GiB, 800MB or a number of bytes, got '2X'\n"
    )


def test_before_the_messages_the_calibrated_messages_per_user_count() -> None:
    """Small n, large d: the correlated protocol sends several messages per user."""
    from shuffledp.protocols.correlated import CorrelatedProtocol

    n = 2000
    protocol = CorrelatedProtocol.calibrated(n, 1000, 1.0, 1e-6)
    messages = expected_messages(protocol, n)
    assert messages > 100 * n  # noise shares: far more than one message a user
    held = resident_memory()
    assert held is not None
    need = message_path_peak(held=held, rows=n, messages=messages, user_column=False,
                             reading=False)  # fmt: skip
    fits = MemoryLimit(need + 2**30, True, held, "--memory-limit")
    check_before_messages(fits, protocol, n)
    tight = MemoryLimit(held + 10 * 2**20, True, held, "--memory-limit")
    with pytest.raises(InvalidParameterError) as info:
        check_before_messages(tight, protocol, n)
    text = str(info.value)
    assert text.startswith(f"the message path of {n:,} users (about {messages:,.0f} messages")
    assert f"above --memory-limit {format_bytes(tight.limit)}; use --path count" in text


#: Measures the message path's own peak: resets the high-water mark (Linux clear_refs),
#: runs the protocol, reads VmHWM; prints it with the estimate made just before.
_MESSAGE_PATH_PEAK = """
import json, sys
import numpy as np
from shuffledp._memory import message_path_peak, resident_memory
from shuffledp.cli.run._memory import expected_messages
from shuffledp.protocols import AugmentedProtocol, CorrelatedProtocol, FlipProtocol, KRRProtocol
kinds = {"flip": FlipProtocol, "krr": KRRProtocol, "correlated": CorrelatedProtocol,
         "augmented": AugmentedProtocol}
name, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
protocol = kinds[name].calibrated(n, d, 1.0, 1e-6)
values = np.random.default_rng(0).integers(0, d, n)
estimate = message_path_peak(held=resident_memory(), rows=n,
                             messages=expected_messages(protocol, n), user_column=False,
                             reading=False)
with open("/proc/self/clear_refs", "w") as handle:
    handle.write("5")
run = protocol.run(values, path="message", values_are="indices")
peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
            if line.startswith("VmHWM"))
print(json.dumps({"estimate": estimate, "peak": peak, "messages": run.messages}))
"""


def _clear_refs_works() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or not _clear_refs_works(),
                    reason="needs Linux's /proc/self/clear_refs")  # fmt: skip
@pytest.mark.parametrize(
    ("protocol", "n", "d"),
    [("krr", 2_000_000, 100), ("flip", 2_000_000, 100), ("correlated", 2_000_000, 100),
     ("augmented", 2_000_000, 100), ("correlated", 2_000, 1000), ("flip", 2_000, 1000)],
)  # fmt: skip
def test_the_estimate_before_the_messages_covers_the_message_path(
    protocol: str, n: int, d: int
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _MESSAGE_PATH_PEAK, protocol, str(n), str(d)],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    assert result["peak"] <= result["estimate"], result


def test_rows_from_the_size_bound_the_count_and_the_count_is_exact(tmp_path: Path) -> None:
    plain = tmp_path / "a.csv"
    plain.write_text('value\n"two\nlines"\nb\nc')  # a quoted newline, no final line end
    assert count_text_rows(plain, None) == 4  # at least the 3 rows there are
    assert rows_upper_bound(plain, None) >= 4
    packed = tmp_path / "a.csv.gz"
    packed.write_bytes(gzip.compress(b"value\n" + b"x\n" * 100_000))
    assert count_text_rows(packed, "gzip") == 100_000
    assert rows_upper_bound(packed, "gzip") >= 100_000
    seen: list[int] = []
    count_text_rows(packed, "gzip", each=seen.append)
    assert seen and seen[-1] == packed.stat().st_size
    empty = tmp_path / "h.csv"
    empty.write_text("value\n")
    assert count_text_rows(empty, None) == 0
