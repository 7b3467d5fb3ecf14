"""Fixtures of the backend tests: one Spark session for all of them, tasks and analyzer stores.

The Spark session (``local[2]``, ``SPARK_LOCAL_IP=127.0.0.1``, no UI, few
shuffle partitions) is created once and shared, and stopped at the end of the
session even when a test failed or the run was interrupted; its JVM also ends
when this process does (PySpark's gateway exits when its stdin pipe from the
driver closes), ``kill -9`` included. Java is required: the
fixture fails, with what to install, when ``java -version`` does not answer
with Java 17 or later; it never skips.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from _stores import StoreMaker, make_store_maker

MIN_JAVA = 17


def _java_major() -> int:
    try:
        done = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except FileNotFoundError:
        pytest.fail(
            "the Spark tests need Java 17 or later and `java` is not on PATH: install a JDK "
            "(e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME and PATH",
            pytrace=False,
        )
    text = done.stderr + done.stdout
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if done.returncode != 0 or match is None:
        pytest.fail(f"`java -version` failed (exit {done.returncode}): {text.strip()}", False)
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_..." is Java 8
        major = int(match.group(2))
    return major


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One ``local[2]`` SparkSession for every Spark test (Java 17+ required, never skipped)."""
    major = _java_major()
    if major < MIN_JAVA:
        pytest.fail(f"the Spark tests need Java {MIN_JAVA} or later, found Java {major}", False)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("shuffledp-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        session.sparkContext.setLogLevel("ERROR")
        yield session
    finally:
        session.stop()


@pytest.fixture
def stores(tmp_path: Any) -> StoreMaker:
    """Factory: ``stores(protocol)`` -> an analyzer store holding batches (see ``_stores``)."""
    return make_store_maker(tmp_path)
