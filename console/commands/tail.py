"""The live tail's saved filters (per user): save one under a name, delete one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError

from console.models import SavedTailFilter
from console.tail.filters import TailFilterError, compile_filter
from core.boundary import Actor, Cluster, Invalid, Outcome, Params, command

FILTER_FIELDS = ("tags", "sql", "key")


@dataclass(frozen=True)
class SaveTailFilter(Params):
    name: str
    fields: dict[str, str]  # topic and FILTER_FIELDS, as typed (stripped)

    @classmethod
    def parse(cls, data) -> SaveTailFilter | Invalid:
        name = (data.get("name") or "").strip()
        fields = {k: (data.get(k) or "").strip() for k in ("topic", *FILTER_FIELDS)}
        if not name or len(name) > 80:
            return Invalid(
                "give the filter a name of 1 to 80 characters", target=name[:80], parameters=fields
            )
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
    """Only the actor's own filter: another user's, or none, is a failed record."""
    deleted, _ = SavedTailFilter.objects.filter(user=actor.user, pk=params.filter_id).delete()
    detail = "" if deleted else "no such filter of yours"
    return Outcome(params.target, detail, {}, bool(deleted), failed=not deleted)
