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


def test_issue_24_an_edited_flip_release_is_refused_at_its_real_epsilon(tmp_path, capsys):
    """Issue 24: a FLIP release's privacy.epsilon edited 1 -> 0.01 composed to (1.01, 2e-6)."""
    from shuffledp.accounting.certificates.flip import flip_delta

    data = tmp_path / "d.csv"
    data.write_text("city\n" + "A\nB\nC\n" * 400)
    release = tmp_path / "flip.json"
    argv = ["run", "flip", "--input", str(data), "--column", "city", "--domain", "A,B,C"]
    code, _, err = _run([*argv, "--epsilon", "1", "--delta", "1e-6", "--output", str(release),
                         "--quiet"], capsys)  # fmt: skip
    assert code == 0, err
    document = json.loads(release.read_text())
    document["privacy"]["epsilon"] = 0.01
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(document))
    code, out, err = _run(["account", "compose", str(edited), str(release)], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    stated_delta = document["privacy"]["delta"]  # the certified delta at 1, just below 1e-6
    assert f"{edited} (flip-exact) states (0.01, {stated_delta:.6g}), below" in err
    # what its own q and k certify: delta at 0.01, and about 1 at the stated delta
    params, n = document["privacy"]["parameters"], document["privacy"]["n"]
    at_001 = flip_delta(0.01, params["q"], params["fake_users"], n)
    assert f"gives delta = {at_001:.3g} at epsilon = 0.01" in err
    certified = float(err.split(", and epsilon = ")[1].split(" ")[0])
    assert 1.0 <= certified <= 1.0 + 2e-4  # the run was calibrated at epsilon = 1 ...
    assert flip_delta(0.999, params["q"], params["fake_users"], n) > 1e-6  # ... and no lower
    # the untouched release composes as before: two of them, by PLD, below basic composition
    code, out, err = _run(["account", "compose", str(release), str(release), "--json"], capsys)
    assert code == 0, err
    composed = json.loads(out)
    assert composed["epsilon"] < 2.0 and composed["delta"] == 2 * document["privacy"]["delta"]
