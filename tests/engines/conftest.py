"""The one local-mode SparkSession of the Spark tests (session scope: both Spark test modules run
in one xdist group, ``--dist loadgroup``, so the JVM starts once per test run)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from privagg.engines import spark as se

    session = se.spark_session("local[2,2]", {"spark.sql.shuffle.partitions": "4",
                                              "spark.default.parallelism": "2",
                                              "spark.sql.session.timeZone": "UTC"}, app_name="privagg-tests")
    yield session
    session.stop()


@pytest.fixture
def fetched_columns(monkeypatch) -> list[list[str]]:
    """The columns of every frame the Spark aggregate engine collects to the driver
    (``SparkGroupedTable._collect`` spied on for one test)."""
    from privagg.engines.spark_grouped import SparkGroupedTable

    fetched: list[list[str]] = []
    real = SparkGroupedTable._collect

    def spy(self, frame):
        fetched.append(list(frame.columns))
        return real(self, frame)

    monkeypatch.setattr(SparkGroupedTable, "_collect", spy)
    return fetched
