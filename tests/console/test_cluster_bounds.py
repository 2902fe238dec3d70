"""Commands act only on brokers of the chosen name server: a broker address a form, a URL or
``console_command`` gives is checked against that name server's cluster info before anything
connects to it. Another cluster's broker (a second name server the console is not configured
with) and any other service are refused with a 400 and one failed record, and nothing reaches them.
"""

from __future__ import annotations

import re
import socket

import pytest
from django.core.management import CommandError, call_command

from broker.client.admin import MQAdmin
from broker.common.route import BrokerData, ClusterInfo
from broker.local_cluster import SMALL_STORE, LocalCluster
from core.boundary import Cluster, Invalid, Params
from core.models import AuditRecord
from tests.cluster import CLI_CLUSTER

pytestmark = pytest.mark.django_db

OUTSIDE_CLUSTER = "OutsideCluster"


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """A name server and one broker the console is not configured with."""
    cluster = LocalCluster(tmp_path_factory.mktemp("outside-cluster"), OUTSIDE_CLUSTER)
    try:
        cluster.add_broker("broker-z", SMALL_STORE)
        admin = MQAdmin(cluster.namesrv_addr)
        try:
            yield cluster, admin
        finally:
            admin.close()
    finally:
        cluster.stop()


@pytest.fixture
def listener():
    """A port some other service listens on: a connection to it would be accepted and seen."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.3)
    yield server
    server.close()


def _connected(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except TimeoutError:
        return False
    conn.close()
    return True


def _one_failed_record(action: str) -> AuditRecord:
    (record,) = AuditRecord.objects.all()
    assert (record.action, record.result) == (action, AuditRecord.RESULT_FAILED)
    return record


def _topic_form(topic: str, broker_addr: str) -> dict:
    return {"topic": topic, "broker_addr": broker_addr, "read_queue_nums": 1, "write_queue_nums": 1,
            "perm": 6}  # fmt: skip


def test_topic_save_on_another_clusters_broker_is_refused(operator_client, outside):
    cluster, other_admin = outside
    answer = operator_client.post("/topics/save", _topic_form("OtherT", cluster.broker_addr))
    assert answer.status_code == 400
    assert f"no broker at &#x27;{cluster.broker_addr}&#x27; is registered" in answer.content.decode()
    assert "OtherT" not in other_admin.topic_list()
    assert "OtherT" not in str(other_admin.all_topic_configs(cluster.broker_addr))
    record = _one_failed_record("topic.save")
    assert record.target == "OtherT" and "is registered on name server" in record.detail


def test_group_save_on_another_clusters_broker_is_refused(operator_client, outside):
    cluster, other_admin = outside
    form = {"group": "OtherG", "broker_addr": cluster.broker_addr, "retry_max_times": 1,
            "retry_queue_nums": 1}  # fmt: skip
    answer = operator_client.post("/groups/save", form)
    assert answer.status_code == 400
    assert "OtherG" not in other_admin.all_subscription_groups(cluster.broker_addr)
    assert _one_failed_record("group.save").target == "OtherG"


def test_broker_config_and_purge_by_url_are_refused_off_cluster(admin_client_, outside):
    cluster, other_admin = outside
    before = other_admin.broker_config(cluster.broker_addr)["maxMessageSize"]
    answer = admin_client_.post(
        f"/cluster/broker/{cluster.broker_addr}/config", {"key": "maxMessageSize", "value": "1024"}
    )
    assert answer.status_code == 400
    assert other_admin.broker_config(cluster.broker_addr)["maxMessageSize"] == before
    assert _one_failed_record("broker.config.update").target == cluster.broker_addr
    AuditRecord.objects.all().delete()
    purge = admin_client_.post(
        f"/cluster/broker/{cluster.broker_addr}/damaged/purge", {"from": "0", "confirm": "yes"}
    )
    assert purge.status_code == 400
    _one_failed_record("broker.damaged.purge")


def test_acl_change_on_another_clusters_broker_is_refused(admin_client_, outside):
    cluster, _ = outside
    form = {
        "access_key": "outside-key",
        "secret_key": "outside-secret-1",
        "default_topic_perm": "DENY",
        "default_group_perm": "DENY",
        "broker_addr": cluster.broker_addr,
    }
    answer = admin_client_.post("/acl/accounts/save", form)
    assert answer.status_code == 400
    assert "is registered on name server" in _one_failed_record("acl.account.save").detail


def test_any_other_service_is_never_connected_to(operator_client, admin_client_, listener):
    """No port probing: what is not a registered broker is refused before a connection, so the
    answer is the same whatever listens there (or nothing)."""
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    answer = operator_client.post("/topics/save", _topic_form("ProbeT", addr))
    assert answer.status_code == 400 and "is registered on name server" in answer.content.decode()
    config = admin_client_.post(f"/cluster/broker/{addr}/config", {"key": "maxMessageSize", "value": "1024"})
    assert config.status_code == 400
    assert not _connected(listener)
    assert AuditRecord.objects.filter(result=AuditRecord.RESULT_FAILED).count() == 2


def test_console_command_refuses_another_clusters_broker(live_cluster, outside):
    from django.contrib.auth.models import Group, User

    cluster, other_admin = outside
    user = User.objects.create_user("olga", password="unused-in-this-test-42")
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    with pytest.raises(CommandError, match="is registered on name server"):
        call_command(
            "console_command", "topic.save", "--user", "olga",
            "--set", "topic=CliOtherT", "--set", f"broker_addr={cluster.broker_addr}",
        )  # fmt: skip
    assert "CliOtherT" not in other_admin.topic_list()
    _one_failed_record("topic.save")


def test_a_registered_master_is_still_accepted(operator_client, live_cluster, admin):
    answer = operator_client.post("/topics/save", _topic_form("BoundsInsideT", live_cluster.broker_addr))
    assert answer.status_code == 302
    (record,) = AuditRecord.objects.all()
    assert record.result == AuditRecord.RESULT_OK and record.detail.endswith(live_cluster.broker_addr)
    assert CLI_CLUSTER in admin.cluster_info().clusters


class _Info:
    """The cluster info of a name server listing one master and its slave (IPv6 registered bare)."""

    def cluster_info(self) -> ClusterInfo:
        members = {0: "127.0.0.1:10911", 1: "::1:10921"}
        return ClusterInfo({"broker-a": BrokerData("C", "broker-a", members)}, {"C": ["broker-a"]})


def _listing_cluster() -> Cluster:
    cluster = Cluster("127.0.0.1:9876")
    cluster.__dict__["admin"] = _Info()  # the cached admin: no name server needed
    return cluster


def test_a_slave_is_refused_where_a_master_is_needed_and_hosts_compare_by_value():
    cluster, params = _listing_cluster(), Params()
    assert cluster.registered_broker("[::1]:10921", params, master=False) == "::1:10921"
    assert cluster.broker_targets(params, "127.0.0.1:10911", "", masters=True) == ["127.0.0.1:10911"]
    with pytest.raises(Invalid, match="is broker id 1 of broker-a, not its master"):
        cluster.broker_targets(params, "[::1]:10921", "", masters=True)
    with pytest.raises(Invalid, match=re.escape("no broker at '127.0.0.1:10912' is registered")):
        cluster.registered_broker("127.0.0.1:10912", params, master=False)
    with pytest.raises(Invalid, match="no broker at 'not an address' is registered"):
        cluster.registered_broker("not an address", params, master=False)
