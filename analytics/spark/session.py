"""The Spark session analytics jobs run in: master from settings, the codec zip shipped."""

from __future__ import annotations

import logging
import os
import sys
import threading

from .codec_zip import build_codec_zip

_lock = threading.Lock()
# py4j logs every gateway connection at INFO: noise in worker logs (and at exit, into closed streams).
logging.getLogger("py4j").setLevel(logging.WARNING)
_shipped: set[tuple[str, str]] = set()


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
