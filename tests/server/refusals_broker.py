"""A real name server and broker for the refusal tests (tests/server/test_refusals_*.py), with
helpers to send raw remoting requests and to check a refusal's code and remark.

The broker does not create subscription groups on demand (autoCreateSubscriptionGroup=false),
so an unknown group is refused as in a production RocketMQ cluster.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from broker.common import fastjson
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message_codec import properties_to_string
from broker.common.request_headers import CommandHeader
from broker.remoting.command import RemotingCommand, create_request
from tests.cluster import ONE_BROKER, Cluster, start

READ, WRITE, READ_WRITE = 4, 2, 6


class RefusalBroker:
    """One broker, driven with raw RemotingCommands through the project's remoting client."""

    def __init__(self, workdir: Path, settings: dict[str, str] | None = None) -> None:
        settings = {"autoCreateSubscriptionGroup": "false", **(settings or {})}
        self.cluster: Cluster = start(ONE_BROKER, workdir, settings)
        self.conf_path = self.cluster.confs["broker-a"]

    @property
    def addr(self) -> str:
        return self.cluster.broker_addr

    def invoke(
        self, code: int, fields: dict | CommandHeader | None = None, body: bytes = b""
    ) -> RemotingCommand:
        return self.cluster.admin.invoke(self.addr, create_request(code, fields or {}, body))

    def create_topic(self, topic: str, queues: int = 4, perm: int = READ_WRITE) -> None:
        fields = {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": perm}
        response = self.invoke(RC.UPDATE_AND_CREATE_TOPIC, fields)
        assert response.ok, response.remark

    def create_group(self, group: str, **overrides) -> None:
        config = {"groupName": group, "consumeEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16}
        config.update(overrides)
        response = self.invoke(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=fastjson.dumps(config))
        assert response.ok, response.remark

    def send(self, topic: str, body: bytes = b"x", queue_id: int = 0, properties: dict | None = None,
             code: int = RC.SEND_MESSAGE, **fields) -> RemotingCommand:  # fmt: skip
        header = {
            "producerGroup": "refusal-producer",
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4,
            "queueId": queue_id,
            "sysFlag": 0,
            "bornTimestamp": int(time.time() * 1000),
            "flag": 0,
            "properties": properties_to_string(properties or {}),
            "reconsumeTimes": 0,
        }
        header.update(fields)
        return self.invoke(code, header, body)

    def config_value(self, key: str) -> str | None:
        response = self.invoke(RC.GET_BROKER_CONFIG)
        for line in response.body.decode().splitlines():
            name, _, value = line.partition("=")
            if name == key:
                return value
        return None

    @contextlib.contextmanager
    def setting(self, key: str, value, restore):
        """A broker setting changed at run time with UPDATE_BROKER_CONFIG (as ``mqadmin
        updateBrokerConfig`` does), and put back to ``restore`` afterwards."""
        self._update(key, value)
        try:
            yield
        finally:
            self._update(key, restore)

    def permission(self, perm: int):
        """The broker's own permission (brokerPermission), reset to read-write afterwards."""
        return self.setting("brokerPermission", perm, READ_WRITE)

    def _update(self, key: str, value) -> None:
        response = self.invoke(RC.UPDATE_BROKER_CONFIG, body=f"{key}={value}\n".encode())
        assert response.ok, f"{key}={value} refused: {response.remark}"
        assert self.config_value(key) == str(value), f"{key} is not {value} after the update"

    def stop(self) -> None:
        self.cluster.stop()


def assert_refused(response: RemotingCommand, code: ResponseCode, *remark_parts: str) -> None:
    """The response is ``code`` and its remark says each of ``remark_parts``."""
    got = (
        ResponseCode(response.code).name
        if response.code in ResponseCode._value2member_map_
        else response.code
    )
    assert response.code == code, f"expected {code.name}, got {got} with remark {response.remark!r}"
    for part in remark_parts:
        assert part in (response.remark or ""), (
            f"{code.name} remark {response.remark!r} does not say {part!r}"
        )
