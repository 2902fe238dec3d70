"""Failure paths of the dead-letter page's "Make readable" action against a real name server and
broker: a name no group can have, a group without dead letters, a viewer and a forged request each get
an answer that says why and an audit record, and the dead letters stay where they were, write-only."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from broker.common.topic_config import PERM_WRITE
from core.models import AuditRecord
from tests.cluster import make_dead_letters

pytestmark = pytest.mark.django_db

TOPIC, GROUP = "OpsReadableRefused", "ops-readable-refused"
DLQ = f"%DLQ%{GROUP}"


@pytest.fixture(scope="module")
def dead_letters(cluster):
    make_dead_letters(cluster, TOPIC, GROUP, 2, keys="kept")
    return GROUP


def _url(group: str) -> str:
    return reverse("console:dlq_make_readable", kwargs={"group": group})


def dlq_state(admin) -> tuple:
    """The DLQ topic's permission per broker and how many dead letters each queue holds."""
    perms = sorted((q.broker_name, q.perm) for q in admin.topic_route(DLQ).queue_datas)
    counts = sorted(
        (q.broker_name, q.queue_id, q.min_offset, q.max_offset) for q in admin.topic_status(DLQ).queues
    )
    return perms, counts


def test_a_name_no_group_can_have_is_a_400_and_audited(namesrv, operator_client):
    bad = "bad group!"
    response = operator_client.post(_url(bad))
    assert response.status_code == 400
    assert b"bad consumer group name" in response.content
    (record,) = AuditRecord.objects.filter(action="dlq.make_readable")
    assert record.result == "failed" and "bad consumer group name" in record.detail


def test_a_group_without_dead_letters_is_a_404_naming_its_dlq(namesrv, operator_client):
    response = operator_client.post(_url("ops-never-failed"))
    assert response.status_code == 404
    page = response.content.decode()
    assert "Not found" in page and "%DLQ%ops-never-failed" in page
    (record,) = AuditRecord.objects.filter(action="dlq.make_readable")
    assert (record.result, record.target) == ("failed", "%DLQ%ops-never-failed")
    assert "%DLQ%ops-never-failed" in record.detail


def test_a_viewer_or_a_forged_request_leaves_the_dead_letters_write_only(
    namesrv, dead_letters, admin, viewer_client, operator
):
    before = dlq_state(admin)
    perms, counts = before
    assert perms == [("broker-ops", PERM_WRITE)], "the broker creates a group's DLQ write-only"
    assert sum(high - low for _, _, low, high in counts) == 2

    denied = viewer_client.post(_url(GROUP))
    assert denied.status_code == 403 and b"needs the operator role" in denied.content
    (record,) = AuditRecord.objects.filter(action="dlq.make_readable")
    assert (record.result, record.username) == ("denied", "vera-viewer")

    forged_client = Client(enforce_csrf_checks=True)
    forged_client.force_login(operator)
    forged = forged_client.post(_url(GROUP))
    assert forged.status_code == 403 and b"CSRF" in forged.content

    assert dlq_state(admin) == before
