"""The suite's live clusters and console users: broker settings of each test package, fixture
factories, and the helpers tests use on a running cluster.

Processes start through ``broker.local_cluster`` (the launcher ``bench/`` uses too). A test module
declares its cluster in one line, e.g. ``cluster = cluster_fixture(ONE_BROKER, topics={TOPIC: 2})``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from broker import local_cluster
from broker.common.acl_signature import SessionCredentials
from broker.common.codes import RequestCode
from broker.local_cluster import (
    HA_CLUSTER,
    MASTER_SLAVE_SETTINGS,
    SMALL_STORE,
    LocalCluster,
    add_slave,
    start_namesrv,
    wait_until,
)

__all__ = [
    "CLI",
    "CLI_CLUSTER",
    "HA_CLUSTER",
    "MASTER_SLAVE",
    "ONE_BROKER",
    "OPS",
    "OPS_CLUSTER",
    "OPS_DELAY_LEVELS",
    "SEMANTICS",
    "SEMANTICS_CLUSTER",
    "Cluster",
    "Preset",
    "add_slave",
    "cluster_fixture",
    "console_preset",
    "create_user",
    "logged_in_client",
    "make_dead_letters",
    "namesrv_fixture",
    "plain_acl",
    "route_settles",
    "send",
    "send_pending_transactions",
    "small_store_config",
    "start",
    "start_master_slave",
    "start_with_acl",
]

SEMANTICS_CLUSTER = "SemanticsCluster"
CLI_CLUSTER = "CliCluster"
OPS_CLUSTER = "OpsCluster"
# Level 1 and 2 deliver quickly; level 3 (1 h) keeps messages pending for the delayed pages.
OPS_DELAY_LEVELS = "1s 2s 1h"
CONSUME_QUEUE_ENTRY_BYTES = 20
_AUTO_CREATE = {"autoCreateTopicEnable": "true", "autoCreateSubscriptionGroup": "true"}

FixtureScope = Literal["session", "package", "module", "class", "function"]  # pytest.fixture's


@dataclass(frozen=True)
class Preset:
    """A cluster's name, its brokers and the broker.conf settings they share."""

    cluster_name: str
    brokers: tuple[str, ...]
    settings: Mapping[str, object] = field(default_factory=dict)
    # The one broker's store in ``<workdir>/store`` (tests read its files there), else in
    # ``<workdir>/<broker name>``.
    store_in_workdir: bool = False

    def with_settings(self, **settings: object) -> Preset:
        return replace(self, settings={**self.settings, **settings})


# One broker that creates topics and groups on first use (filters, orderly, reply, trace, ...).
ONE_BROKER = Preset(
    SEMANTICS_CLUSTER,
    ("broker-a",),
    {**_AUTO_CREATE, **SMALL_STORE, "registerBrokerIntervalMillis": 500},
    store_in_workdir=True,
)
# One broker that restarts in place, offsets flushed often (delay, retry, transactions, soak).
SEMANTICS = Preset(
    SEMANTICS_CLUSTER,
    ("broker-s",),
    {"registerBrokerIntervalMillis": 1000, "flushConsumerOffsetInterval": 500, **SMALL_STORE},
    store_in_workdir=True,
)
# Two brokers for the live mqadmin tests.
CLI = Preset(CLI_CLUSTER, ("broker-a", "broker-b"), {**_AUTO_CREATE, "mappedFileSizeCommitLog": 4194304})
# The operations pages: short delay levels; the checker must not resolve half messages behind the
# tests' back.
OPS = Preset(
    OPS_CLUSTER,
    ("broker-ops",),
    {
        **_AUTO_CREATE,
        **SMALL_STORE,
        "mappedFileSizeCommitLog": 4194304,
        "messageDelayLevel": OPS_DELAY_LEVELS,
        "flushDelayOffsetInterval": 200,
        "transactionCheckInterval": 3600000,
        "transactionTimeOut": 3600000,
    },
)


MASTER_SLAVE = Preset(HA_CLUSTER, ("broker-ha",), MASTER_SLAVE_SETTINGS)


def start_master_slave(
    workdir: Path, with_slave: bool = True, master_settings: Mapping[str, object] | None = None
) -> Cluster:
    """``broker.local_cluster.start_master_slave`` as a ``Cluster`` (the tests' helpers)."""
    return local_cluster.start_master_slave(workdir, with_slave, master_settings, Cluster)


def console_preset(queue_entries: int = 3000) -> Preset:
    """Two brokers for console tests and the console benchmark: a test creating hundreds of topics
    must not fill the disk, so each consume-queue file holds ``queue_entries`` entries."""
    return CLI.with_settings(mappedFileSizeConsumeQueue=queue_entries * CONSUME_QUEUE_ENTRY_BYTES)


class Cluster(LocalCluster):
    """A running preset, with the SDK helpers the integration tests share."""

    def max_offsets(self, topic: str, queues: int) -> int:
        total = 0
        for queue_id in range(queues):
            response = self.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
            total += response.int_field("offset")
        return total

    def instance(self, name: str):
        """A client instance that heartbeats often, so a restarted broker knows it again quickly."""
        from broker.client.instance import MQClientInstance

        return MQClientInstance(self.namesrv_addr, name, heartbeat_interval_ms=500, rebalance_interval_ms=500)

    def push_consumer(self, group: str, topic: str, listener, name: str, **options):
        from broker.client import CONSUME_FROM_FIRST_OFFSET, PushConsumer

        consumer = PushConsumer(
            group,
            self.namesrv_addr,
            consume_from_where=CONSUME_FROM_FIRST_OFFSET,
            instance_name=name,
            rebalance_interval_ms=500,
            persist_interval_ms=500,
            **options,
        )
        consumer.subscribe(topic, "*")
        consumer.register_message_listener(listener)
        return consumer.start()


def start(
    preset: Preset,
    workdir: Path,
    settings: Mapping[str, object] | None = None,
    brokers: tuple[str, ...] | None = None,
) -> Cluster:
    """``preset`` running in ``workdir``: its settings, then ``settings``, for every broker."""
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(workdir, preset.cluster_name)
    try:
        store = {"storePathRootDir": workdir / "store"} if preset.store_in_workdir else {}
        for name in brokers or preset.brokers:
            cluster.add_broker(name, {**store, **preset.settings, **(settings or {})})
    except BaseException:
        cluster.stop()
        raise
    return cluster


def plain_acl(admin: SessionCredentials, *apps: SessionCredentials, default_perm: str | None = None) -> str:
    """A ``plain_acl.yml`` text: no white addresses, ``admin`` an admin account, ``apps`` plain
    ones; with ``default_perm`` (e.g. ``PUB|SUB``) every account's default topic and group perm."""
    defaults = {"defaultTopicPerm": default_perm, "defaultGroupPerm": default_perm} if default_perm else {}
    accounts = [{"accessKey": admin.access_key, "secretKey": admin.secret_key, "admin": True, **defaults}]
    accounts += [{"accessKey": app.access_key, "secretKey": app.secret_key, **defaults} for app in apps]
    return yaml.safe_dump({"globalWhiteRemoteAddresses": [], "accounts": accounts}, sort_keys=False)


def start_with_acl(
    preset: Preset, workdir: Path, plain_acl: str, settings: Mapping[str, object] | None = None
) -> Cluster:
    """``preset`` running with ``aclEnable=true``, each broker reading its own copy of the
    ``plain_acl`` text (``<workdir>/<broker>-plain_acl.yml``, re-read every 200 ms)."""
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(workdir, preset.cluster_name)
    try:
        for name in preset.brokers:
            acl_file = workdir / f"{name}-plain_acl.yml"
            acl_file.write_text(plain_acl)
            acl = {"aclEnable": "true", "aclFilePath": acl_file, "aclReloadIntervalMillis": 200}
            cluster.add_broker(name, {**preset.settings, **acl, **(settings or {})})
    except BaseException:
        cluster.stop()
        raise
    return cluster


def cluster_fixture(
    preset: Preset,
    settings: Mapping[str, object] | None = None,
    topics: Mapping[str, int] | None = None,
    scope: FixtureScope = "module",
    brokers: tuple[str, ...] | None = None,
):
    """A fixture: ``preset`` (plus ``settings``) running with ``topics`` (name: queues) created,
    stopped after its scope; in the test's ``tmp_path`` when it lives for one test."""

    @pytest.fixture(scope=scope)
    def cluster(request, tmp_path_factory):
        if scope == "function":
            workdir = request.getfixturevalue("tmp_path")
        else:
            workdir = tmp_path_factory.mktemp("cluster")
        running = start(preset, workdir, settings, brokers)
        try:
            for topic, queues in (topics or {}).items():
                running.create_topic(topic, queues)
            yield running
        finally:
            running.stop()

    return cluster


def namesrv_fixture(conf_text: str | None = None, scope: FixtureScope = "function"):
    """A fixture: a name server alone (from a namesrv.conf of ``conf_text``, ``{port}`` replaced by
    a free port), whose clean exit is asserted."""

    @pytest.fixture(scope=scope)
    def namesrv(tmp_path_factory):
        from broker.local_cluster import free_port

        conf = None
        if conf_text is not None:
            conf = tmp_path_factory.mktemp("namesrv") / "namesrv.conf"
            conf.write_text(conf_text.format(port=free_port()))
        process = start_namesrv(conf)
        yield process
        assert process.stop() == 0

    return namesrv


def route_settles(admin, topic: str, expected: set, timeout: float = 10.0) -> bool:
    """Brokers re-register a changed topic with the name server on their own: wait for the route."""
    from broker.client.admin import NotFoundError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = {
                (q.broker_name, q.write_queue_nums, q.perm) for q in admin.topic_route(topic).queue_datas
            }
        except NotFoundError:
            found = set()
        if found == expected:
            return True
        time.sleep(0.05)
    return False


def small_store_config(**overrides):
    """A ``MessageStoreConfig`` with small files, for tests that run a store in-process."""
    from broker.store.store_config import MessageStoreConfig

    values: dict[str, Any] = {
        "mapped_file_size_commit_log": 8 * 1024 * 1024,
        "mapped_file_size_consume_queue": 6000 * 20,
        "max_hash_slot_num": 20_000,
        "max_index_num": 80_000,
    }
    values.update(overrides)
    return MessageStoreConfig(**values)


# -- traffic on a running cluster ------------------------------------------------------------
def send(namesrv_addr: str, topic: str, count: int = 1, keys: str = "k", tags: str = "t", **props):
    """Send ``count`` messages (keys ``<keys>-<i>``); returns the SendResults."""
    from broker.client import Producer
    from broker.common.message import Message

    producer = Producer("OPS_TEST_PRODUCER", namesrv_addr).start()
    try:
        results = []
        for i in range(count):
            msg = Message(topic, f'{{"n": {i}, "topic": "{topic}"}}'.encode())
            msg.keys, msg.tags = f"{keys}-{i}", tags
            for name, value in props.items():
                msg.put_property(name, str(value))
            results.append(producer.send(msg))
        return results
    finally:
        producer.shutdown()


class _Undecided:
    """A local transaction that never decides, so its half message stays pending."""

    def execute_local_transaction(self, msg, arg):
        from broker.client.transaction_producer import LocalTransactionState

        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg):
        from broker.client.transaction_producer import LocalTransactionState

        return LocalTransactionState.UNKNOW


def send_pending_transactions(namesrv_addr: str, group: str, messages) -> list[str]:
    """Send ``messages`` as half messages of ``group`` whose transaction never decides, so they stay
    pending for an operator to commit or roll back; returns their msg ids."""
    from broker.client.transaction_producer import TransactionProducer

    producer = TransactionProducer(group, namesrv_addr, _Undecided()).start()
    try:
        return [producer.send_message_in_transaction(msg).msg_id for msg in messages]
    finally:
        producer.shutdown()


def make_dead_letters(
    namesrv_addr: str, topic: str, group: str, count: int, keys: str = "dead", already: int = 0
):
    """Messages a real push consumer fails on with no retries left: the broker dead-letters them
    (``already``: the group's dead letters from before, so the wait is for ``already + count``)."""
    from broker.client import ConsumeConcurrentlyStatus, PushConsumer
    from broker.client.admin import MQAdmin, NotFoundError
    from broker.client.consumer_core import CONSUME_FROM_FIRST_OFFSET

    send(namesrv_addr, topic, count, keys=keys, tags="dl")
    consumer = PushConsumer(
        group,
        namesrv_addr,
        max_reconsume_times=0,
        retry_delay_s=0.2,
        consume_from_where=CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval_ms=1000,  # queues soon even if the broker lists the member a moment late
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.RECONSUME_LATER)
    consumer.start()
    try:
        with MQAdmin(namesrv_addr) as admin:

            def dead() -> bool:
                try:
                    queues = admin.topic_status(f"%DLQ%{group}").queues
                    return sum(q.max_offset for q in queues) >= already + count
                except NotFoundError:
                    return False

            wait_until(dead, timeout=30, what=f"{count} dead letters of {group}")
    finally:
        consumer.shutdown()


# -- console users by role ---------------------------------------------------------------------
def create_user(name: str, role: str | None, password: str):
    """A console user in the group of ``role`` (viewer, operator, admin; None: no role). The group
    is made if missing: transactional tests flush the ones the migrations made."""
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(name, password=password)
    if role:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def logged_in_client(name: str, role: str | None, password: str, enforce_csrf_checks: bool = False):
    """A fixture: a Django test client logged in as a new user ``name`` of ``role``."""

    @pytest.fixture
    def client_of_role(db):
        from django.test import Client

        client = Client(enforce_csrf_checks=enforce_csrf_checks)
        client.force_login(create_user(name, role, password))
        return client

    return client_of_role
