"""The live tail's saved filters (per user): save one under a name, delete one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, models

from broker.common.topic_config import validate_topic
from console.models import SavedTailFilter
from console.tail.filters import TailFilterError, compile_filter
from core.boundary import Actor, Cluster, Invalid, Missing, Outcome, Params, command

FILTER_FIELDS = ("tags", "sql", "key")


def _too_long(fields: dict[str, str]) -> str | None:
    """Why a value does not fit its column (PostgreSQL refuses it, SQLite would keep it), or None:
    the limits are the model's own."""
    for name, value in fields.items():
        column = SavedTailFilter._meta.get_field(name)
        limit = column.max_length if isinstance(column, models.Field) else None
        if limit is not None and len(value) > limit:
            return f"the {name} is longer than {limit} characters"
    return None


@dataclass(frozen=True)
class SaveTailFilter(Params):
    name: str
    fields: dict[str, str]  # topic and FILTER_FIELDS, as typed (stripped)

    @classmethod
    def parse(cls, data) -> SaveTailFilter | Invalid:
        name = (data.get("name") or "").strip()
        fields = {k: (data.get(k) or "").strip() for k in ("topic", *FILTER_FIELDS)}
        if not name:
            return Invalid("give the filter a name", target="", parameters=fields)
        reason = _too_long({"name": name, **fields})
        if reason:
            return Invalid(reason, target=name[:80], parameters={k: v[:255] for k, v in fields.items()})
        if fields["topic"] and validate_topic(fields["topic"]):  # empty: every topic
            return Invalid(f"topic: {validate_topic(fields['topic'])}", target=name, parameters=fields)
        try:
            compile_filter(fields["tags"], fields["sql"], fields["key"])
        except TailFilterError as exc:
            return Invalid(str(exc), target=name, parameters=fields)
        return cls(name, fields)

    @property
    def target(self) -> str:
        return self.name

    def audit_parameters(self) -> dict[str, Any]:
        return self.fields


@command("tail.filter.save")
def save_tail_filter(actor: Actor, cluster: Cluster, params: SaveTailFilter) -> Outcome:
    try:
        saved, created = SavedTailFilter.objects.update_or_create(
            user=actor.user, name=params.name, defaults=params.fields
        )
    except IntegrityError as exc:
        raise Invalid(
            f"cannot save the filter: {exc}", target=params.name, parameters=params.fields
        ) from None
    return Outcome(params.name, "created" if created else "updated", params.fields, saved)


@dataclass(frozen=True)
class DeleteTailFilter(Params):
    filter_id: int

    @property
    def target(self) -> str:
        return str(self.filter_id)


@command("tail.filter.delete")
def delete_tail_filter(actor: Actor, cluster: Cluster, params: DeleteTailFilter) -> Outcome:
    """Only the actor's own filter: another user's, or none, is ``Missing`` (the page's 404)."""
    deleted, _ = SavedTailFilter.objects.filter(user=actor.user, pk=params.filter_id).delete()
    if not deleted:
        reason = f"You have no saved filter {params.filter_id} (no such filter of yours)."
        raise Missing(params.target, reason)
    return Outcome(params.target, "", {}, True)
