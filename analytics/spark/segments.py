"""Archived commit-log segments → a DataFrame of stored records (A1).

The ``binaryFile`` source reads each segment whole from any URI Hadoop understands (a local
directory, ``file://``, ``hdfs://``, ``s3a://`` …); ``mapInArrow`` decodes them with the store's
codec on the executors (``segment_rows`` via ``arrow_rows``, shipped in the codec zip) and hands
the rows to the JVM as Arrow batches.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from .archive_input import require_segments
from .arrow_rows import decode_file_batches
from .segment_rows import COLUMNS

_TYPES = {
    "commitlog_offset": LongType(), "queue_id": IntegerType(), "queue_offset": LongType(),
    "properties": MapType(StringType(), StringType()), "body_size": IntegerType(),
    "store_size": IntegerType(), "born_timestamp": LongType(), "store_timestamp": LongType(),
    "reconsume_times": IntegerType(), "sys_flag": IntegerType(), "prepared_transaction_offset": LongType(),
    "delay_level": IntegerType(), "op_offsets": ArrayType(LongType()),
}  # fmt: skip
SCHEMA = StructType([StructField(name, _TYPES.get(name, StringType()), True) for name in COLUMNS])


def segments_location(uri: str) -> str:
    """Where the segment files are: an archive root (``<root>/commitlog``) or the directory itself;
    a local input without segments raises ``NoArchivedSegments`` saying what to do."""
    return require_segments(uri)


def segments_dataframe(spark, uri: str):
    """One row per stored record of every segment under ``uri`` (see ``segment_rows.COLUMNS``)."""
    files = spark.read.format("binaryFile").load(segments_location(uri)).select("path")
    return files.mapInArrow(decode_file_batches, SCHEMA)
