"""The old home of what every ``run`` protocol shares, now split by concern (re-exports only).

:mod:`._options` (the option groups and their checks), :mod:`._domain` (the
public domain options), :mod:`._paths` (output paths), :mod:`._input`
(reading the data), :mod:`._release` (the release document) and
:mod:`._output` (writing it).
"""

from __future__ import annotations

from shuffledp.cli.run._domain import add_domain_sources, declared_domain
from shuffledp.cli.run._input import RunInput, csv_options, load_input
from shuffledp.cli.run._options import (
    add_csv_arguments,
    add_execution_arguments,
    add_run_options,
    prepare_run,
)
from shuffledp.cli.run._output import finish_run, write_release
from shuffledp.cli.run._paths import (
    PLOT_FORMATS,
    check_distinct_paths,
    check_plot_format,
    output_and_plot_paths,
    same_file,
)
from shuffledp.cli.run._release import ReleaseContext, run_to_dict

__all__ = [
    "PLOT_FORMATS",
    "ReleaseContext",
    "RunInput",
    "add_csv_arguments",
    "add_domain_sources",
    "add_execution_arguments",
    "add_run_options",
    "check_distinct_paths",
    "check_plot_format",
    "csv_options",
    "declared_domain",
    "finish_run",
    "load_input",
    "output_and_plot_paths",
    "prepare_run",
    "run_to_dict",
    "same_file",
    "write_release",
]
