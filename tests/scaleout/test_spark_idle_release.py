"""Issue 32 item 8a: on a real Spark standalone cluster (master and worker from the pyspark
package, on loopback), the ``pyrocket-analytics`` application of an idle report session finishes
and its cores go back to the worker, so another application (the next report) gets them."""

from __future__ import annotations

import sys

import pytest

from analytics.spark.session import report_session, stop_spark
from analytics.spark.standalone import SparkStandaloneCluster
from broker.local_cluster import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
RELEASE_TIMEOUT_S = 120  # the master sees the application end a moment after the driver stops


def _running_apps(cluster: SparkStandaloneCluster) -> list[dict]:
    return cluster.master_state()["activeapps"]


def _app_holding_the_cores(cluster: SparkStandaloneCluster, spark) -> str:
    assert spark.sparkContext.parallelize(range(10), 1).sum() == 45  # runs on the worker's executor
    state = cluster.master_state()
    apps = state["activeapps"]
    assert [(app["name"], app["state"], app["cores"]) for app in apps] == [
        ("pyrocket-analytics", "RUNNING", 1)
    ]
    assert state["coresused"] == state["cores"] == 1  # nothing is left for anyone else
    return apps[0]["id"]


def test_an_idle_session_finishes_its_application_and_frees_the_cores(tmp_path, monkeypatch):
    # The executors run this interpreter (it has pyarrow and the project's dependencies).
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    stop_spark()  # a session other tests left must not be reused for the cluster
    with SparkStandaloneCluster(tmp_path / "spark", cores=1) as cluster:
        try:
            with report_session(cluster.url, 1, idle_seconds=0.5) as spark:
                first = _app_holding_the_cores(cluster, spark)
            wait_until(
                lambda: _running_apps(cluster) == [], RELEASE_TIMEOUT_S, 0.5, "the idle application to end"
            )
            state = cluster.master_state()
            assert state["coresused"] == 0
            assert [(a["id"], a["state"]) for a in state["completedapps"]] == [(first, "FINISHED")]
            # The next report starts a new application, which gets the freed core.
            with report_session(cluster.url, 1, idle_seconds=0.5) as spark:
                assert _app_holding_the_cores(cluster, spark) != first
            wait_until(
                lambda: _running_apps(cluster) == [], RELEASE_TIMEOUT_S, 0.5, "the idle application to end"
            )
        finally:
            stop_spark()
