"""Scale-out 1: a report run by a real Celery worker on a real Spark standalone cluster (master and
worker from the pyspark package's ``spark-class``, on loopback) gives exactly the rows of the same
report run with ``local[*]`` on the same archive.

The archive is written through the real store the way the broker writes it (tests/analytics'
workload: user topics, delays, retries, dead letters, transactions, a torn tail). Slow: the
cluster, the worker's driver, its executors and the local run each start a JVM, and the full
report runs twice; measured 159 s on a quiet 2-core machine (cluster start 13 s, cluster run
64 s, local[*] run 69 s) and 605 s with other test runs on it (load average 12-23).
"""

from __future__ import annotations

import sys
import time

import pytest
from django.test import override_settings

from analytics.models import ReportRow, ReportRun
from analytics.runner import execute_run
from analytics.spark.standalone import SparkStandaloneCluster
from analytics.tasks import RUN_REPORT
from broker.local_cluster import wait_until
from tests.analytics.workload import WorkloadWriter
from tests.scaleout.celery_workers import (
    CeleryWorker,
    postgres_database,
    redis_database,
    routed_to,
    sender,
    worker_env,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
RUN_TIMEOUT_S = 420


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-cluster-workload")
    writer = WorkloadWriter(root / "store", seed=11)
    writer.write(messages=240)
    writer.archive(root / "archive")
    return root / "archive", writer


@pytest.fixture(scope="module")
def database(django_db_blocker):
    with django_db_blocker.unblock(), postgres_database("i2_spark") as url, routed_to(url):
        yield url


def _rows(run: ReportRun) -> list[tuple]:
    return list(ReportRow.objects.filter(run=run).order_by("section", "position")
                .values_list("section", "position", "values"))  # fmt: skip


def test_a_report_on_the_standalone_cluster_equals_the_local_run(database, archive, tmp_path):
    archive_dir, writer = archive
    timings = {}
    started = time.monotonic()
    with (
        redis_database() as redis_url,
        SparkStandaloneCluster(tmp_path / "spark", cores=2) as cluster,
    ):
        timings["cluster start"] = time.monotonic() - started
        # PYSPARK_PYTHON: the executors' interpreter. The job needs pyarrow and the project's
        # dependencies there (the Python on PATH has neither); on one machine or one image it is
        # the worker's own, as an operator sets it for a standalone cluster.
        reports = str(tmp_path / "reports")
        env = worker_env(database, redis_url, SPARK_MASTER=cluster.url, PYSPARK_PYTHON=sys.executable,
                         ANALYTICS_SHUFFLE_PARTITIONS="2", ANALYTICS_REPORTS_DIR=reports)  # fmt: skip
        worker = CeleryWorker("spark@scaleout", env, tmp_path / "worker.log").start()
        try:
            run = ReportRun.objects.create(report="all", input_uri=str(archive_dir))
            began = time.monotonic()
            sender(redis_url).send_task(RUN_REPORT, args=[run.pk])

            def finished():
                fresh = ReportRun.objects.get(pk=run.pk)
                return fresh if fresh.finished else None

            run = wait_until(finished, RUN_TIMEOUT_S, 1, "the run on the cluster to finish")
            timings["cluster run"] = time.monotonic() - began
            assert run.status == ReportRun.DONE, run.error + worker.output()[-3000:]
            assert run.spark_master == cluster.url
            # The master's own view: the worker's application ran on the cluster's executors.
            apps = cluster.master_state()["activeapps"]
            assert [app["name"] for app in apps] == ["pyrocket-analytics"], apps
            assert apps[0]["cores"] >= 1
        finally:
            worker.stop()
    assert list((tmp_path / "spark" / "work").glob("app-*/*/stderr")), "no executor ran on the worker"

    local = ReportRun.objects.create(report="all", input_uri=str(archive_dir))
    began = time.monotonic()
    with override_settings(SPARK_MASTER="local[*]", ANALYTICS_SHUFFLE_PARTITIONS=2,
                           ANALYTICS_REPORTS_DIR=tmp_path / "local-reports"):  # fmt: skip
        local = execute_run(local.pk)
    _stop_local_spark()
    timings["local[*] run"] = time.monotonic() - began
    local.refresh_from_db()
    assert local.status == ReportRun.DONE, local.error

    cluster_rows, local_rows = _rows(run), _rows(local)
    assert cluster_rows == local_rows
    inputs = {row["kind"]: row["records"] for section, _, row in cluster_rows if section == "inputs"}
    assert sum(inputs.values()) == len(writer.truth.stored) + 1  # every record, and the torn tail
    print("timings:", {name: f"{seconds:.1f} s" for name, seconds in timings.items()})


def _stop_local_spark() -> None:
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()
