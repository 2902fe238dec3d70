"""Decode throughput of the analytics job on local[1], local[2] and a Spark standalone cluster.

    python bench/spark_decode.py [--size 256M] [--body-size 512] [--segment-mb 16]
                                 [--cluster-cores 2] [--masters local[1],local[2],cluster]
                                 [--dir DIR] [--json]

Writes ``--size`` of messages through the real ``MessageStore``, archives the segments with the
store's ``SegmentArchiver`` (as ``bench/analytics_decode.py`` does), starts a standalone cluster
(a master and one worker with ``--cluster-cores`` cores, from the pyspark package's ``spark-class``
on loopback) and reads the same archive with each master: the decode alone (segments → rows in the
Python workers, an RDD count) and the DataFrame every report reads (rows handed to the JVM as Arrow
batches). Prints rows/s and MB/s of each; every master must count the same rows. Removes what it
wrote and stops the cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.spark.standalone import SparkStandaloneCluster
from bench.analytics_decode import archive, generate, parse_size, spark_decode


def decode_figures(archive_root: Path, master: str, archive_bytes: int) -> dict:
    timed = spark_decode(archive_root, master)
    mb, rows, frame_rows = archive_bytes / 1e6, timed["records"], timed["frame_records"]
    decode_s, frame_s = timed["rdd_seconds"], timed["frame_seconds"]
    return {
        "master": master, "cores": timed["cores"], "rows": rows, "frame_rows": frame_rows,
        "decode_rows_s": rows / decode_s, "decode_mb_s": mb / decode_s,
        "frame_rows_s": frame_rows / frame_s, "frame_mb_s": mb / frame_s,
    }  # fmt: skip


def figures(args) -> dict:
    root = Path(tempfile.mkdtemp(prefix="bench-spark-decode-", dir=args.dir))
    results = []
    try:
        written = generate(root / "store", args.size, args.body_size, args.segment_mb << 20)
        files = archive(root / "store", root / "archive")
        shutil.rmtree(root / "store")
        archive_bytes = sum(path.stat().st_size for path in files)
        for master in args.masters:
            if master != "cluster":
                results.append(decode_figures(root / "archive", master, archive_bytes))
                continue
            with SparkStandaloneCluster(root / "spark", cores=args.cluster_cores) as cluster:
                figures_ = decode_figures(root / "archive", cluster.url, archive_bytes)
                results.append({**figures_, "master": f"cluster ({cluster.url})"})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    counts = {(r["rows"], r["frame_rows"]) for r in results}
    if len(counts) != 1 or counts.pop() != (written["messages"], written["messages"]):
        raise SystemExit(f"row counts differ from the {written['messages']} messages written: {results}")
    return {"messages": written["messages"], "archive_bytes": archive_bytes, "segments": len(files),
            "results": results}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=parse_size, default=parse_size("256M"), help="archive volume (256M)")
    parser.add_argument("--body-size", type=int, default=512)
    parser.add_argument("--segment-mb", type=int, default=16, help="commit-log segment size in MiB")
    parser.add_argument("--cluster-cores", type=int, default=2, help="cores of the standalone worker")
    parser.add_argument("--masters", default="local[1],local[2],cluster",
                        type=lambda text: [m.strip() for m in text.split(",") if m.strip()])  # fmt: skip
    parser.add_argument("--dir", default=None, help="where to write (a temp dir by default)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # The cluster's executors run this interpreter too (pyarrow and the project's dependencies).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    result = figures(args)
    if args.json:
        print(json.dumps(result))
        return
    print(f"archive: {result['archive_bytes'] / 1e6:,.0f} MB in {result['segments']} segments, "
          f"{result['messages']:,} messages")  # fmt: skip
    for r in result["results"]:
        print(f"{r['master']:<40} {r['cores']} cores  decode {r['decode_rows_s']:>10,.0f} rows/s "
              f"{r['decode_mb_s']:>7,.1f} MB/s   DataFrame {r['frame_rows_s']:>10,.0f} rows/s "
              f"{r['frame_mb_s']:>7,.1f} MB/s")  # fmt: skip


if __name__ == "__main__":
    main()
