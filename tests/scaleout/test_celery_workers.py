"""Scale-out 3: two real Celery worker processes on Redis, the console's database on PostgreSQL, a
real broker with real dead letters. Report runs and bulk DLQ replays are shared between the two
workers (Celery's task events say which worker ran what); a task delivered twice replays nothing
twice; a worker killed (SIGKILL) mid-run leaves its report run, or its replay job, to the heartbeat
rule, which marks it failed, while nothing is replayed twice.

One stack for the module (PostgreSQL and Redis databases of its own, a broker, two workers with a
Spark ``local[1]`` session each). Measured on 2 cores shared with other test runs (load ~5): the
module 86 s, ~13 s of it the stack; the sharing test 54-55 s of it (two Spark reports starting
their JVMs at once: ~45-50 s each whether the archive holds 1,500 messages or 100).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from django.test import override_settings

from analytics.models import ReportRun
from analytics.runner import fail_abandoned_runs
from analytics.tasks import RUN_REPORT
from broker.client.admin import MQAdmin
from broker.local_cluster import wait_until
from console.models import ReplayJob
from console.services import dlq
from console.tasks import fail_abandoned_jobs
from tests.analytics.workload import WorkloadWriter
from tests.cluster import OPS, make_dead_letters, start
from tests.scaleout.celery_workers import (
    CeleryWorker,
    TaskEvents,
    postgres_database,
    redis_database,
    routed_to,
    sender,
    worker_env,
)

REPLAY = "console.replay_dead_letters"
HOSTS = ("alpha@scaleout", "beta@scaleout")
DEAD_LETTERS = 8  # per group
# Consumer group → the topic its dead letters came from; one group per replay job of the module.
JOBS = ("split0", "split1", "split2", "split3", "twice", "kill0", "kill1", "killreplay")
GROUPS = {f"scaleout-{name}": f"ScaleOut{name.title()}" for name in JOBS}
TIMEOUT_S = 240


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory):
    running = start(OPS, tmp_path_factory.mktemp("scaleout-broker"))
    try:
        with MQAdmin(running.namesrv_addr) as admin:
            wait_until(lambda: admin.cluster_info().brokers, what="the broker to register")
        yield running.namesrv_addr
    finally:
        running.stop()


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("scaleout-workload")
    writer = WorkloadWriter(root / "store", seed=5)
    writer.write(messages=1500)
    writer.archive(root / "archive")
    return root / "archive"


@pytest.fixture(scope="module")
def stack(django_db_blocker, namesrv, tmp_path_factory):
    """PostgreSQL and Redis databases of the module's own, the two workers, the task events."""
    logs = tmp_path_factory.mktemp("celery-workers")
    with django_db_blocker.unblock(), postgres_database("i2_workers") as url, routed_to(url), \
            redis_database() as redis_url:  # fmt: skip
        env = worker_env(url, redis_url, SPARK_MASTER="local[1]", ANALYTICS_SHUFFLE_PARTITIONS="1",
                         ANALYTICS_HEARTBEAT_SECONDS="0.5", ANALYTICS_REPORTS_DIR=str(logs / "reports"),
                         BROKER_NAMESRV=namesrv)  # fmt: skip
        events = TaskEvents(redis_url).start()
        workers = {}
        try:
            for host in HOSTS:
                workers[host] = CeleryWorker(host, env, logs / f"{host.split('@')[0]}.log").start()
            send = sender(redis_url).send_task
            yield {"workers": workers, "events": events, "send": send, "namesrv": namesrv}
        finally:
            for worker in workers.values():
                worker.stop()
            events.stop()


def make_dead_letter_groups(namesrv: str, groups: list[str]) -> None:
    """Real dead letters: a push consumer per group fails every message with no retries left;
    then the DLQ is made readable (the console's "make readable"), as a replay needs."""
    for group in groups:
        make_dead_letters(namesrv, GROUPS[group], group, DEAD_LETTERS)
    with MQAdmin(namesrv) as admin:
        for group in groups:
            dlq.make_readable(admin, group)


def messages_in(namesrv: str, topic: str) -> int:
    with MQAdmin(namesrv) as admin:
        return sum(q.max_offset for q in admin.topic_status(topic).queues)


def replay_job(namesrv: str, group: str, rate: float) -> ReplayJob:
    return ReplayJob.objects.create(namesrv=namesrv, group=group, target="original", rate_per_second=rate)


def wait_all_finished(model, pks: list[int]):
    def finished():
        rows = list(model.objects.filter(pk__in=pks))
        return rows if all(row.finished for row in rows) and len(rows) == len(pks) else None

    return wait_until(finished, TIMEOUT_S, 0.5, f"{len(pks)} {model.__name__}s to finish")


def assert_replayed_once(namesrv: str, group: str) -> None:
    """The original topic holds the messages first sent plus one copy per dead letter."""
    dead = messages_in(namesrv, f"%DLQ%{group}")
    assert dead == DEAD_LETTERS
    assert messages_in(namesrv, GROUPS[group]) == DEAD_LETTERS + dead, group


@pytest.mark.timeout(600)
def test_report_runs_and_replays_are_shared_by_both_workers(stack, archive):
    send, events, namesrv = stack["send"], stack["events"], stack["namesrv"]
    groups = [f"scaleout-split{i}" for i in range(4)]
    make_dead_letter_groups(namesrv, groups)
    jobs = [replay_job(namesrv, group, rate=8) for group in groups]
    # The smallest report kind (one section besides the inputs); its Spark run is still ~10x a replay.
    runs = [ReportRun.objects.create(report="throughput", input_uri=str(archive)) for _ in range(2)]
    # report, replay, report, replay, replay, replay: a solo worker holds only the task it runs
    # (project.settings: a worker takes a task only when it has a free slot), so the first report
    # takes one worker and the first replay the other, which then takes the second report: the
    # reports always run on both. The remaining replays go to whichever is free first — which one
    # depends on how long each cold JVM took (a loaded run once gave all four replays to one).
    report_tasks = {send(RUN_REPORT, args=[runs[0].pk]).id: runs[0]}
    replay_tasks = {send(REPLAY, args=[jobs[0].pk]).id: jobs[0]}
    report_tasks[send(RUN_REPORT, args=[runs[1].pk]).id] = runs[1]
    replay_tasks.update({send(REPLAY, args=[job.pk]).id: job for job in jobs[1:]})

    finished_runs = wait_all_finished(ReportRun, [run.pk for run in runs])
    finished_jobs = wait_all_finished(ReplayJob, [job.pk for job in jobs])
    assert [run.status for run in finished_runs] == [ReportRun.DONE] * 2, [run.error for run in finished_runs]
    assert [(job.status, job.sent, job.failed) for job in finished_jobs] == [("done", DEAD_LETTERS, 0)] * 4
    tasks = {**replay_tasks, **report_tasks}
    wait_until(lambda: set(tasks) <= set(events.finished), 30, 0.2, "every task's end event")

    ran_by = {task: events.finished[task][0] for task in tasks}
    reports_by = Counter(ran_by[task] for task in report_tasks)
    replays_by = Counter(ran_by[task] for task in replay_tasks)
    print("reports per worker:", dict(reports_by), "replays per worker:", dict(replays_by))
    assert set(reports_by) == set(HOSTS) and set(replays_by) <= set(HOSTS)
    for group in groups:
        assert_replayed_once(namesrv, group)


def test_a_replay_delivered_twice_replays_each_dead_letter_once(stack):
    """The same job's task on both workers at once (a redelivered or re-published message): one
    delivery claims the job and replays it, the other replays nothing."""
    send, events, namesrv = stack["send"], stack["events"], stack["namesrv"]
    make_dead_letter_groups(namesrv, ["scaleout-twice"])
    job = replay_job(namesrv, "scaleout-twice", rate=8)
    deliveries = [send(REPLAY, args=[job.pk]).id for _ in range(2)]
    wait_until(lambda: set(deliveries) <= set(events.finished), TIMEOUT_S, 0.2, "both deliveries to end")
    job.refresh_from_db()
    assert (job.status, job.total, job.sent, job.failed) == ("done", DEAD_LETTERS, DEAD_LETTERS, 0)
    assert {events.finished[task][1] for task in deliveries} == {"task-succeeded"}
    print("deliveries ran on:", [events.finished[task][0] for task in deliveries])
    assert_replayed_once(namesrv, "scaleout-twice")


@pytest.mark.timeout(600)
def test_a_killed_worker_s_run_is_failed_and_nothing_is_replayed_twice(stack, archive):
    send, events, namesrv, workers = stack["send"], stack["events"], stack["namesrv"], stack["workers"]
    groups = ["scaleout-kill0", "scaleout-kill1"]
    make_dead_letter_groups(namesrv, groups)
    run = ReportRun.objects.create(report="all", input_uri=str(archive))
    report_task = send(RUN_REPORT, args=[run.pk]).id

    def beating():
        fresh = ReportRun.objects.get(pk=run.pk)
        beat, started_at = fresh.heartbeat_at, fresh.started_at
        return fresh.status == ReportRun.RUNNING and beat and started_at is not None and beat > started_at

    wait_until(beating, TIMEOUT_S, 0.1, "the run to start and beat")
    doomed = wait_until(lambda: next((h for h, w in workers.items() if w.received(report_task)), None), 30,
                        0.1, "a worker's log to show it took the run")  # fmt: skip
    survivor = next(host for host in HOSTS if host != doomed)
    # The other worker is idle: it takes the replays while the doomed one is busy with the report.
    jobs = [replay_job(namesrv, group, rate=4) for group in groups]
    replay_tasks = [send(REPLAY, args=[job.pk]).id for job in jobs]

    def replaying():
        return ReplayJob.objects.filter(pk=jobs[0].pk, sent__gt=0).exists()

    wait_until(replaying, TIMEOUT_S, 0.1, "the first replay to be under way")
    assert ReportRun.objects.get(pk=run.pk).status == ReportRun.RUNNING, "the run ended before the kill"
    workers[doomed].kill()
    killed_at = time.monotonic()

    finished_jobs = wait_all_finished(ReplayJob, [job.pk for job in jobs])
    assert [(job.status, job.sent, job.failed) for job in finished_jobs] == [("done", DEAD_LETTERS, 0)] * 2
    wait_until(lambda: set(replay_tasks) <= set(events.finished), 30, 0.2, "every replay's end event")
    assert {events.finished[task][0] for task in replay_tasks} == {survivor}
    for group in groups:
        assert_replayed_once(namesrv, group)

    # Nobody recorded the run's end: it stays running until its heartbeat has been silent long enough.
    assert ReportRun.objects.get(pk=run.pk).status == ReportRun.RUNNING
    with override_settings(ANALYTICS_ABANDONED_AFTER=60):
        assert fail_abandoned_runs() == 0
    with override_settings(ANALYTICS_ABANDONED_AFTER=2):
        wait_until(fail_abandoned_runs, 30, 0.5, "the run failed once its heartbeat was silent for 2 s")
    run.refresh_from_db()
    assert run.status == ReportRun.FAILED and "the worker running this report stopped" in run.error
    assert run.heartbeat_at is not None
    # The killed worker's task was acknowledged when it started: no other worker runs it again.
    assert not workers[survivor].received(report_task) and report_task not in events.finished
    print(f"run failed {time.monotonic() - killed_at:.1f} s after the kill")


@pytest.mark.parametrize("status", [ReplayJob.STATUS_RUNNING, ReplayJob.STATUS_DONE, ReplayJob.STATUS_FAILED])
def test_a_delivery_of_a_job_claimed_already_replays_nothing(db, status):
    """The claim alone, without a cluster: the job's name server is never contacted (there is none)."""
    from console.tasks import replay_dead_letters

    job = ReplayJob.objects.create(namesrv="127.0.0.1:1", group="g", target="original", status=status, sent=3)
    assert replay_dead_letters(job.pk) == {"sent": 3, "failed": 0, "status": status, "duplicate": True}
    job.refresh_from_db()
    assert (job.status, job.sent, job.finished_at) == (status, 3, None)


@pytest.mark.timeout(600)
def test_a_worker_killed_mid_replay_leaves_its_job_failed_and_nothing_replayed_twice(stack):
    """The killed worker is the one replaying: its job stays running until its heartbeat has been
    silent for ANALYTICS_ABANDONED_AFTER, then is failed with how far it got; the target holds no
    copy twice, and a redelivery of the job's task does not resume it. The worker is started again
    afterwards, so the module's other tests keep two workers."""
    send, events, namesrv, workers = stack["send"], stack["events"], stack["namesrv"], stack["workers"]
    group = "scaleout-killreplay"
    make_dead_letter_groups(namesrv, [group])
    job = replay_job(namesrv, group, rate=2)  # 8 dead letters: ~4 s of sending
    task = send(REPLAY, args=[job.pk]).id
    wait_until(lambda: ReplayJob.objects.filter(pk=job.pk, sent__gt=0).exists(), TIMEOUT_S, 0.1,
               "the replay to be under way")  # fmt: skip
    doomed = wait_until(lambda: next((h for h, w in workers.items() if w.received(task)), None), 30, 0.1,
                        "a worker's log to show it took the replay")  # fmt: skip
    workers[doomed].kill()
    try:
        job.refresh_from_db()
        assert job.status == ReplayJob.STATUS_RUNNING and job.sent < DEAD_LETTERS, "it ended before the kill"
        with override_settings(ANALYTICS_ABANDONED_AFTER=60):
            assert fail_abandoned_jobs() == 0
        with override_settings(ANALYTICS_ABANDONED_AFTER=2):
            wait_until(fail_abandoned_jobs, 30, 0.5, "the job failed once its heartbeat was silent for 2 s")
        job.refresh_from_db()
        beat, started_at = job.heartbeat_at, job.started_at
        assert job.status == ReplayJob.STATUS_FAILED and beat and started_at and beat > started_at
        assert f"the worker replaying this job stopped; {job.sent} of {DEAD_LETTERS} sent" in job.detail
        copies = messages_in(namesrv, GROUPS[group]) - DEAD_LETTERS
        # Copies sent after the last progress save are in the topic but not counted; none twice.
        assert job.sent <= copies <= DEAD_LETTERS, (job.sent, copies)

        workers[doomed].start()  # (the other one may have been killed by another test)
        redelivery = send(REPLAY, args=[job.pk]).id  # e.g. the task message restored to the queue
        wait_until(lambda: redelivery in events.finished, TIMEOUT_S, 0.2, "the redelivery to end")
        job.refresh_from_db()
        assert job.status == ReplayJob.STATUS_FAILED
        assert messages_in(namesrv, GROUPS[group]) - DEAD_LETTERS == copies
        print(f"killed after {job.sent} of {DEAD_LETTERS} recorded sent, {copies} copies in the target")
    finally:
        if workers[doomed].proc.poll() is not None:
            workers[doomed].start()
