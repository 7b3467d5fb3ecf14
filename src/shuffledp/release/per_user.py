"""The report of a per-user run (schema ``per-user-report``).

``run per-user`` writes the estimates (one noisy normalized histogram per
user) to a table and this report beside it: the guarantee, the standard error
of every value and what the release does not cover.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from shuffledp import __version__
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.data.per_user import LoadedHistograms
    from shuffledp.protocols.per_user import PerUserRun

__all__ = ["STDERR_MEANING", "per_user_report_to_dict"]

#: What the report's ``stderr`` is (see :attr:`shuffledp.protocols.per_user.PerUserRun.stderr`).
STDERR_MEANING = (
    "standard error of every value of the output table's class column (the same in every row): "
    "the Laplace noise's standard deviation; the noise is Laplace, not normal, so a value +- "
    "2.12 stderr (not 1.96, which covers about 93.7%) is a 95% interval for the normalized "
    "histogram of the user whose copy the row holds (a member of the row user's group, possibly "
    "that user); the error of taking a group member's histogram for the row user's own depends "
    "on the data and is not included"
)


def per_user_report_to_dict(
    run: PerUserRun,
    data: LoadedHistograms,
    *,
    seed: int | None,
    input_file: str,
    user_column: str | None,
    class_column: str | None,
    count_column: str | None,
    output_file: str,
    id_column: str,
) -> dict[str, Any]:
    """Return the report of a per-user run (schema ``per-user-report``).

    The estimates themselves go to the output table (``output_file``); the
    report states their guarantee, their standard error, the input's layout
    and columns and what is not covered (a header-derived class list, a seed).
    """
    report = run.report
    not_covered: list[str] = []
    if data.domain_source == "header":
        not_covered.append(
            "the class labels: they were taken from the input's header (no --domain); if the "
            "header was derived from the data (e.g. by a pivot) it can reveal which classes occur"
        )
    if seed is not None:
        from shuffledp._rng import SEEDED_NOT_COVERED

        not_covered.append(SEEDED_NOT_COVERED)
        report = replace(report, parameters={**report.parameters, "seed": seed})
    report = report.with_context(not_covered=not_covered)
    notes = [
        *data.release_notes,
        "row i of the output is the noisy normalized histogram the shuffler gave to user i "
        "(Alg. 1 line 14): the released copy of some user of i's group, possibly i's own; "
        "values are neither clipped nor renormalized",
        "the groups, their sizes and the permutation are not released",
    ]
    stderr = run.stderr
    return {
        "schema": schema_id("per-user-report"),
        "protocol": "per-user",
        "shuffledp_version": __version__,
        "n": run.n,
        "classes": list(data.classes),
        "domain_source": data.domain_source,
        "privacy": report.to_dict(),
        "parameters": report.parameters,
        "stderr": {
            "per_class": [float(value) for value in stderr],
            "meaning": STDERR_MEANING,
        },
        "input": {
            "file": input_file,
            "layout": data.layout,
            "user_column": user_column,
            "class_column": class_column,
            "count_column": count_column,
        },
        "output": {
            "file": output_file,
            "id_column": id_column,
            "columns": [id_column, *data.classes],
        },
        "notes": notes,
    }
