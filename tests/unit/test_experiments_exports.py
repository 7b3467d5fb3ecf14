"""shuffledp.experiments re-exports every experiment's entry point, lazily."""

from __future__ import annotations

import subprocess
import sys

import shuffledp.experiments as experiments


def test_every_experiment_entry_point_is_re_exported() -> None:
    for module, names in {
        "krr_vs_gaussian": ("ExperimentConfig", "run_krr_vs_gaussian"),
        "near_central": ("NearCentralConfig", "run_near_central"),
        "per_user": ("PerUserExperimentConfig", "run_per_user_experiment"),
        "segmented": ("SegmentedExperimentConfig", "run_segmented_experiment"),
    }.items():
        source = __import__(f"shuffledp.experiments.{module}", fromlist=["_"])
        for name in names:
            assert name in experiments.__all__
            assert getattr(experiments, name) is getattr(source, name)
    assert set(experiments.__all__) <= set(dir(experiments))


def test_one_experiment_does_not_load_the_others() -> None:
    code = (
        "import sys, shuffledp.experiments.segmented; "
        "print(sorted(m for m in sys.modules if m.startswith('shuffledp.experiments.') "
        "and not m.startswith('shuffledp.experiments.segmented')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
