"""A run states the same assumptions from Python as from the command line.

The protocol's report carries what its guarantee rests on (for FLIP and
k-RR: the trusted shuffler), so a library run states it; the command's
release states the same words once, beside what only the command knows
(how rows map to users).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shuffledp.cli import main
from shuffledp.privacy import TRUSTED_SHUFFLER
from shuffledp.protocols.flip import FlipProtocol
from shuffledp.protocols.krr import KRRProtocol

LABELS = ["a", "b", "c"]


@pytest.mark.parametrize("protocol", ["flip", "krr"])
def test_a_library_run_and_the_command_state_the_trusted_shuffler(
    protocol: str, tmp_path: Path
) -> None:
    values = np.random.default_rng(3).integers(0, 3, 2000)
    source = tmp_path / "users.csv"
    source.write_text("v\n" + "\n".join(LABELS[v] for v in values) + "\n")
    maker = FlipProtocol if protocol == "flip" else KRRProtocol
    library = maker.calibrated(2000, LABELS, 1.0, 1e-6).run(values, seed=5)
    assert TRUSTED_SHUFFLER in library.privacy.assumptions
    output = tmp_path / "release.json"
    argv = ["run", protocol, "--input", str(source), "--column", "v", "--domain", "a,b,c"]
    argv += ["--epsilon", "1", "--delta", "1e-6", "--seed", "5", "--output", str(output)]
    assert main([*argv, "--quiet"]) == 0
    stated = json.loads(output.read_text())["privacy"]["assumptions"]
    assert set(library.privacy.assumptions) <= set(stated)
    assert stated.count(TRUSTED_SHUFFLER) == 1
