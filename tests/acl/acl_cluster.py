"""A name server and a broker with plain ACL on, as real processes on loopback, and the accounts
the ACL tests use.

The broker's ``plain_acl.yml`` is reloaded every 200 ms (tests edit it); the name server has its
own file with the admin account, which the broker signs its registrations with (innerAccessKey).
Topics are created with the admin account (an unsigned request is refused).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from broker.common.acl_signature import RequestSigner, SessionCredentials
from broker.common.codes import RequestCode
from broker.common.conf_file import load_conf
from broker.common.message_queue import MessageQueue
from broker.common.request_headers import CreateTopicRequestHeader, GetRouteInfoRequestHeader
from broker.common.topic_config import AUTO_CREATE_TOPIC_KEY_TOPIC, TRACE_TOPIC
from broker.local_cluster import EngineProcess, free_port, start_broker, start_namesrv, wait_until, write_conf
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.tls import ClientTls
from tests.received_messages import round_trip

ADMIN = SessionCredentials("acl-admin-key", "acl-admin-secret")
USER = SessionCredentials("acl-user-key", "acl-user-secret")
# ali-ons signs with these (tests/compat/ali_ons/common.js).
ALI_ONS = SessionCredentials("compat-access-key", "compat-secret-key")
WHITE_USER = SessionCredentials("acl-white-key", "acl-white-secret")  # trusted from 127.0.0.1
ELSEWHERE_USER = SessionCredentials("acl-elsewhere-key", "acl-elsewhere-secret")  # from 10.9.9.*

TOPIC = "AclTopic"  # USER may publish and subscribe
PUB_ONLY = "AclPubOnly"  # USER may publish only
DENIED = "AclDenied"  # USER has no permission (its default is DENY)
GROUP = "AclGroup"  # USER may consume as this group
PRODUCER_GROUP = "AclProducer"
RELOAD_MS = 200


def _account(creds: SessionCredentials, **fields) -> dict:
    return {"accessKey": creds.access_key, "secretKey": creds.secret_key, **fields}


def broker_acl() -> dict:
    return {
        "globalWhiteRemoteAddresses": [],
        "accounts": [
            _account(ADMIN, admin=True),
            _account(
                USER,
                defaultTopicPerm="DENY",
                defaultGroupPerm="DENY",
                topicPerms=[f"{TOPIC}=PUB|SUB", f"{PUB_ONLY}=PUB", f"{TRACE_TOPIC}=PUB"],
                groupPerms=[f"{GROUP}=SUB", f"{PRODUCER_GROUP}=SUB"],
            ),
            _account(
                ALI_ONS,
                defaultTopicPerm="DENY",
                defaultGroupPerm="SUB",
                topicPerms=[f"{TOPIC}=PUB|SUB"],
            ),
            _account(WHITE_USER, whiteRemoteAddress="127.0.0.1", topicPerms=[f"{TOPIC}=SUB"]),
            _account(ELSEWHERE_USER, whiteRemoteAddress="10.9.9.*", topicPerms=[f"{TOPIC}=SUB"]),
        ],
    }


def write_acl(path: Path, config: dict) -> None:
    """Replace the file as an editor would (a new file renamed over it)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.replace(path)


@dataclass
class AclCluster:
    workdir: Path
    namesrv: EngineProcess
    broker: EngineProcess
    acl_path: Path
    admin: SyncRemotingClient
    user: SyncRemotingClient
    anonymous: SyncRemotingClient
    # Clients of the accounts a test module adds to the ACL file, by the module's name for them.
    others: dict[str, SyncRemotingClient] = field(default_factory=dict)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def broker_addr(self) -> str:
        return self.broker.addr

    def request(
        self, client: SyncRemotingClient, code: int, fields=None, body: bytes = b"", addr: str | None = None
    ) -> RemotingCommand:
        return client.invoke(addr or self.broker_addr, create_request(code, fields, body))

    def create_topic(self, topic: str, queues: int = 2) -> None:
        header = CreateTopicRequestHeader(topic, AUTO_CREATE_TOPIC_KEY_TOPIC, queues, queues, 6, "SINGLE_TAG")
        response = self.request(self.admin, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        assert response.ok, response.remark

        def routed() -> bool:
            lookup = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic))
            return self.anonymous.invoke(self.namesrv_addr, lookup).ok

        wait_until(routed, timeout=15, what=f"the route of {topic}")

    def stop(self) -> None:
        for client in (self.admin, self.user, self.anonymous):
            client.close()
        broker_rc = self.broker.stop()
        namesrv_rc = self.namesrv.stop()
        assert broker_rc == 0, "".join(self.broker.output)
        assert namesrv_rc == 0, "".join(self.namesrv.output)


def start_acl_cluster(
    workdir: Path,
    broker_settings: dict | None = None,
    namesrv_settings: dict | None = None,
    client_tls: ClientTls | None = None,
) -> AclCluster:
    """``client_tls``: how the cluster's own clients (admin, user, anonymous) connect."""
    workdir.mkdir(parents=True, exist_ok=True)
    namesrv_acl = workdir / "namesrv_acl.yml"
    write_acl(namesrv_acl, {"accounts": [_account(ADMIN, admin=True), _account(USER)]})
    namesrv_conf = write_conf(
        workdir / "namesrv.conf",
        {
            "listenPort": free_port(),
            "aclEnable": "true",
            "aclFilePath": namesrv_acl,
            "aclReloadIntervalMillis": RELOAD_MS,
            **(namesrv_settings or {}),
        },
    )
    namesrv = start_namesrv(namesrv_conf)
    acl_path = workdir / "plain_acl.yml"
    write_acl(acl_path, broker_acl())
    conf = write_conf(
        workdir / "broker.conf",
        {
            "brokerClusterName": "AclCluster",
            "brokerName": "broker-acl",
            "storePathRootDir": workdir / "store",
            "mappedFileSizeCommitLog": 4 * 1024 * 1024,
            "mappedFileSizeConsumeQueue": 6000 * 20,
            "maxHashSlotNum": 20_000,
            "maxIndexNum": 80_000,
            "autoCreateTopicEnable": "false",
            "autoCreateSubscriptionGroup": "true",
            "registerBrokerIntervalMillis": 1000,
            "aclEnable": "true",
            "aclFilePath": acl_path,
            "aclReloadIntervalMillis": RELOAD_MS,
            "innerAccessKey": ADMIN.access_key,
            "innerSecretKey": ADMIN.secret_key,
            **(broker_settings or {}),
        },
    )
    try:
        broker = start_broker(conf, namesrv.addr, free_port())
    except BaseException:
        namesrv.stop()
        raise
    return AclCluster(
        workdir,
        namesrv,
        broker,
        acl_path,
        SyncRemotingClient(ADMIN, tls=client_tls),
        SyncRemotingClient(USER, tls=client_tls),
        SyncRemotingClient(tls=client_tls),
    )


def sdk_round_trip(namesrv_addr: str, credentials: SessionCredentials, tls=None, count: int = 3) -> None:
    """``count`` messages sent to queue 0 of ``TOPIC`` by a signed producer and read back by a signed
    pull consumer of ``GROUP`` (both with ``tls``, a ``ClientTls``, when given)."""
    queue = MessageQueue(TOPIC, "broker-acl", 0)
    round_trip(namesrv_addr, queue, (PRODUCER_GROUP, GROUP), count, credentials=credentials, tls=tls)


# Every protection of signed requests (broker/acl/replay.py) on.
SIGNED_REQUEST_CHECKS = {"aclReplayProtection": "true", "aclRequireTls": "true"}


def start_signed_tls_cluster(workdir: Path, certs) -> AclCluster:
    """The ACL cluster on permissive TLS ports with ``SIGNED_REQUEST_CHECKS`` on both servers; the
    broker registers over TLS, and ``TOPIC`` exists and is routed."""
    server = {**certs.server_conf("permissive"), **SIGNED_REQUEST_CHECKS}
    broker = {**server, "tls.enable": "true", "tls.client.trustCertPath": certs.ca}
    running = start_acl_cluster(workdir, broker, server, certs.client_tls())
    try:
        running.create_topic(TOPIC)
    except BaseException:
        running.stop()
        raise
    return running


def start_acl_slave(cluster: AclCluster, settings: dict | None = None) -> EngineProcess:
    """A slave (brokerId 1) of the cluster's broker: its master's broker.conf with its own store
    and ``settings`` on top; it signs its calls to the name server and its master with the same
    inner account."""
    master = load_conf(cluster.workdir / "broker.conf")
    slave = {"brokerId": 1, "brokerRole": "SLAVE", "storePathRootDir": cluster.workdir / "slave-store"}
    conf = write_conf(cluster.workdir / "slave.conf", {**master, **slave, **(settings or {})})
    return start_broker(conf, cluster.namesrv_addr, free_port())


def signed_request(
    code: int, fields=None, body: bytes = b"", credentials: SessionCredentials = ADMIN
) -> RemotingCommand:
    """``code`` signed as the project's clients sign it, as it crosses the wire (to be captured)."""
    request = create_request(code, fields, body)
    RequestSigner(credentials)(request)
    return request


def protected_cluster_fixture(name: str, settings: dict):
    """A module's ACL cluster whose broker and name server both run with ``settings``, and a topic."""
    import pytest

    @pytest.fixture(scope="module")
    def acl(tmp_path_factory):
        running = start_acl_cluster(tmp_path_factory.mktemp(name), settings, settings)
        try:
            running.create_topic(TOPIC)
            yield running
        finally:
            running.stop()

    return acl
