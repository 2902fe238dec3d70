"""Issue 31, §5: the console's message exports (Messages page, dead letters, delayed messages,
transactions: one writer, console/message_export.py) neutralise text cells a spreadsheet would run
as a formula — a leading =, +, -, @, tab or carriage return gets a ' in front (OWASP's CSV
injection) — while numeric columns stay numbers. Real messages from the SDK on the live cluster,
exported through Django's test client.

Before: keys "=HYPERLINK(...)", tags "@SUM(A1)" and the body "+1+1" were exported as they are.
"""

from __future__ import annotations

import csv
import io

import pytest

from broker.client.producer import Producer
from broker.common.message import Message
from tests.cluster import CLI_CLUSTER as CLUSTER

pytestmark = pytest.mark.django_db

TOPIC = "ConsoleCsvCells"
SENT = [  # (keys, tags, body)
    ('=HYPERLINK("http://evil.example","x")', "@SUM(A1)", "+1+1"),
    ("-2+3", "\tlead", "-5"),
    ("order-1", "created", "plain=body"),
]
DANGEROUS = ("=", "+", "-", "@", "\t", "\r")


@pytest.fixture(scope="module")
def sent(live_cluster):
    from core.cluster_access import admin_for

    admin = admin_for(live_cluster.namesrv_addr)
    for addr in admin.resolve_masters(None, CLUSTER):
        admin.create_or_update_topic(addr, TOPIC, 1, 1)
    producer = Producer("console-csv-producer", live_cluster.namesrv_addr).start()
    try:
        for keys, tags, body in SENT:
            message = Message(topic=TOPIC, body=body.encode())
            message.keys, message.tags = keys, tags
            producer.send(message)
    finally:
        producer.shutdown()


def test_the_message_csv_neutralises_formulas_and_keeps_numbers(viewer_client, sent):
    response = viewer_client.get("/messages/", {"mode": "time", "topic": TOPIC, "export": "csv"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    by_key = {row["keys"]: row for row in rows}
    assert sorted(by_key) == sorted(["'" + SENT[0][0], "'-2+3", "order-1"])
    first, second = by_key["'" + SENT[0][0]], by_key["'-2+3"]
    assert (first["tags"], first["body"]) == ("'@SUM(A1)", "'+1+1")
    assert (second["tags"], second["body"]) == ("'\tlead", "'-5")  # a text body, even if it looks numeric
    assert by_key["order-1"]["body"] == "plain=body"  # only a leading character counts
    for row in rows:
        assert not any(value.startswith(DANGEROUS) for value in row.values()), row
        assert row["queue_offset"].isdigit() and row["queue_id"] == "0" and row["reconsume_times"] == "0"
