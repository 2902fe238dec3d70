"""Plain ACL with an independently written signing client: ali-ons (Node, unmodified), which
signs every request with AccessKey / Signature / OnsChannel ext fields as RocketMQ's Java client's
AclClientRPCHook does. Its account (compat-access-key) may publish and subscribe AclTopic and
consume as any group; AclDenied is closed to it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from broker.client import Producer
from broker.common.message import Message
from broker.local_cluster import ROOT, wait_until

from .acl_cluster import DENIED, PRODUCER_GROUP, TOPIC, USER, broker_acl, start_acl_cluster, write_acl

SCRIPTS = ROOT / "tests" / "compat" / "ali_ons"
NODE = shutil.which("node") or ""  # "": no node, the module is skipped
ALI_ONS = Path(ROOT) / "node_modules" / "ali-ons" / "package.json"
TIMEOUT_S = 60

pytestmark = pytest.mark.skipif(
    not NODE or not ALI_ONS.exists(),
    reason="needs `node` and node_modules/ali-ons (`make setup` installs them)",
)


@pytest.fixture(scope="module")
def acl(tmp_path_factory):
    running = start_acl_cluster(tmp_path_factory.mktemp("acl-ali"))
    try:
        for topic in (TOPIC, DENIED):
            running.create_topic(topic)
        yield running
    finally:
        running.stop()


def _send(acl, topic: str, *options: str) -> tuple[int, list[dict], str]:
    spec = {"topic": topic, "tags": "t", "keys": ["k1"], "body": f"ali-ons to {topic}"}
    proc = subprocess.run(
        [NODE, str(SCRIPTS / "producer.js"), "--namesrv", acl.namesrv_addr, "--group", "compat_acl_producer",
         *options],
        input=json.dumps(spec) + "\n", capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT,
    )  # fmt: skip
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, lines, proc.stderr


def test_ali_ons_signed_send_and_consume_are_allowed(acl):
    code, results, stderr = _send(acl, TOPIC)
    assert code == 0 and results[0]["sendStatus"] == "SEND_OK", (results, stderr)
    # A message of the SDK (signed as another account) consumed by ali-ons.
    producer = Producer(PRODUCER_GROUP, acl.namesrv_addr, credentials=USER, instance_name="acl-ali-p").start()
    try:
        producer.send(Message(TOPIC, b"from the sdk"))
    finally:
        producer.shutdown()
    proc = subprocess.run(
        [NODE, str(SCRIPTS / "consumer.js"), "--namesrv", acl.namesrv_addr, "--group", "compat_acl_group",
         "--topic", TOPIC, "--count", "2", "--timeout-ms", "30000"],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT,
    )  # fmt: skip
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    bodies = {e["body"] for e in events if e.get("event") == "message"}
    assert proc.returncode == 0, (events, proc.stderr)
    assert {f"ali-ons to {TOPIC}", "from the sdk"} <= bodies


def test_ali_ons_send_to_a_denied_topic_is_refused(acl):
    code, results, stderr = _send(acl, DENIED)
    assert code == 1 and "still failed" in results[0]["error"], (results, stderr)
    # ali-ons reports only that the send failed; the broker logged why it refused.
    refusal = "account 'compat-access-key' has no PUB permission on topic AclDenied"
    assert refusal in "".join(acl.broker.output)


def test_ali_ons_with_a_wrong_secret_is_refused(acl):
    code, results, stderr = _send(acl, TOPIC, "--secret-key", "not-the-compat-secret")
    assert code != 0, (results, stderr)
    text = json.dumps(results) + stderr
    assert "signature does not match" in text, text
    assert "not-the-compat-secret" not in text and "compat-secret-key" not in text


def test_ali_ons_without_keys_is_refused(acl):
    code, results, stderr = _send(acl, TOPIC, "--no-acl-keys")
    assert code != 0, (results, stderr)
    assert "no AccessKey" in json.dumps(results) + stderr, (results, stderr)


def _reload(acl, config: dict) -> None:
    """Write the broker's ACL file and wait until the broker has taken it into use."""
    reloads = "".join(acl.broker.output).count("reloaded:")
    write_acl(acl.acl_path, config)
    wait_until(lambda: "".join(acl.broker.output).count("reloaded:") > reloads, timeout=10, what="a reload")


def test_ali_ons_consumer_of_a_denied_group_gets_nothing(acl):
    config = broker_acl()
    compat = next(a for a in config["accounts"] if a["accessKey"] == "compat-access-key")
    compat["groupPerms"] = ["compat_acl_denied=DENY"]
    _reload(acl, config)
    try:
        consumer = [NODE, str(SCRIPTS / "consumer.js"), "--namesrv", acl.namesrv_addr, "--group"]
        proc = subprocess.run(
            [*consumer, "compat_acl_denied", "--topic", TOPIC, "--count", "1", "--timeout-ms", "4000"],
            capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT,
        )  # fmt: skip
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        # Nothing delivered until the script gave up (its close then fails too: the group's
        # unregistering is refused as well).
        assert proc.returncode != 0 and {"event": "timeout", "received": 0} in events, events
        assert not [e for e in events if e.get("event") == "message"], events
        refusal = "account 'compat-access-key' has no SUB permission on group compat_acl_denied"
        assert refusal in "".join(acl.broker.output)
    finally:
        _reload(acl, broker_acl())


def test_ali_ons_follows_a_reloaded_file(acl):
    config = broker_acl()
    compat = next(a for a in config["accounts"] if a["accessKey"] == "compat-access-key")
    compat["topicPerms"].append(f"{DENIED}=PUB")
    _reload(acl, config)
    try:
        code, results, stderr = _send(acl, DENIED)
        assert code == 0 and results[0]["sendStatus"] == "SEND_OK", (results, stderr)
    finally:
        _reload(acl, broker_acl())
    code, results, _ = _send(acl, DENIED)
    assert code == 1, results
