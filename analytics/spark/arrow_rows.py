"""Segment files → Arrow record batches, for ``DataFrame.mapInArrow`` (runs on executors).

Rows handed from Python to the JVM one by one (an RDD of tuples into ``createDataFrame``) are
pickled and unpickled per row — slower than the decoding itself. Built column by column into Arrow
batches they cross in bulk. Depends on ``segment_rows`` (the store's codec) and pyarrow only.
"""

from __future__ import annotations

import gc
import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import accumulate, chain
from urllib.parse import unquote, urlparse

import pyarrow as pa

from .segment_rows import COLUMNS, segment_rows

# Rows per output batch: large enough to amortise the hand-off, small enough to bound memory.
BATCH_ROWS = 32_768

_INT32 = ("queue_id", "body_size", "store_size", "reconsume_times", "sys_flag", "delay_level")
_INT64 = ("commitlog_offset", "queue_offset", "born_timestamp", "store_timestamp",
          "prepared_transaction_offset")  # fmt: skip
ARROW_TYPES = {
    **dict.fromkeys(_INT32, pa.int32()),
    **dict.fromkeys(_INT64, pa.int64()),
    "properties": pa.map_(pa.string(), pa.string()),
    "op_offsets": pa.list_(pa.int64()),
}
ARROW_SCHEMA = pa.schema([(name, ARROW_TYPES.get(name, pa.string())) for name in COLUMNS])
_PROPERTIES = COLUMNS.index("properties")


def rows_to_batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True))
    arrays = [
        _properties_array(values) if i == _PROPERTIES else pa.array(values, type=field.type)
        for i, (values, field) in enumerate(zip(columns, ARROW_SCHEMA, strict=True))
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _properties_array(maps: tuple[dict, ...]) -> pa.MapArray:
    """Property dicts as one map array, from flat key and value lists (no per-row item lists)."""
    offsets = pa.array([0, *accumulate(map(len, maps))], type=pa.int32())
    keys = pa.array(list(chain.from_iterable(maps)), type=pa.string())
    values = pa.array(list(chain.from_iterable(map(dict.values, maps))), type=pa.string())
    return pa.MapArray.from_arrays(offsets, keys, values)


@contextmanager
def open_segment(uri: str):
    """A segment's bytes: a local file is memory-mapped (nothing copied, any size); other URIs
    (``hdfs://``, ``s3a://`` …) are read through pyarrow's file systems."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        with open(unquote(parsed.path) if parsed.scheme else uri, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                yield b""
                return
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                yield mapped
        return
    from pyarrow import fs

    filesystem, path = fs.FileSystem.from_uri(uri.replace("s3a://", "s3://", 1))
    with filesystem.open_input_file(path) as handle:
        yield handle.read_buffer()


def decode_file_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body over ``binaryFile`` paths: batches of decoded records.

    Only paths cross from the JVM: a segment's content as a JVM row would need its whole size
    (up to 1 GiB) in the executor's heap. Files whose names are not commit-log offsets (an
    archive manifest, ``.part`` copies still being written) are not segments and are skipped."""
    # Decoding allocates millions of acyclic objects: the cycle collector would only rescan them.
    collecting = gc.isenabled()
    gc.disable()
    try:
        pending: list[tuple] = []
        for batch in batches:
            for uri in batch.column("path").to_pylist():
                name = os.path.basename(uri.rstrip("/"))
                if not name.isdigit():
                    continue
                with open_segment(uri) as content:
                    for row in segment_rows(name, content):
                        pending.append(row)
                        if len(pending) >= BATCH_ROWS:
                            yield rows_to_batch(pending)
                            pending = []
        if pending:
            yield rows_to_batch(pending)
    finally:
        if collecting:
            gc.enable()
