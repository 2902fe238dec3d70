"""Issue 31, §5: a report's CSV download neutralises text cells a spreadsheet would run as a formula
(OWASP's CSV injection: a leading =, +, -, @, tab or carriage return gets a ' in front); numbers,
negative ones included, stay numbers. Django's test client on a run whose CSV the job's writer made.

Before: the cells came back as written ("=HYPERLINK(...)", "@SUM(A1)", "-2+3").
"""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from analytics.models import ReportRun
from analytics.spark.job import write_csv
from tests.analytics.test_analytics_pages import operator_client  # noqa: F401  (a fixture)

ROWS = [
    {"topic": '=HYPERLINK("http://evil.example","x")', "group": "@SUM(A1)", "messages": -3, "rate": -0.5},
    {"topic": "-2+3", "group": "+1", "messages": 7, "rate": 0.25},
    {"topic": "\tlead", "group": "\rcr", "messages": 0, "rate": None},
    {"topic": "Orders", "group": "a=b", "messages": 1, "rate": 1.0},
]


@pytest.mark.django_db
def test_a_report_csv_neutralises_formulas_and_keeps_numbers(operator_client, settings, tmp_path):  # noqa: F811
    settings.ANALYTICS_REPORTS_DIR = tmp_path
    path = tmp_path / "run-1" / "retry_dlq.csv"
    path.parent.mkdir()
    write_csv(path, ["topic", "group", "messages", "rate"], ROWS)
    run = ReportRun.objects.create(report="all", input_uri="/a", status=ReportRun.DONE, progress=100,
                                   output_files={"retry_dlq": {"csv": str(path)}})  # fmt: skip
    response = operator_client.get(reverse("analytics:run_download", args=[run.pk, "retry_dlq", "csv"]))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["topic"], r["group"]) for r in rows] == [
        ('\'=HYPERLINK("http://evil.example","x")', "'@SUM(A1)"),
        ("'-2+3", "'+1"),
        ("'\tlead", "'\rcr"),
        ("Orders", "a=b"),
    ]
    assert [(r["messages"], r["rate"]) for r in rows] == [
        ("-3", "-0.5"),
        ("7", "0.25"),
        ("0", ""),
        ("1", "1.0"),
    ]
