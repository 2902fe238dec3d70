"""One report run: decode the segments once, compute the chosen sections, write CSV + Parquet.

Plain parameters in, plain rows out: the Celery task (``analytics.runner``) owns the database.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow
import pyarrow.parquet
from pyspark.sql.pandas.types import to_arrow_schema

from core.csv_cells import safe_dict

from . import reports
from .catalog import REPORT_SECTIONS
from .segments import segments_dataframe

SECTION_BUILDERS: dict[str, Callable] = {
    "inputs": reports.inputs,
    "throughput": reports.throughput,
    "size": reports.size_distribution,
    "size_histogram": reports.size_histogram,
    "latency": reports.latency_distribution,
    "latency_histogram": reports.latency_histogram,
    "retry_dlq": reports.retry_dlq,
    "delay_levels": reports.delay_levels,
    "transactions": reports.transactions,
    "top_keys": reports.top_keys,
    "top_tags": reports.top_tags,
}

Progress = Callable[[int, str], None]


@dataclass
class ReportRequest:
    report: str
    input_uri: str
    output_dir: str
    start_ms: int | None = None
    end_ms: int | None = None
    topics: list[str] = field(default_factory=list)

    def sections(self) -> tuple[str, ...]:
        if self.report not in REPORT_SECTIONS:
            raise ValueError(f"unknown report {self.report!r}; choose one of {', '.join(REPORT_SECTIONS)}")
        return ("inputs", *REPORT_SECTIONS[self.report])


@dataclass
class ReportResult:
    sections: dict[str, list[dict]] = field(default_factory=dict)
    files: dict[str, dict[str, str]] = field(default_factory=dict)


def run_report(spark, request: ReportRequest, progress: Progress = lambda pct, stage: None) -> ReportResult:
    sections = request.sections()
    output = Path(request.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    progress(5, "decoding segments")
    records = segments_dataframe(spark, request.input_uri).persist()
    try:
        records.count()  # decode once; every section reads the cached rows
        progress(30, "computing reports")
        selected = reports.filter_records(records, request.start_ms, request.end_ms, request.topics)
        result = ReportResult()
        for done, name in enumerate(sections, start=1):
            source = records if name == "inputs" else selected
            frame = SECTION_BUILDERS[name](source)
            rows = [row.asDict() for row in frame.collect()]
            result.sections[name] = rows
            result.files[name] = write_section(frame.schema, rows, output, name)
            progress(30 + 65 * done // len(sections), f"computed {name}")
    finally:
        records.unpersist()
    return result


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    """A section's rows as the CSV the console offers for download (cells that would run as a
    spreadsheet formula neutralised, see core.csv_cells)."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(safe_dict(row) for row in rows)


def write_section(schema, rows: list[dict], output: Path, name: str) -> dict[str, str]:
    """``<name>.csv`` and ``<name>.parquet``, both written here on the driver from the collected
    rows: a Spark job per section to write a few hundred rows (the cluster's round trip, its
    scheduling, a temp directory to move the part file out of) cost more than the section took to
    compute. The Parquet columns are the section's Spark types, as Spark would have written them."""
    csv_path = output / f"{name}.csv"
    write_csv(csv_path, schema.fieldNames(), rows)
    parquet_path = output / f"{name}.parquet"
    table = pyarrow.Table.from_pylist(rows, schema=to_arrow_schema(schema))
    pyarrow.parquet.write_table(table, parquet_path)
    return {"csv": str(csv_path), "parquet": str(parquet_path)}
