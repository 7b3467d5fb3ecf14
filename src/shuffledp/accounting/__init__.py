"""Privacy accounting for shuffle protocols: exact δ(ε), bounds and calibration."""
