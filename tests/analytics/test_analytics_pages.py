"""Issue 19 items 9 and 15 on the analytics pages (Django's test client, no worker needed): an
empty or missing archive gets a page saying what to do, and report output is formatted for
people — hours as UTC dates, rates as percentages, floats rounded, schedules described in words,
forms laid out with labels."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django import forms
from django.contrib.auth.models import Group, User
from django.db.backends.base.operations import BaseDatabaseOperations
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from analytics.forms import MAX_WINDOW_HOURS, RunForm, ScheduleForm
from analytics.models import ReportRow, ReportRun
from analytics.spark.segments import segments_location

HOUR_MS = 1_764_072_000_000  # 2025-11-25 12:00 UTC


@pytest.fixture
def operator_client(db) -> Client:
    user = User.objects.create_user("opal")
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("make_dir", [False, True], ids=["missing", "empty"])
def test_an_empty_archive_gets_a_page_that_says_what_to_do(operator_client, tmp_path, make_dir):
    archive = tmp_path / "archive"
    if make_dir:
        (archive / "commitlog").mkdir(parents=True)
    with override_settings(ANALYTICS_ARCHIVE_URI=str(archive)):
        listing = operator_client.get(reverse("analytics:run_list")).content.decode()
        assert "No archived commit-log segments" in listing and "archiveUri" in listing
        response = operator_client.post(reverse("analytics:run_start"), {"report": "all"})
    page = response.content.decode()
    assert response.status_code == 400, page
    assert "nothing to report on" in page and "mappedFileSizeCommitLog" in page
    assert "Traceback" not in page and "FileNotFoundError" not in page
    assert not ReportRun.objects.exists()  # no worker spends a Spark session on nothing


def test_the_job_refuses_an_empty_archive_with_the_same_explanation(tmp_path):
    (tmp_path / "commitlog").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no archived segments in .* yet\. A broker copies"):
        segments_location(str(tmp_path))
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(b"\0" * 64)
    (tmp_path / "commitlog" / f".{8388608:020d}.part").write_bytes(b"\0" * 64)
    assert segments_location(str(tmp_path)) == str((tmp_path / "commitlog").resolve())


def test_the_analytics_page_tells_what_the_archive_holds(operator_client, tmp_path):
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(b"\0" * 2048)
    with override_settings(ANALYTICS_ARCHIVE_URI=str(tmp_path)):
        page = operator_client.get(reverse("analytics:run_list")).content.decode()
    assert "1 archived segment," in page and "2.0\xa0KB" in page


def _done_run() -> ReportRun:
    run = ReportRun.objects.create(report="all", input_uri="/a", status=ReportRun.DONE, progress=100)
    sections: dict[str, list[dict]] = {
        "throughput": [{"hour_start_ms": HOUR_MS, "topic": "Orders", "kind": "normal", "messages": 7,
                        "bytes": 700}],
        "size": [{"topic": "*", "messages": 7, "min": 100.0, "p50": 100.0, "p90": 100.0, "p95": 100.0,
                  "p99": 100.0, "max": 100.0, "mean": 1234.5678}],
        "size_histogram": [{"le": 128, "messages": 7}, {"le": None, "messages": 0}],
        "retry_dlq": [{"group": "g", "source_topics": "Orders", "source_messages": 8, "retry_messages": 1,
                       "retried_messages": 1, "dlq_messages": 1, "retry_rate": 0.123456, "dlq_rate": None}],
    }  # fmt: skip
    for section, rows in sections.items():
        for i, row in enumerate(rows):
            ReportRow.objects.create(run=run, section=section, position=i, values=row)
    return run


def test_report_tables_show_dates_percentages_and_rounded_figures(operator_client):
    run = _done_run()
    page = operator_client.get(reverse("analytics:run_detail", args=[run.pk])).content.decode()
    assert "2025-11-25 12:00" in page and str(HOUR_MS) not in page
    assert "Hour (UTC)" in page
    assert "1234.57" in page and "1234.5678" not in page
    assert '<td class="num">100</td>' in page  # a whole figure shows no decimals
    assert "12.3 %" in page and "0.123456" not in page
    assert "≤ 128" in page and ">more<" in page


def test_schedules_are_listed_in_words_not_json(operator_client):
    form = {"name": "nightly", "report": "throughput", "topics": "Orders, Payments", "window_hours": "6",
            "crontab": "0 3 * * *", "enabled": "on"}  # fmt: skip
    assert operator_client.post(reverse("analytics:schedule_create"), form).status_code == 302
    page = operator_client.get(reverse("analytics:schedule_list")).content.decode()
    assert "Throughput per topic per hour · topics Orders, Payments · last 6 h" in page
    assert "&quot;report&quot;" not in page and '"window_hours"' not in page


def test_forms_are_labelled_and_use_the_consoles_layout(operator_client):
    for url in (reverse("analytics:run_start"), reverse("analytics:schedule_create")):
        page = operator_client.get(url).content.decode()
        assert 'class="stack"' in page and "<p>" not in page.split("<form", 1)[1].split("</form>")[0]
        assert '<label for="id_report">' in page
    page = operator_client.get(reverse("analytics:run_start")).content.decode()
    assert 'type="datetime-local"' in page


def test_the_time_pickers_values_are_read_as_utc(db):
    form = RunForm({"report": "all", "start_time": "2026-11-23T08:00", "end_time": "2026-11-23T09:30"})
    assert form.is_valid(), form.errors
    start, end = form.cleaned_data["start_time"], form.cleaned_data["end_time"]
    assert (start.isoformat(), end.isoformat()) == ("2026-11-23T08:00:00+00:00", "2026-11-23T09:30:00+00:00")


SCHEDULE = {"name": "nightly", "report": "all", "topics": "", "window_hours": "24", "enabled": "on"}


def _schedule_refused(client, fields: dict, reason: str) -> None:
    response = client.post(reverse("analytics:schedule_create"), {**SCHEDULE, **fields})
    assert response.status_code == 400, response.status_code
    assert reason in response.content.decode(), response.content.decode()[-2000:]
    assert not PeriodicTask.objects.filter(name=SCHEDULE["name"]).exists()


def test_schedule_values_beyond_their_bounds_are_refused(operator_client):
    """What a schedule can hold and run: an interval of a minute to a year, a window of at most ten
    years; numbers a column cannot hold (99999999999 on PostgreSQL's integer) are refused the same."""
    interval = {"period": "hours", "crontab": ""}
    _schedule_refused(operator_client, {**interval, "every": "99999999999"}, "less than or equal to")
    _schedule_refused(operator_client, {**interval, "every": "8785"}, "at most a year (366 days)")
    _schedule_refused(operator_client, {"every": "59", "period": "seconds"}, "at least 60 seconds")
    _schedule_refused(operator_client, {**interval, "every": "1", "window_hours": "100000000"},
                      "less than or equal to 87600")  # fmt: skip
    month = ",".join(["1"] * 40)  # 79 characters, which celery reads; the column holds 64
    _schedule_refused(operator_client, {"crontab": f"0 3 * {month} *"}, "the month field is longer than 64")
    ok = operator_client.post(reverse("analytics:schedule_create"), {**SCHEDULE, "every": "60",
                                                                    "period": "seconds"})  # fmt: skip
    assert ok.status_code == 302 and PeriodicTask.objects.get(name="nightly").interval.every == 60


def test_schedule_form_bounds_fit_the_columns_on_postgresql(db):
    """Checked here on SQLite, for PostgreSQL: each bounded field of the form fits its column."""
    name, every, window = (ScheduleForm.base_fields[f] for f in ("name", "every", "window_hours"))
    assert isinstance(name, forms.CharField) and isinstance(every, forms.IntegerField)
    assert name.max_length == PeriodicTask._meta.get_field("name").max_length
    low, high = BaseDatabaseOperations.integer_field_ranges["IntegerField"]  # PostgreSQL's integer
    assert every.min_value is not None and every.max_value is not None
    assert low <= every.min_value and every.max_value <= high
    assert isinstance(window, forms.IntegerField) and window.max_value == MAX_WINDOW_HOURS
    now = timezone.now()
    assert now - timedelta(hours=MAX_WINDOW_HOURS) < now  # a run of the widest window can start
