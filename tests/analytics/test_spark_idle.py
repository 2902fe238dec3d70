"""Issue 32 items 7 and 8a: a worker's Spark session (its driver JVM, and on a cluster the cores of
its application) is released once no report has used it for ``ANALYTICS_SPARK_IDLE_SECONDS``;
the next report starts a new one. Real local sessions; the JVM is a child of this process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings

from analytics.models import ReportRun
from analytics.runner import execute_run
from analytics.spark.session import report_session, stop_spark
from broker.local_cluster import wait_until
from broker.store.archive import SegmentArchiver
from tests.analytics.workload import WorkloadWriter

JVM_EXIT_S = 60  # generous: the JVM's exit takes a second on a quiet machine


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("idle-workload")
    WorkloadWriter(root / "store", seed=5).write(messages=60)
    # Every segment as it is (no torn tail: these runs only have to succeed).
    archiver = SegmentArchiver(str(root / "archive"))
    for segment in sorted((root / "store" / "commitlog").iterdir()):
        archiver.archive(segment)
    return root / "archive"


def jvm_children() -> set[int]:
    """Java processes started by this process (pyspark's gateway execs into ``java``)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended while we looked
            continue
        comm_end = text.rindex(")")
        comm, ppid = text[text.index("(") + 1 : comm_end], int(text[comm_end + 2 :].split()[1])
        if ppid == os.getpid() and comm == "java":
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


@pytest.fixture
def no_spark_yet():
    stop_spark()  # what other modules left (a stopped session keeps its JVM) must not count
    assert jvm_children() == set()
    yield
    stop_spark()


def test_report_session_stops_the_jvm_after_the_idle_time_and_a_new_one_starts(no_spark_yet):
    with report_session("local[1]", 1, idle_seconds=0.5) as spark:
        assert spark.range(5).count() == 5
        (first,) = jvm_children()
        with report_session("local[1]", 1, idle_seconds=0.5) as again:  # a second report meanwhile
            assert again is spark
        assert alive(first)  # one report still uses it: no idle stop while in use
    assert wait_until(lambda: not alive(first), JVM_EXIT_S, 0.1, "the idle JVM to exit")
    assert jvm_children() == set()
    with report_session("local[1]", 1, idle_seconds=0) as spark:
        assert spark.range(7).count() == 7  # a new session and JVM
        (second,) = jvm_children()
        assert second != first
    assert wait_until(lambda: not alive(second), JVM_EXIT_S, 0.1, "the idle JVM to exit")


def test_a_negative_idle_time_is_refused():
    with pytest.raises(ValueError, match="idle_seconds"), report_session("local[1]", 1, -1):
        pass


def test_the_worker_releases_spark_after_each_report(transactional_db, no_spark_yet, archive, tmp_path):
    with override_settings(SPARK_MASTER="local[1]", ANALYTICS_SHUFFLE_PARTITIONS=1,
                           ANALYTICS_SPARK_IDLE_SECONDS=0.2, ANALYTICS_REPORTS_DIR=tmp_path):  # fmt: skip
        run = ReportRun.objects.create(report="throughput", input_uri=str(archive))
        assert execute_run(run.pk).status == ReportRun.DONE, run.error
        assert sum(r.values["messages"] for r in run.report_rows.filter(section="throughput")) > 60
        # (that the next report starts a new session is the first test's last part)
        assert wait_until(lambda: jvm_children() == set(), JVM_EXIT_S, 0.1, "the worker's JVM to exit")


@pytest.mark.parametrize("value", ["soon", "-5", "nan", "inf"])
def test_a_bad_idle_setting_stops_start_up_saying_which(value, tmp_path):
    env = {**os.environ, "ANALYTICS_SPARK_IDLE_SECONDS": value, "CONSOLE_VAR_DIR": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "project.settings"}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert f"ANALYTICS_SPARK_IDLE_SECONDS={value!r}: expected a number of seconds, 0 or more" in done.stderr
