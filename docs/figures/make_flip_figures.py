"""Draw docs/figures/flip_delta_vs_epsilon.png: FLIP's δ(ε) at the two calibrations.

Usage: python docs/figures/make_flip_figures.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shuffledp import calibrate_flip, flip_delta, flip_delta_lower_bound
from shuffledp.plotting import require_matplotlib


def main() -> None:
    plt = require_matplotlib()
    n, d, eps_target, delta_target = 100_000, 100, 1.0, 1e-6
    fig, ax = plt.subplots(figsize=(7, 4.5))
    eps = np.linspace(0.2, 2.0, 46)
    for method, colour in (("exact", "#4c72b0"), ("paper", "#dd8452")):
        cal = calibrate_flip(n, d, eps_target, delta_target, method=method)
        upper = [flip_delta(e, cal.q, cal.fake_users, n) for e in eps]
        lower = [flip_delta_lower_bound(e, cal.q, cal.fake_users, n, d) for e in eps]
        label = f"{method} calibration, q={cal.q:.3g}, k={cal.fake_users}"
        ax.semilogy(eps, upper, "-", color=colour, label=f"{label}: certified δ")
        ax.semilogy(
            eps, np.maximum(lower, 1e-30), ":", color=colour, label=f"{label}: concrete pair"
        )
    ax.axhline(delta_target, color="#444444", linewidth=0.8)
    ax.axvline(eps_target, color="#444444", linewidth=0.8)
    ax.set_ylim(1e-14, 1)
    ax.set_xlabel("ε")
    ax.set_ylabel("δ(ε)")
    ax.set_title(f"FLIP, n={n:,}, d={d}: target (ε, δ) = ({eps_target:g}, {delta_target:g})")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    out = Path(__file__).with_name("flip_delta_vs_epsilon.png")
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
