"""Dead-letter commands: make a group's DLQ topic readable, and replay dead letters — one now, or
the selected ones / all matching a filter as a Celery job. Every input is checked before anything is
sent or any job is created."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.common.topic_config import dlq_topic, validate_topic
from console import replay_audit
from console.commands.parsing import parse_datetime_ms, parse_float
from console.models import ReplayJob
from console.services import dlq
from console.tasks import replay_dead_letters
from core.boundary import Actor, Cluster, Invalid, Outcome, Params, command
from core.models import AuditRecord

MAX_SELECTED = 10_000
MAX_RATE = 10_000
SCOPES = ("one", "selected", "all")


def check_group(group: str) -> str:
    """A consumer group whose DLQ topic name is valid; ``Invalid`` (a 400) otherwise."""
    problem = validate_topic(dlq_topic(group))
    if problem:
        raise Invalid(f"bad consumer group name: {problem}", target=group)
    return group


def dead_letter_filter(data) -> dlq.DeadLetterFilter:
    return dlq.DeadLetterFilter(
        key=(data.get("key") or "").strip(),
        tag=(data.get("tag") or "").strip(),
        begin_ms=parse_datetime_ms(data.get("begin"), "from"),
        end_ms=parse_datetime_ms(data.get("end"), "to"),
    )


def replay_target(data) -> str:
    target = data.get("target", dlq.TARGET_ORIGINAL)
    if target not in dlq.TARGETS:
        raise Invalid(f"replay target must be one of {', '.join(dlq.TARGETS)}")
    return target


@dataclass(frozen=True)
class MakeReadable(Params):
    group: str

    @classmethod
    def parse(cls, group: str) -> MakeReadable | Invalid:
        try:
            return cls(check_group(group))
        except Invalid as exc:
            return exc

    @property
    def target(self) -> str:
        return dlq_topic(self.group)


@command("dlq.make_readable")
def make_readable(actor: Actor, cluster: Cluster, params: MakeReadable) -> Outcome:
    changed = dlq.make_readable(cluster.admin, params.group)
    return Outcome(params.target, "perm set to 6 (read+write)", {"brokers": changed}, changed)


@dataclass(frozen=True)
class Replay(Params):
    """``scope`` one (``message_ids`` holds it), selected (``message_ids``) or all matching
    ``filters``; ``rate`` messages per second for a job (0: as fast as the brokers take them)."""

    group: str
    target_kind: str
    scope: str
    rate: float = 0
    message_ids: tuple[str, ...] = ()
    filters: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, group: str, data) -> Replay | Invalid:
        fields = {k: v for k, v in data.lists() if k != "csrfmiddlewaretoken"}  # every value of each field
        try:
            check_group(group)
            target = replay_target(data)
            rate = parse_float(data.get("rate"), "rate (messages per second)", 0, MAX_RATE)
            scope = data.get("scope", "selected")
            if scope == "one":
                offset_msg_id = (data.get("ids") or "").strip()
                if not offset_msg_id:
                    raise Invalid("name the dead letter to replay")
                return cls(group, target, scope, rate, (offset_msg_id,))
            if scope not in SCOPES:
                raise Invalid("scope must be one, selected or all")
            if scope == "all":
                flt = dead_letter_filter(data)
                filters = {"key": flt.key, "tag": flt.tag, "begin_ms": flt.begin_ms, "end_ms": flt.end_ms}
                return cls(group, target, scope, rate, filters=filters)
            ids = tuple(i for i in data.getlist("ids") if i.strip())
            if not ids:
                raise Invalid("select at least one dead letter (or choose to replay all)")
            if len(ids) > MAX_SELECTED:
                raise Invalid(
                    f"at most {MAX_SELECTED} messages can be selected; replay all with a filter instead"
                )
            return cls(group, target, scope, rate, ids)
        except Invalid as exc:
            return Invalid(exc.reason, target=dlq_topic(group), parameters=fields)

    @property
    def target(self) -> str:
        return dlq_topic(self.group)

    def audit_parameters(self) -> dict[str, Any]:
        return {"scope": self.scope, "target": self.target_kind}


@command(replay_audit.REPLAY)
def replay(actor: Actor, cluster: Cluster, params: Replay) -> Outcome:
    """One dead letter: sent now, its outcome the value (failed when the send was refused). More:
    a ``ReplayJob`` queued for the Celery worker, the value (failed when the queue is down)."""
    if params.scope == "one":
        return _replay_one(cluster, params)
    job = ReplayJob.objects.create(
        user=actor.user,
        namesrv=cluster.checked_namesrv(),
        group=params.group,
        target=params.target_kind,
        rate_per_second=params.rate,
        message_ids=list(params.message_ids),
        filters=params.filters,
    )
    try:
        replay_dead_letters.delay(job.pk)
    except Exception as exc:  # the task queue (Redis) is down: say so, keep the job as failed
        job.status, job.detail = ReplayJob.STATUS_FAILED, f"could not queue the job: {exc}"
        job.save(update_fields=["status", "detail"])
        return Outcome(params.target, job.detail, {"job": job.pk}, job, failed=True)
    recorded = {
        "scope": params.scope,
        "target": params.target_kind,
        "rate": params.rate,
        "job": job.pk,
        "count": len(job.message_ids) or None,
        "filter": job.filters,
    }
    return Outcome(params.target, f"replay job {job.pk} queued", recorded, job)


def _replay_one(cluster: Cluster, params: Replay) -> Outcome:
    try:
        messages = dlq.find_dead_letters(cluster.admin, params.group, list(params.message_ids))
    except ValueError as exc:
        raise Invalid(str(exc), target=params.target, parameters=params.audit_parameters()) from None
    (outcome,) = list(dlq.replay(cluster.producer, params.group, messages, params.target_kind))
    fields = replay_audit.outcome_fields(outcome, scope="one", target=params.target_kind)
    failed = fields["result"] == AuditRecord.RESULT_FAILED
    return Outcome(params.target, fields["detail"], fields["parameters"], outcome, failed=failed)
