"""Analytics decode benchmark: archived commit-log segments → rows, Spark vs one Python process.

    python bench/analytics_decode.py [--size 2G] [--body-size 512] [--segment-mb 128]
                                     [--master local[2]] [--dir DIR] [--keep] [--json]

Writes ``--size`` of messages through the real ``MessageStore`` into a temp dir, archives the
segments with the store's ``SegmentArchiver``, then measures on the archive:

- the disk's read speed (O_DIRECT, bypassing the page cache when the file system allows it) and
  the cached read speed;
- the same decode (``analytics.spark.segment_rows``, the store's codec) in one plain Python process;
- the Spark job with ``--master`` (``local[2]`` by default): the decode alone (RDD count in the
  Python workers) and the whole DataFrame (rows handed to the JVM, as every report reads them).

Prints MB/s and messages/s of each and the ratios Spark ÷ single process (total and per core).
Checks ``df -h`` style free space first and removes everything it wrote unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.spark.segment_rows import segment_rows
from broker.common.message import MessageExt
from broker.store.archive import SegmentArchiver
from broker.store.message_store import MessageStore
from broker.store.store_config import MessageStoreConfig

TOPICS = [f"bench-topic-{i}" for i in range(8)]
BATCH = 32
READ_CHUNK = 8 << 20


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)i?B?", text.strip(), re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 2G, 512M or 100000")
    factor = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2).upper()]
    return int(float(match.group(1)) * factor)


def generate(store_dir: Path, total_bytes: int, body_size: int, segment_bytes: int) -> dict:
    """Write messages through the store (batches of 32 per topic/queue) until ``total_bytes``."""
    config = MessageStoreConfig(
        mapped_file_size_commit_log=segment_bytes,
        clean_resource_interval=3_600_000,
        message_index_enable=False,
    )
    store = MessageStore(store_dir, config)
    store.start()
    body = os.urandom(body_size)
    written = messages = 0
    start = time.perf_counter()
    try:
        while written < total_bytes:
            topic = TOPICS[messages // BATCH % len(TOPICS)]
            batch = [
                MessageExt(
                    topic=topic,
                    body=body,
                    queue_id=messages // BATCH % 4,
                    properties={"TAGS": f"tag{i % 5}", "KEYS": f"key-{messages + i}"},
                    born_timestamp=int(time.time() * 1000),
                )
                for i in range(BATCH)
            ]
            result = store.put_messages(batch)
            if not result.ok or result.append is None:
                raise RuntimeError(f"store refused a batch: {result.status} {result.remark}")
            written += result.append.wrote_bytes
            messages += BATCH
        store.wait_for_dispatch(timeout=600)
    finally:
        store.shutdown()
    return {"messages": messages, "bytes": written, "seconds": time.perf_counter() - start}


def archive(store_dir: Path, archive_root: Path) -> list[Path]:
    """Archive each segment, then delete it from the (stopped) store, as retention does: the
    disk holds one copy of the volume plus one segment, not two copies."""
    archiver = SegmentArchiver(str(archive_root))
    archived = []
    for path in sorted((store_dir / "commitlog").iterdir()):
        archived.append(Path(archiver.archive(path)))
        path.unlink()
    return archived


def read_speed(files: list[Path], direct: bool) -> tuple[float, bool]:
    """MB/s reading every file once; with ``direct``, O_DIRECT when the file system supports it."""
    buffer = mmap.mmap(-1, READ_CHUNK)  # page-aligned, as O_DIRECT requires
    total = 0
    used_direct = direct and hasattr(os, "O_DIRECT")
    start = time.perf_counter()
    for path in files:
        flags = os.O_RDONLY | (os.O_DIRECT if used_direct else 0)
        try:
            fd = os.open(path, flags)
        except OSError:
            used_direct, fd = False, os.open(path, os.O_RDONLY)
        try:
            while True:
                n = os.readv(fd, [buffer])
                total += n
                if n < READ_CHUNK:
                    break
        finally:
            os.close(fd)
    return total / (time.perf_counter() - start) / 1e6, used_direct


def python_decode(files: list[Path]) -> dict:
    """The job's decode in this one process: read each segment whole, turn it into rows."""
    records = data_bytes = 0
    start = time.perf_counter()
    for path in files:
        content = path.read_bytes()
        for row in segment_rows(path.name, content):
            records += 1
            data_bytes += row[11]  # store_size
    return {"records": records, "bytes": data_bytes, "seconds": time.perf_counter() - start}


def spark_decode(archive_root: Path, master: str) -> dict:
    """The analytics job's decode on ``master``, timed: the RDD count of rows decoded in the Python
    workers and the count of the DataFrame every report reads (bench/spark_decode.py times the
    same on several masters)."""
    from analytics.spark.segment_rows import decode_partition
    from analytics.spark.segments import segments_dataframe, segments_location
    from analytics.spark.session import spark_session

    spark = spark_session(master, shuffle_partitions=4)
    try:
        cores = spark.sparkContext.defaultParallelism
        location = segments_location(str(archive_root))
        # Warm-up outside the timing: JVM JIT, Python worker processes, the codec zip on the workers.
        spark.sparkContext.parallelize([], cores).mapPartitions(decode_partition).count()
        start = time.perf_counter()
        records = spark.sparkContext.binaryFiles(location).mapPartitions(decode_partition).count()
        rdd_seconds = time.perf_counter() - start
        start = time.perf_counter()
        frame_records = segments_dataframe(spark, str(archive_root)).count()
        frame_seconds = time.perf_counter() - start
    finally:
        spark.stop()
    return {
        "records": records,
        "rdd_seconds": rdd_seconds,
        "frame_records": frame_records,
        "frame_seconds": frame_seconds,
        "cores": cores,
    }


def figures(args) -> dict:
    root = Path(tempfile.mkdtemp(prefix="bench-analytics-", dir=args.dir))
    free = shutil.disk_usage(root).free
    needed = args.size * 1.3 + (args.segment_mb << 21) + (2 << 30)  # data, segments in flight, headroom
    if free < needed:
        shutil.rmtree(root)
        raise SystemExit(f"only {free / 1e9:.1f} GB free under {root.parent}; need {needed / 1e9:.1f}")
    try:
        written = generate(root / "store", args.size, args.body_size, args.segment_mb << 20)
        files = archive(root / "store", root / "archive")
        shutil.rmtree(root / "store")  # only the archive is read from here on
        disk_mb_s, direct = read_speed(files, direct=True)
        cached_mb_s, _ = read_speed(files, direct=False)
        single = python_decode(files)
        spark = spark_decode(root / "archive", args.master)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    mb = single["bytes"] / 1e6
    out = {
        "archive_bytes": single["bytes"],
        "segments": len(files),
        "messages": single["records"],
        "store_write_msgs_s": written["messages"] / written["seconds"],
        "disk_read_mb_s": disk_mb_s,
        "disk_read_direct": direct,
        "cached_read_mb_s": cached_mb_s,
        "python_mb_s": mb / single["seconds"],
        "python_msgs_s": single["records"] / single["seconds"],
        "spark_master": args.master,
        "spark_cores": spark["cores"],
        "spark_decode_mb_s": mb / spark["rdd_seconds"],
        "spark_decode_msgs_s": spark["records"] / spark["rdd_seconds"],
        "spark_frame_mb_s": mb / spark["frame_seconds"],
        "spark_frame_msgs_s": spark["frame_records"] / spark["frame_seconds"],
    }
    if spark["records"] != single["records"] or spark["frame_records"] != single["records"]:
        raise SystemExit(f"record counts differ: python {single['records']}, spark {spark}")
    out["ratio_spark_decode_vs_python"] = out["spark_decode_msgs_s"] / out["python_msgs_s"]
    out["ratio_spark_decode_per_core_vs_python"] = out["ratio_spark_decode_vs_python"] / spark["cores"]
    out["ratio_spark_frame_vs_python"] = out["spark_frame_msgs_s"] / out["python_msgs_s"]
    out["ratio_spark_frame_per_core_vs_python"] = out["ratio_spark_frame_vs_python"] / spark["cores"]
    out["ratio_python_vs_disk"] = out["python_mb_s"] / out["disk_read_mb_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=parse_size, default=parse_size("2G"), help="archive volume (2G)")
    parser.add_argument("--body-size", type=int, default=512)
    parser.add_argument("--segment-mb", type=int, default=128, help="commit-log segment size in MiB")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", default=None, help="where to write (a temp dir by default)")
    parser.add_argument("--keep", action="store_true", help="keep the generated archive")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    result = figures(args)
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"archive: {result['archive_bytes'] / 1e6:,.0f} MB in {result['segments']} segments, "
        f"{result['messages']:,} messages (store wrote {result['store_write_msgs_s']:,.0f} msgs/s)"
    )
    print(
        f"disk read ({'O_DIRECT' if result['disk_read_direct'] else 'page cache'}): "
        f"{result['disk_read_mb_s']:,.0f} MB/s; cached read {result['cached_read_mb_s']:,.0f} MB/s"
    )
    print(f"one Python process: {result['python_mb_s']:,.1f} MB/s, {result['python_msgs_s']:,.0f} msgs/s")
    print(
        f"Spark {result['spark_master']} decode: {result['spark_decode_mb_s']:,.1f} MB/s, "
        f"{result['spark_decode_msgs_s']:,.0f} msgs/s (x{result['ratio_spark_decode_vs_python']:.2f}, "
        f"x{result['ratio_spark_decode_per_core_vs_python']:.2f} per core)"
    )
    print(
        f"Spark {result['spark_master']} DataFrame: {result['spark_frame_mb_s']:,.1f} MB/s, "
        f"{result['spark_frame_msgs_s']:,.0f} msgs/s (x{result['ratio_spark_frame_vs_python']:.2f}, "
        f"x{result['ratio_spark_frame_per_core_vs_python']:.2f} per core)"
    )
    print(f"single-process decode is {result['ratio_python_vs_disk']:.3f} of the disk's read speed")


if __name__ == "__main__":
    main()
