"""`shuffledp account compose` on the JSON outputs of earlier runs."""

import json

from shuffledp.accounting.composition.compose import compose, reports_from_json
from shuffledp.cli import main


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_compose_saved_runs(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("city\n" + "A\nB\nC\n" * 400)
    outputs = []
    for protocol in ("flip", "krr"):
        out = tmp_path / f"{protocol}.json"
        argv = ["run", protocol, "--input", str(data), "--column", "city", "--domain", "A,B,C"]
        argv += ["--epsilon", "1", "--delta", "1e-6", "--output", str(out), "--quiet"]
        code, _, err = _run(argv, capsys)
        assert code == 0, err
        outputs.append(str(out))
    code, out, err = _run(["account", "compose", *outputs, outputs[1], "--json"], capsys)
    assert code == 0, err
    composed = json.loads(out)
    assert composed["bound"] == "upper"
    runs = [json.loads(open(p).read()) for p in [*outputs, outputs[1]]]
    total_delta = sum(r["privacy"]["delta"] for r in runs)
    assert composed["delta"] <= total_delta * (1 + 1e-12)
    # Three releases at epsilon = 1 each: PLD composition is tighter than 3.
    assert composed["epsilon"] < 3.0
    expected = compose(*reports_from_json(runs))
    assert composed["epsilon"] == expected.epsilon
    code, out, err = _run(["account", "compose", *outputs, "--epsilon", "2"], capsys)
    assert code == 0, err
    assert "together:" in out and "basic composition" in out


def test_compose_bad_files(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    code, _, err = _run(["account", "compose", str(missing)], capsys)
    assert code == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1
    garbage = tmp_path / "g.json"
    garbage.write_text("{not json")
    code, _, err = _run(["account", "compose", str(garbage)], capsys)
    assert code == 2 and "not a JSON file" in err
    lower = tmp_path / "lower.json"
    lower.write_text(
        json.dumps(
            {
                "privacy": {
                    "epsilon": 1,
                    "delta": 1e-6,
                    "bound": "lower",
                    "method": "krr-two-count",
                    "n": 10,
                }
            }
        )
    )
    code, _, err = _run(["account", "compose", str(lower)], capsys)
    assert code == 2 and "lower" in err and len(err.strip().splitlines()) == 1
    code, _, err = _run(["account", "compose", str(lower), "--delta", "2"], capsys)
    assert code == 2 and "--delta must be" in err
