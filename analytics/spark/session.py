"""The Spark session analytics jobs run in: master from settings, the codec zip shipped, and the
session (with its JVM) released once no report has used it for a while.

A session holds a driver JVM of ~800 MB and, on a standalone cluster, every core its application
was granted: kept between reports it would keep both from everything else (the next ingest,
another application). ``report_session`` stops it ``idle_seconds`` after the last report ended;
the next report starts a new one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

from .codec_zip import build_codec_zip

log = logging.getLogger(__name__)
_lock = threading.RLock()
# py4j logs every gateway connection at INFO: noise in worker logs (and at exit, into closed streams).
logging.getLogger("py4j").setLevel(logging.WARNING)
_shipped: set[tuple[str, str]] = set()
# Reports using the session now, and the timer that releases it once there are none.
_in_use = 0
_idle_timer: threading.Timer | None = None
JVM_EXIT_TIMEOUT_S = 30


def spark_session(
    master: str = "local[*]", shuffle_partitions: int = 8, app_name: str = "pyrocket-analytics"
):
    """A session on ``master`` (``local[*]``, ``spark://host:7077``, ``yarn`` …), reused per process.

    Spark start-up costs seconds, so one session serves every report a worker process runs.
    """
    from pyspark.sql import SparkSession

    if master.startswith("local"):
        # Bind the driver to loopback: the machine's hostname may not resolve (see NOTES.md).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Local Python workers run this interpreter (the venv), not whatever python3 is on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with _lock:
        spark = (
            SparkSession.builder.master(master)
            .appName(app_name)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
            .config("spark.sql.session.timeZone", "UTC")
            # Each input row of the decode is a segment's path: one per batch spreads the segments
            # over the Python workers.
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1")
            .getOrCreate()
        )
        context = spark.sparkContext
        codec = build_codec_zip()
        key = (context.applicationId, str(codec))
        if key not in _shipped:
            context.addPyFile(str(codec))
            _shipped.add(key)
    return spark


@contextlib.contextmanager
def report_session(master: str, shuffle_partitions: int, idle_seconds: float) -> Iterator:
    """The session for one report; ``idle_seconds`` after the last report using it ends (0: at
    once), the session and its JVM are stopped."""
    global _in_use
    if idle_seconds < 0:
        raise ValueError(f"idle_seconds must be 0 or more, not {idle_seconds}")
    with _lock:
        _cancel_idle_stop()
        _in_use += 1
    try:
        yield spark_session(master, shuffle_partitions)
    finally:
        with _lock:
            _in_use -= 1
            if _in_use == 0:
                _schedule_idle_stop(idle_seconds)


def _cancel_idle_stop() -> None:
    global _idle_timer
    if _idle_timer is not None:
        _idle_timer.cancel()
        _idle_timer = None


def _schedule_idle_stop(idle_seconds: float) -> None:
    global _idle_timer
    timer = threading.Timer(idle_seconds, _stop_if_idle)
    timer.name, timer.daemon = "spark-idle-stop", True  # never keeps a stopping worker alive
    _idle_timer = timer
    timer.start()


def _stop_if_idle() -> None:
    global _idle_timer
    with _lock:
        # A report that began while this timer was firing cancelled it too late: it keeps the session.
        if _in_use or _idle_timer is not threading.current_thread():
            return
        _idle_timer = None
        log.info("no report for a while: stopping the Spark session and its JVM")
        try:
            stop_spark()
        except Exception:  # the next report starts a fresh session either way
            log.warning("stopping the idle Spark session failed", exc_info=True)


def stop_spark() -> None:
    """Stop this process's session and end its JVM (``SparkSession.stop`` alone keeps the driver
    JVM - the py4j gateway - running for the next session: its memory stays taken)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    with _lock:
        session = SparkSession._instantiatedSession
        if session is not None:
            session.stop()  # on a cluster: the application finishes and its cores are released
        gateway = SparkContext._gateway
        if gateway is None:
            return
        proc: subprocess.Popen | None = getattr(gateway, "proc", None)
        SparkContext._gateway = None  # the next SparkContext launches a new JVM
        SparkContext._jvm = None
        gateway.shutdown()
        if proc is not None:
            _end_jvm(proc)


def _end_jvm(proc: subprocess.Popen) -> None:
    """The gateway JVM exits when its stdin closes (pyspark launches it that way)."""
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(JVM_EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log.warning("the Spark JVM (pid %s) did not exit; killing it", proc.pid)
        proc.kill()
        proc.wait(JVM_EXIT_TIMEOUT_S)
