"""``account amplify``: a method not computed shows no number, in the table and the JSON."""

from __future__ import annotations

import json

from shuffledp.cli import main

# krr-homogeneous is computed for n <= 5000 only, krr-splits for k = 2 only,
# biswas2023 needs --n-x0: at n = 100000, k = 10 none of them has a number.
NOT_COMPUTED = ("krr-homogeneous", "krr-splits", "biswas2023")
ARGS = ["account", "amplify", "--mechanism", "krr", "--epsilon0", "4", "--domain-size", "10",
        "--n", "100000", "--delta", "1e-6", "--method", "all"]  # fmt: skip


def test_methods_not_computed_show_no_number(capsys):
    assert main([*ARGS, "--json"]) == 0
    rows = {row["method"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    for method in NOT_COMPUTED:
        assert rows[method]["epsilon"] is None and rows[method]["delta"] is None, method
    assert rows["krr-blanket"]["epsilon"] is not None  # a computed row keeps its numbers

    assert main(ARGS) == 0
    table = capsys.readouterr().out.splitlines()
    for method in NOT_COMPUTED:
        (line,) = [row for row in table if row.startswith(method + " ")]
        fields = line.split()
        # method, bound, epsilon, delta, note...: both numbers are "-"
        assert fields[2:4] == ["-", "-"], line
        assert "4" not in fields[2:4]  # never epsilon0 in place of a number
