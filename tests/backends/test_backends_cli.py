"""``analyzer export``/``aggregate`` (local backend) and ``simulate``: results and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _stores import write_task_files

from shuffledp.cli import main


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _assert_bad(argv, capsys, fragment):
    code, out, err = _run(argv, capsys)
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert fragment in lines[0], lines[0]


def export_and_publish(stored, tmp_path, capsys):
    task, key = write_task_files(stored, tmp_path)
    code, published, _ = _run(
        ["analyzer", "publish", "--task", task, "--store", stored.url], capsys
    )
    assert code == 0
    out = tmp_path / "dataset"
    code, _, err = _run(
        ["analyzer", "export", "--task", task, "--store", stored.url, "--output", out], capsys
    )
    assert code == 0, err
    assert "3 batch(es)" in err
    return task, key, out, json.loads(published)


def test_aggregate_local_equals_publish(stores, tmp_path, capsys):
    stored = stores("flip")
    task, key, dataset, published = export_and_publish(stored, tmp_path, capsys)
    code, out, err = _run(
        ["analyzer", "aggregate", "--task", task, "--key", key, "--input", dataset], capsys
    )
    assert code == 0, err
    assert json.loads(out) == published
    assert f"{stored.undecryptable} message(s) did not decrypt" in err
    assert f"{stored.undecodable} did not decode" in err
    assert published["estimate"]["counts"]
    assert published["service"]["batches"] == 3


def test_aggregate_refuses_a_batch_below_the_minimum(stores, tmp_path, capsys):
    stored = stores("krr", batch_users=(100, 60), bad=False)
    task, key = write_task_files(stored, tmp_path)
    out = tmp_path / "ds"
    assert (
        main(
            [
                "analyzer",
                "export",
                "--task",
                str(task),
                "--store",
                stored.url,
                "--output",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    _assert_bad(
        ["analyzer", "aggregate", "--task", task, "--key", key, "--input", out],
        capsys,
        "fewer than the task's min_batch_users=100",
    )


def test_aggregate_and_export_bad_input(stores, tmp_path, capsys):
    stored = stores("krr", bad=False)
    task, key = write_task_files(stored, tmp_path)
    other = stores("flip", bad=False)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    _, other_key = write_task_files(other, other_dir)
    out = tmp_path / "ds"
    assert (
        main(
            [
                "analyzer",
                "export",
                "--task",
                str(task),
                "--store",
                stored.url,
                "--output",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    base = ["analyzer", "aggregate", "--task", task, "--input", out]
    _assert_bad([*base, "--key", other_key], capsys, "is not the analyzer key of task")
    _assert_bad(
        ["analyzer", "aggregate", "--task", task, "--key", key, "--input", tmp_path],
        capsys,
        "is not a message dataset",
    )
    _assert_bad([*base, "--key", key, "--spark-master", "local[1]"], capsys, "--backend spark")
    _assert_bad([*base, "--key", key, "--backend", "beam"], capsys, "invalid choice")
    _assert_bad(
        ["analyzer", "export", "--task", task, "--store", stored.url, "--output", out],
        capsys,
        "is not empty",
    )
    _assert_bad(
        [
            "analyzer",
            "export",
            "--task",
            task,
            "--store",
            stored.url,
            "--output",
            tmp_path / "x",
            "--rows-per-file",
            "0",
        ],
        capsys,
        "--rows-per-file",
    )


@pytest.mark.parametrize("protocol", ["flip", "krr"])
def test_simulate_local_writes_a_run_shaped_result(protocol, tmp_path, capsys):
    out = tmp_path / "sim.json"
    code, _, err = _run(
        [
            "simulate",
            protocol,
            "--n",
            "20000",
            "--domain",
            "a,b,c,d",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--seed",
            "1",
            "--replicates",
            "3",
            "--output",
            out,
        ],
        capsys,
    )
    assert code == 0, err
    result = json.loads(out.read_text())
    assert result["protocol"] == protocol and result["n"] == 20000
    assert result["domain"] == ["a", "b", "c", "d"] and result["path"] == "message"
    sim = result["simulation"]
    assert sim["backend"] == "local" and sim["replicates"] == 3 and sim["partitions"] == 8
    assert sum(sim["true_counts"]) == 20000 and len(sim["linf_error"]) == 3
    assert result["messages"] == sim["messages"][0]
    assert result["privacy"]["delta"] <= 1e-6
    assert f"simulate {protocol} [local]" in err
    # Reproducible from the seed.
    again = tmp_path / "again.json"
    assert (
        main(
            [
                "simulate",
                protocol,
                "--n",
                "20000",
                "--domain",
                "a,b,c,d",
                "--epsilon",
                "1",
                "--delta",
                "1e-6",
                "--seed",
                "1",
                "--replicates",
                "3",
                "--output",
                str(again),
                "--quiet",
            ]
        )
        == 0
    )
    assert json.loads(again.read_text())["estimate"] == result["estimate"]


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--n", "0"], "--n"),
        (["--n", "10", "--partitions", "11"], "at most --n=10"),
        (["--n", "10", "--replicates", "0"], "--replicates"),
        (["--n", "100", "--spark-master", "local[1]"], "--backend spark"),
        (["--n", "100", "--zipf-exponent", "-1"], "--zipf-exponent"),
        (["--n", "100", "--backend", "beam"], "invalid choice"),
        (["--n", "100", "--output", "/nonexistent/x.json"], "does not exist"),
    ],
)
def test_simulate_bad_input(extra, fragment, capsys):
    _assert_bad(
        ["simulate", "flip", "--domain-size", "4", "--epsilon", "1", "--delta", "1e-6", *extra],
        capsys,
        fragment,
    )


def test_simulate_needs_a_domain(capsys):
    _assert_bad(
        ["simulate", "krr", "--n", "10", "--epsilon", "1", "--delta", "1e-6"],
        capsys,
        "one of the arguments",
    )
    assert not Path("sim.json").exists()
