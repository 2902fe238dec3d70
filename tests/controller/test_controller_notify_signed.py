"""The controller's NOTIFY_BROKER_ROLE_CHANGED goes out through its outer API
(broker/server/outer_api.py): signed with the controller's innerAccessKey/innerSecretKey, so a
broker whose ACL requires signatures takes it; unsigned (no account set), that broker drops it."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import yaml

from broker.acl import install_acl, open_acl_file
from broker.common.acl_signature import ACCESS_KEY
from broker.common.codes import RequestCode
from broker.common.conf_file import ConfError
from broker.common.request_headers.controller import (
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from broker.controller.config import MASKED, config_properties, controller_config
from broker.controller.service import ControllerService
from broker.local_cluster import free_port
from broker.remoting.client import RemotingClient
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.server import RemotingServer

NAME = "broker-signed"
ACCESS, SECRET = "controller-admin-key", "controller-admin-secret"


def _controller_conf(tmp_path, **extra: str) -> dict[str, str]:
    return {
        "listenPort": "0",
        "controllerDLegerPeers": f"n0-127.0.0.1:{free_port()}",
        "controllerStorePath": str(tmp_path / "store"),
        "scanNotActiveBrokerInterval": "100",
        **extra,
    }


async def _broker_with_acl(tmp_path, notified: asyncio.Queue) -> RemotingServer:
    """A remoting server standing for a broker with plain ACL on: no white address, one admin."""
    acl_path = tmp_path / "plain_acl.yml"
    acl_path.write_text(
        yaml.safe_dump(
            {
                "globalWhiteRemoteAddresses": [],
                "accounts": [{"accessKey": ACCESS, "secretKey": SECRET, "admin": True}],
            }
        )
    )
    server = RemotingServer("127.0.0.1", 0)

    def on_notify(conn, request: RemotingCommand) -> None:
        notified.put_nowait(request)

    server.register_processor(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, on_notify)
    install_acl(server.processors, open_acl_file(acl_path, 1000))
    await server.start()
    return server


async def _elect_first_master(port: int, broker_addr: str) -> None:
    """Apply, register and heartbeat broker 1: the leader's scan makes it master and notifies it."""
    client = RemotingClient()
    addr = f"127.0.0.1:{port}"
    try:
        metadata = RequestCode.CONTROLLER_GET_METADATA_INFO
        deadline = time.monotonic() + 20
        while (await client.invoke(addr, create_request(metadata))).field("isLeader") != "true":
            assert time.monotonic() < deadline, "the single controller never led"
            await asyncio.sleep(0.05)
        for code, header in [
            (
                RequestCode.CONTROLLER_APPLY_BROKER_ID,
                ApplyBrokerIdRequestHeader("c", NAME, 1, f"{broker_addr};1"),
            ),
            (
                RequestCode.CONTROLLER_REGISTER_BROKER,
                RegisterBrokerToControllerRequestHeader("c", NAME, 1, broker_addr),
            ),
            (
                RequestCode.BROKER_HEARTBEAT,
                BrokerHeartbeatRequestHeader(
                    cluster_name="c", broker_addr=broker_addr, broker_name=NAME, broker_id=1
                ),
            ),
        ]:
            response = await client.invoke(addr, create_request(code, header), 5000)
            assert response.ok, response.remark
    finally:
        await client.close()


async def test_a_broker_requiring_signatures_takes_the_signed_notification(tmp_path):
    notified: asyncio.Queue = asyncio.Queue()
    broker = await _broker_with_acl(tmp_path, notified)
    service = ControllerService(
        controller_config(_controller_conf(tmp_path, innerAccessKey=ACCESS, innerSecretKey=SECRET))
    )
    port = await service.start()
    try:
        broker_addr = f"127.0.0.1:{broker.port}"
        await _elect_first_master(port, broker_addr)
        note = await asyncio.wait_for(notified.get(), 20)
        assert (note.ext_fields or {}).get(ACCESS_KEY) == ACCESS
        assert note.field("masterBrokerId") == "1" and note.field("masterAddress") == broker_addr
    finally:
        await service.stop()
        await broker.stop()


async def test_an_unsigned_notification_is_dropped_by_that_broker(tmp_path, caplog):
    """The same controller without an account: the broker's ACL refuses what it sends."""
    caplog.set_level(logging.INFO, logger="broker.acl.guard")
    notified: asyncio.Queue = asyncio.Queue()
    broker = await _broker_with_acl(tmp_path, notified)
    service = ControllerService(controller_config(_controller_conf(tmp_path)))
    port = await service.start()
    try:
        await _elect_first_master(port, f"127.0.0.1:{broker.port}")
        refusal = f"ACL refused request code {RequestCode.NOTIFY_BROKER_ROLE_CHANGED}"
        deadline = time.monotonic() + 20
        while refusal not in caplog.text:
            assert time.monotonic() < deadline, "the broker never saw the notification"
            await asyncio.sleep(0.05)
        assert notified.empty()
    finally:
        await service.stop()
        await broker.stop()


def test_the_account_is_set_whole_and_its_secret_is_never_shown(tmp_path):
    with pytest.raises(ConfError, match="innerAccessKey and innerSecretKey"):
        controller_config(_controller_conf(tmp_path, innerAccessKey=ACCESS))
    shown = config_properties(
        controller_config(_controller_conf(tmp_path, innerAccessKey=ACCESS, innerSecretKey=SECRET))
    )
    assert (shown["innerAccessKey"], shown["innerSecretKey"]) == (ACCESS, MASKED)
