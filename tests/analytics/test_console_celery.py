"""Acceptance 2 and 3: reports started from the console and by a beat schedule created in the
console, run by a real Celery worker process (and a real beat process) on real Spark."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client, override_settings
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from analytics.models import ReportRun
from analytics.tasks import run_report
from broker.local_cluster import celery_command, wait_until
from core.models import AuditRecord
from tests.analytics.workload import WorkloadWriter

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 240


# A worker of one task at a time that talks to no other worker: what the tests drive.
SOLO_WORKER = ["worker", "-l", "info", "--pool", "solo", "--without-gossip", "--without-mingle",
               "--without-heartbeat"]  # fmt: skip


class CeleryProcess:
    """``celery -A project <args>`` with this test's settings; output kept in a log file."""

    def __init__(self, args: list[str], env: dict, log: Path, ready_marker: str) -> None:
        self.log = log
        self.handle = open(log, "wb")  # noqa: SIM115 (closed in stop(), after the process ends)
        self.proc = subprocess.Popen(
            celery_command(*args),
            cwd=log.parent, env=env, stdout=self.handle, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_until(
            lambda: ready_marker in self.output() or self.proc.poll() is not None, 90, 0.5, "celery start"
        )
        assert self.proc.poll() is None, self.output()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.handle.close()


def database_url(settings_dict: dict) -> str:
    """The test database, as a URL the worker's settings read from DATABASE_URL."""
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    user, password = settings_dict.get("USER") or "", settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host, port = settings_dict.get("HOST") or "127.0.0.1", settings_dict.get("PORT") or 5432
    return f"postgresql://{auth}{host}:{port}/{settings_dict['NAME']}"


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, WorkloadWriter]:
    root = tmp_path_factory.mktemp("console-workload")
    writer = WorkloadWriter(root / "store", seed=11)
    writer.write(messages=240)
    writer.archive(root / "archive")
    return root / "archive", writer


@pytest.fixture(scope="module")
def worker_env(django_db_setup, django_db_blocker, tmp_path_factory):
    from django.db import connection

    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=database_url(connection.settings_dict),
        SPARK_MASTER="local[2]", ANALYTICS_SHUFFLE_PARTITIONS="2", SPARK_LOCAL_IP="127.0.0.1",
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
    )  # fmt: skip
    return env


@pytest.fixture(scope="module")
def worker(worker_env, tmp_path_factory):
    log = tmp_path_factory.mktemp("celery-worker") / "worker.log"
    process = CeleryProcess(SOLO_WORKER, worker_env, log, "ready.")
    yield process
    process.stop()


@pytest.fixture
def operator_client(transactional_db) -> Client:
    user = User.objects.create_user("olga", password="not-used-here")
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    client = Client()
    client.force_login(user)
    return client


def wait_finished(run_id: int) -> ReportRun:
    def finished():
        run = ReportRun.objects.get(pk=run_id)
        return run if run.finished else None

    return wait_until(finished, RUN_TIMEOUT, 0.5, f"run {run_id} to finish")


def test_a_report_started_in_the_console_runs_on_the_worker(operator_client, worker, archive):
    archive_dir, writer = archive
    response = operator_client.post(
        reverse("analytics:run_start"), {"report": "all", "input_uri": str(archive_dir)}
    )
    assert response.status_code == 302, response.content
    run = ReportRun.objects.get()
    assert response.url == reverse("analytics:run_detail", args=[run.pk])
    assert AuditRecord.objects.filter(action="analytics.run.start", target=f"run {run.pk}").exists()
    page = operator_client.get(response.url).content.decode()
    assert 'hx-trigger="every 1s"' in page  # the page polls while the run is not finished

    seen = []

    def poll_status():
        fragment = operator_client.get(reverse("analytics:run_status", args=[run.pk])).content.decode()
        run.refresh_from_db()
        seen.append((run.status, run.progress))
        return run.finished and fragment

    fragment = wait_until(poll_status, RUN_TIMEOUT, 1, "the run to finish")
    assert run.status == ReportRun.DONE, run.error + worker.output()[-3000:]
    assert 'data-status="done"' in fragment and "hx-get" not in fragment  # polling stops
    progress = [p for _, p in seen]
    assert progress == sorted(progress) and progress[-1] == 100

    page = operator_client.get(reverse("analytics:run_detail", args=[run.pk])).content.decode()
    for chart in ("throughput", "sizes", "latency", "dlq"):
        url = reverse("analytics:run_chart", args=[run.pk, chart])
        assert url in page
        image = operator_client.get(url)
        assert image.status_code == 200 and image.content.startswith(b"\x89PNG"), chart
    csv_url = reverse("analytics:run_download", args=[run.pk, "transactions", "csv"])
    parquet_url = reverse("analytics:run_download", args=[run.pk, "transactions", "parquet"])
    assert csv_url in page and parquet_url in page
    csv_text = b"".join(operator_client.get(csv_url).streaming_content).decode()
    assert csv_text.splitlines()[0] == "topic,transactions,committed,rolled_back,pending,given_up"
    assert b"".join(operator_client.get(parquet_url).streaming_content).startswith(b"PAR1")
    overall = next(row for row in run.rows("transactions") if row["topic"] == "*")
    assert overall["transactions"] == len(writer.truth.transactions)


def test_a_failed_run_shows_its_reason(operator_client, worker, tmp_path):
    # The console refuses to start a run on an empty archive; a scheduled run can still meet one.
    missing = tmp_path / "no-such-archive"
    run = ReportRun.objects.create(report="sizes", input_uri=str(missing), trigger=ReportRun.TRIGGER_SCHEDULE)
    run_report.delay(run.pk)
    run = wait_finished(run.pk)
    assert run.status == ReportRun.FAILED
    assert "no archived segments" in run.error and "archiveUri" in run.error  # and what to do
    page = operator_client.get(reverse("analytics:run_detail", args=[run.pk])).content.decode()
    assert "The run failed" in page and "no archived segments" in page


def test_a_schedule_created_in_the_console_triggers_a_run(
    operator_client, worker, worker_env, archive, tmp_path, settings
):
    archive_dir, _ = archive
    settings.ANALYTICS_MIN_INTERVAL_SECONDS = 1  # a schedule that fires within the test
    form = {
        "name": "hourly-throughput", "report": "throughput", "window_hours": "0", "every": "2",
        "period": "seconds", "input_uri": str(archive_dir), "enabled": "on",
    }  # fmt: skip
    response = operator_client.post(reverse("analytics:schedule_create"), form)
    assert response.status_code == 302, response.content
    task = PeriodicTask.objects.get(name="hourly-throughput")
    assert AuditRecord.objects.filter(action="analytics.schedule.create", target=task.name).exists()

    beat = CeleryProcess(["beat", "-l", "info", "--max-interval", "1"], worker_env, tmp_path / "beat.log",
                         "beat: Starting")  # fmt: skip
    try:
        run = wait_until(lambda: ReportRun.objects.filter(trigger=ReportRun.TRIGGER_SCHEDULE).first(), 60,
                         0.5, "beat to start a run")  # fmt: skip
    finally:
        beat.stop()
    assert run.schedule_name == "hourly-throughput" and run.report == "throughput"
    run = wait_finished(run.pk)
    assert run.status == ReportRun.DONE, run.error
    assert run.rows("throughput")


def test_schedule_editor_edits_disables_and_deletes(operator_client):
    form = {"name": "nightly", "report": "all", "window_hours": "24", "crontab": "0 3 * * *", "enabled": "on"}
    assert operator_client.post(reverse("analytics:schedule_create"), form).status_code == 302
    task = PeriodicTask.objects.get(name="nightly")
    assert (task.crontab.minute, task.crontab.hour, task.enabled) == ("0", "3", True)

    edited = dict(form, crontab="", every="6", period="hours")
    assert operator_client.post(reverse("analytics:schedule_edit", args=[task.pk]), edited).status_code == 302
    task.refresh_from_db()
    assert (task.interval.every, task.interval.period, task.crontab) == (6, "hours", None)
    assert "6 hours" in operator_client.get(reverse("analytics:schedule_list")).content.decode()

    operator_client.post(reverse("analytics:schedule_toggle", args=[task.pk]))
    task.refresh_from_db()
    assert task.enabled is False
    operator_client.post(reverse("analytics:schedule_delete", args=[task.pk]))
    assert not PeriodicTask.objects.filter(name="nightly").exists()
    actions = set(AuditRecord.objects.values_list("action", flat=True))
    assert {"analytics.schedule.update", "analytics.schedule.toggle", "analytics.schedule.delete"} <= actions
    assert AuditRecord.objects.get(action="analytics.schedule.toggle").detail == "disabled"


@pytest.mark.parametrize(
    ("form", "reason"),
    [
        ({"name": "x", "report": "all", "window_hours": "1"}, "give either an interval"),
        ({"name": "x", "report": "all", "window_hours": "1", "crontab": "61 * * * *"}, "invalid crontab"),
        (
            {"name": "x", "report": "nope", "window_hours": "1", "every": "1", "period": "hours"},
            "valid choice",
        ),
    ],
)
def test_bad_schedules_are_refused_with_a_reason(operator_client, form, reason):
    response = operator_client.post(reverse("analytics:schedule_create"), form)
    assert response.status_code == 400 and reason in response.content.decode()
    assert not PeriodicTask.objects.filter(name="x").exists()


def test_bad_run_parameters_are_refused(operator_client):
    form = {
        "report": "all",
        "start_time": "2026-11-23 10:00",
        "end_time": "2026-11-23 09:00",
        "topics": "a b",
    }
    response = operator_client.post(reverse("analytics:run_start"), form)
    assert response.status_code == 400
    text = response.content.decode()
    assert "the start must be before the end" in text and "contains characters" in text
    assert not ReportRun.objects.exists()
    assert AuditRecord.objects.filter(action="analytics.run.start", result=AuditRecord.RESULT_FAILED).exists()


def test_viewers_read_but_cannot_start_or_schedule(transactional_db):
    viewer = User.objects.create_user("vic")
    viewer.groups.add(Group.objects.get_or_create(name="viewer")[0])
    client = Client()
    client.force_login(viewer)
    assert client.get(reverse("analytics:run_list")).status_code == 200
    assert client.post(reverse("analytics:run_start"), {"report": "all"}).status_code == 403
    assert client.get(reverse("analytics:schedule_create")).status_code == 403
    assert not ReportRun.objects.exists()
    with override_settings(LOGIN_URL="/login/"):  # the console's login view lives in another branch
        response = Client().get(reverse("analytics:run_list"))
    assert response.status_code == 302 and response["Location"].startswith(
        "/login/"
    )  # anonymous: log in first


def test_a_run_whose_worker_was_killed_is_shown_failed(operator_client, worker_env, archive, tmp_path):
    """A worker killed mid-run (SIGKILL: nothing of it can record the end) leaves its run
    'running'; once its heartbeat has been silent for ANALYTICS_ABANDONED_AFTER the pages show it
    failed, with the reason. Its own queue, so the module's worker cannot take the run."""
    archive_dir, _ = archive
    env = {**worker_env, "ANALYTICS_HEARTBEAT_SECONDS": "0.5"}
    args = ["worker", "-l", "info", "--pool", "solo", "-Q", "doomed", "--without-gossip", "--without-mingle",
            "--without-heartbeat"]  # fmt: skip
    doomed = CeleryProcess(args, env, tmp_path / "doomed.log", "ready.")
    run = ReportRun.objects.create(report="all", input_uri=str(archive_dir))
    try:
        run_report.apply_async((run.pk,), queue="doomed")

        def beating():
            fresh = ReportRun.objects.get(pk=run.pk)
            beat, started_at = fresh.heartbeat_at, fresh.started_at
            if fresh.status != ReportRun.RUNNING or beat is None or started_at is None:
                return False  # not started yet
            return beat > started_at  # the heartbeat thread beat

        wait_until(beating, 120, 0.5, "the run to start and beat")
    finally:
        doomed.proc.kill()
        doomed.stop()
    assert ReportRun.objects.get(pk=run.pk).status == ReportRun.RUNNING  # nobody recorded the end

    def detail_page() -> str:
        return operator_client.get(reverse("analytics:run_detail", args=[run.pk])).content.decode()

    def failed_page() -> str:
        page = detail_page()
        return page if "The run failed" in page else ""

    with override_settings(ANALYTICS_ABANDONED_AFTER=60):
        assert "The run failed" not in detail_page()  # silent for less than that: still running
    with override_settings(ANALYTICS_ABANDONED_AFTER=2):
        page = wait_until(failed_page, 30, 0.5, "the run shown failed once its heartbeat was silent for 2 s")
    assert "the worker running this report stopped" in page
    run.refresh_from_db()
    assert run.status == ReportRun.FAILED and run.finished_at is not None
