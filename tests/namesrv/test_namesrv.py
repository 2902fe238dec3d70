"""The name server as a real process, driven with real frames."""

import struct
import time
import zlib
from types import SimpleNamespace

import orjson
import pytest

import broker.client.errors
from broker.common.codes import RequestCode, ResponseCode
from broker.common.errors import ControllerError, MQBrokerError, MQClientError, MQError
from broker.common.fastjson import loads as fastjson_loads
from broker.common.json_config_file import DataVersion
from broker.local_cluster import free_port
from broker.remoting.client import SyncRemotingClient
from broker.remoting.command import create_request
from broker.remoting.errors import RemotingError
from broker.remoting.tls import ClientTls
from broker.server.outer_api import BrokerOuterAPI
from broker.server.registration import NamesrvRegistration
from tests.cli.fake_server import FakeServer, ok
from tests.cluster import namesrv_fixture

namesrv = namesrv_fixture(
    "listenPort={port}\nscanNotActiveBrokerInterval=200\nbrokerChannelExpiredTime=1500\n"
)


@pytest.fixture
def client():
    sync = SyncRemotingClient()
    yield sync
    sync.close()


def register(client, addr, broker_name, broker_addr, topics, cluster="c1", broker_id=0):
    body = {
        "topicConfigSerializeWrapper": {
            "topicConfigTable": {
                t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for t in topics
            },
            "dataVersion": {"timestamp": 1, "counter": len(topics)},
        },
        "filterServerList": [],
    }
    header = {"brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster,
              "haServerAddr": "", "brokerId": broker_id, "compressed": False}  # fmt: skip
    return client.invoke(addr, create_request(RequestCode.REGISTER_BROKER, header, orjson.dumps(body)))


def route(client, addr, topic):
    return client.invoke(addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))


def test_routes_cluster_info_topic_lists_and_unregister(namesrv, client):
    addr = namesrv.addr
    assert register(client, addr, "broker-a", "127.0.0.1:20911", ["orders", "shared"]).ok
    assert register(client, addr, "broker-b", "127.0.0.1:20912", ["shared"]).ok

    data = fastjson_loads(route(client, addr, "shared").body)
    assert [q["brokerName"] for q in data["queueDatas"]] == ["broker-a", "broker-b"]
    assert data["brokerDatas"][1] == {
        "cluster": "c1",
        "brokerName": "broker-b",
        "brokerAddrs": {"0": "127.0.0.1:20912"},
    }
    missing = route(client, addr, "nope")
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "nope" in missing.remark

    info = fastjson_loads(client.invoke(addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    assert info["clusterAddrTable"] == {"c1": ["broker-a", "broker-b"]}
    topics = fastjson_loads(
        client.invoke(addr, create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body
    )
    assert topics["topicList"] == ["orders", "shared"]
    by_cluster = client.invoke(addr, create_request(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "c1"}))
    assert fastjson_loads(by_cluster.body)["topicList"] == ["orders", "shared"]

    # Re-registration replaces the broker's topic set.
    assert register(client, addr, "broker-a", "127.0.0.1:20911", ["shared"]).ok
    assert route(client, addr, "orders").code == ResponseCode.TOPIC_NOT_EXIST

    unregister = {
        "brokerName": "broker-b",
        "brokerAddr": "127.0.0.1:20912",
        "clusterName": "c1",
        "brokerId": 0,
    }
    assert client.invoke(addr, create_request(RequestCode.UNREGISTER_BROKER, unregister)).ok
    data = fastjson_loads(route(client, addr, "shared").body)
    assert [q["brokerName"] for q in data["queueDatas"]] == ["broker-a"]

    wiped = client.invoke(
        addr, create_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    )
    assert wiped.field("wipeTopicCount") == "1"
    assert fastjson_loads(route(client, addr, "shared").body)["queueDatas"][0]["perm"] == 4


def test_silent_broker_expires_from_routes(namesrv, client):
    # A separate connection per registration keeps the broker alive only through its heartbeats.
    assert register(client, namesrv.addr, "broker-x", "127.0.0.1:20999", ["quiet"]).ok
    assert route(client, namesrv.addr, "quiet").ok
    deadline = time.monotonic() + 20
    while route(client, namesrv.addr, "quiet").ok and time.monotonic() < deadline:
        time.sleep(0.2)
    assert route(client, namesrv.addr, "quiet").code == ResponseCode.TOPIC_NOT_EXIST


def test_closed_broker_connection_drops_it(namesrv):
    broker_side = SyncRemotingClient()
    try:
        assert register(broker_side, namesrv.addr, "broker-y", "127.0.0.1:20998", ["gone"]).ok
    finally:
        broker_side.close()
    checker = SyncRemotingClient()
    try:
        deadline = time.monotonic() + 10
        while route(checker, namesrv.addr, "gone").ok and time.monotonic() < deadline:
            time.sleep(0.05)
        assert route(checker, namesrv.addr, "gone").code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        checker.close()


def test_kv_config_and_order_topic_conf(namesrv, client):
    addr = namesrv.addr
    put = {"namespace": "ORDER_TOPIC_CONFIG", "key": "ordered", "value": "broker-a:4"}
    assert client.invoke(addr, create_request(RequestCode.PUT_KV_CONFIG, put)).ok
    got = client.invoke(
        addr, create_request(RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "ordered"})
    )
    assert got.field("value") == "broker-a:4"
    assert register(client, addr, "broker-a", "127.0.0.1:20911", ["ordered"]).ok
    assert fastjson_loads(route(client, addr, "ordered").body)["orderTopicConf"] == "broker-a:4"
    listed = client.invoke(
        addr, create_request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"})
    )
    assert fastjson_loads(listed.body) == {"table": {"ordered": "broker-a:4"}}
    delete = {"namespace": "ORDER_TOPIC_CONFIG", "key": "ordered"}
    assert client.invoke(addr, create_request(RequestCode.DELETE_KV_CONFIG, delete)).ok
    absent = client.invoke(addr, create_request(RequestCode.GET_KV_CONFIG, delete))
    assert absent.code == ResponseCode.QUERY_NOT_FOUND


def test_bad_requests_get_errors_and_server_keeps_serving(namesrv, client):
    no_header = client.invoke(namesrv.addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC))
    assert no_header.code == ResponseCode.SYSTEM_ERROR and "topic" in no_header.remark
    bad_body = create_request(
        RequestCode.REGISTER_BROKER, {"brokerName": "b", "brokerAddr": "x:1", "brokerId": 0}, b"{oops"
    )
    assert client.invoke(namesrv.addr, bad_body).code == ResponseCode.SYSTEM_ERROR
    assert client.invoke(namesrv.addr, create_request(4242)).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert client.invoke(namesrv.addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO)).ok


def test_fastjson_integer_keys_are_accepted():
    assert fastjson_loads(b'{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}}') == {
        "brokerAddrs": {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}
    }


def compressed_body(topics: dict[str, tuple[int, int, int]], data_version: dict) -> bytes:
    """A body as a RocketMQ broker with compressedRegister=true writes it (built from the layout:
    length-prefixed DataVersion JSON, topic count, one ``TopicConfig.encode`` line per topic,
    filter-server JSON; the whole zlib-deflated)."""

    def part(raw: bytes) -> bytes:
        return struct.pack(">i", len(raw)) + raw

    lines = b"".join(
        part(f"{name} {r} {w} {perm} SINGLE_TAG".encode()) for name, (r, w, perm) in topics.items()
    )
    raw = part(orjson.dumps(data_version)) + struct.pack(">i", len(topics)) + lines + part(b"[]")
    return zlib.compress(raw, 9)


def register_compressed(client, addr, body: bytes, crc: int | None = None):
    header = {"brokerName": "broker-z", "brokerAddr": "127.0.0.1:20919", "clusterName": "cz",
              "haServerAddr": "", "brokerId": 0, "compressed": True,
              "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc}  # fmt: skip
    return client.invoke(addr, create_request(RequestCode.REGISTER_BROKER, header, body))


def test_a_compressed_registration_registers_its_topics(namesrv, client):
    body = compressed_body({"zipped": (8, 6, 6), "read-only": (2, 2, 4)}, {"timestamp": 5, "counter": 2})
    assert register_compressed(client, namesrv.addr, body).ok
    data = fastjson_loads(route(client, namesrv.addr, "zipped").body)
    queue = data["queueDatas"][0]
    assert (queue["brokerName"], queue["readQueueNums"], queue["writeQueueNums"], queue["perm"]) == (
        "broker-z", 8, 6, 6,
    )  # fmt: skip
    assert fastjson_loads(route(client, namesrv.addr, "read-only").body)["queueDatas"][0]["perm"] == 4


def test_bad_compressed_registrations_are_refused_and_register_nothing(namesrv, client):
    body = compressed_body({"zipped": (4, 4, 6)}, {"timestamp": 5, "counter": 1})
    wrong_crc = register_compressed(client, namesrv.addr, body, crc=12345)
    assert wrong_crc.code == ResponseCode.SYSTEM_ERROR and "crc32 not match" in wrong_crc.remark
    garbage = register_compressed(client, namesrv.addr, b"not a zlib stream")
    assert garbage.code == ResponseCode.SYSTEM_ERROR and "does not inflate" in garbage.remark
    truncated = zlib.compress(zlib.decompress(body)[:-1])
    short = register_compressed(client, namesrv.addr, truncated)
    assert short.code == ResponseCode.SYSTEM_ERROR and "remain" in short.remark
    length = struct.Struct(">i").pack
    bad_line = zlib.compress(length(2) + b"{}" + length(1) + length(9) + b"t x 4 6 S" + length(2) + b"[]")
    refused = register_compressed(client, namesrv.addr, bad_line)
    assert refused.code == ResponseCode.SYSTEM_ERROR and "non-numeric" in refused.remark
    assert route(client, namesrv.addr, "zipped").code == ResponseCode.TOPIC_NOT_EXIST
    assert register(client, namesrv.addr, "broker-a", "127.0.0.1:20911", ["still-serving"]).ok


def stub_broker(namesrv_addr: str, topics: list[str], compressed: bool = False) -> SimpleNamespace:
    """What NamesrvRegistration reads of a broker: its config and its topic table."""
    config = SimpleNamespace(broker_name="broker-r", broker_addr="127.0.0.1:20931", broker_cluster_name="cr",
                             broker_id=0, namesrv_addrs=[namesrv_addr], ha_server_addr="127.0.0.1:20932",
                             inner_access_key="", inner_secret_key="", client_tls=ClientTls,
                             compressed_register=compressed)  # fmt: skip
    table = {t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for t in topics}
    wrapper = {"topicConfigTable": table, "dataVersion": {"timestamp": 1, "counter": 1}}
    # A master outside controller mode (replicas=None): nothing to learn from the answer.
    replication = SimpleNamespace(registered=lambda namesrv, response: None)
    topics = SimpleNamespace(serialize_wrapper=lambda: wrapper, data_version=DataVersion(1, 1))
    return SimpleNamespace(config=config, topics=topics,
                           replication=replication, replicas=None)  # fmt: skip


async def test_the_broker_sends_its_body_crc_and_an_altered_body_is_refused(namesrv, client):
    # What the broker sends, caught by a scripted server, then replayed to the real name server.
    catcher = FakeServer()
    catcher.on(RequestCode.REGISTER_BROKER, lambda ext, body: ok())
    catcher.on(RequestCode.UNREGISTER_BROKER, lambda ext, body: ok())
    registration = NamesrvRegistration(stub_broker(catcher.addr, ["crc-checked"]))
    try:
        assert await registration.register_all()
        await registration.stop()
    finally:
        catcher.close()
    sent, gone = catcher.received
    assert (sent.code, gone.code) == (RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER)
    assert gone.ext_fields == {"brokerName": "broker-r", "brokerAddr": "127.0.0.1:20931", "clusterName": "cr",
                               "brokerId": "0"}  # fmt: skip
    assert sent.ext_fields == {"brokerName": "broker-r", "brokerAddr": "127.0.0.1:20931", "clusterName": "cr",
                               "haServerAddr": "127.0.0.1:20932", "brokerId": "0", "compressed": "false",
                               "bodyCrc32": str(zlib.crc32(sent.body) & 0x7FFFFFFF)}  # fmt: skip
    altered = sent.body.replace(b'"readQueueNums":4', b'"readQueueNums":5')
    assert altered != sent.body
    refused = client.invoke(
        namesrv.addr, create_request(RequestCode.REGISTER_BROKER, sent.ext_fields, altered)
    )
    assert refused.code == ResponseCode.SYSTEM_ERROR and refused.remark.startswith("crc32 not match")
    assert route(client, namesrv.addr, "crc-checked").code == ResponseCode.TOPIC_NOT_EXIST
    intact = client.invoke(
        namesrv.addr, create_request(RequestCode.REGISTER_BROKER, sent.ext_fields, sent.body)
    )
    assert intact.ok and route(client, namesrv.addr, "crc-checked").ok
    # Older brokers send no bodyCrc32 (the register() helper above): nothing is checked.
    unchecked = {k: v for k, v in sent.ext_fields.items() if k != "bodyCrc32"}
    assert client.invoke(namesrv.addr, create_request(RequestCode.REGISTER_BROKER, unchecked, altered)).ok


async def test_a_compressed_registration_of_the_broker_is_routed_as_sent(namesrv, client):
    """compressedRegister (on by default): the header says so, the body is RocketMQ's zlib form
    and the real name server routes each topic with the queue counts and permission sent."""
    catcher = FakeServer()
    catcher.on(RequestCode.REGISTER_BROKER, lambda ext, body: ok())
    registration = NamesrvRegistration(stub_broker(catcher.addr, ["zipped-a", "zipped-b"], compressed=True))
    try:
        assert await registration.register_all()
    finally:
        await registration.outer.close()
        catcher.close()
    (sent,) = catcher.received
    assert sent.ext_fields["compressed"] == "true"
    assert sent.ext_fields["bodyCrc32"] == str(zlib.crc32(sent.body) & 0x7FFFFFFF)
    assert client.invoke(
        namesrv.addr, create_request(RequestCode.REGISTER_BROKER, sent.ext_fields, sent.body)
    ).ok
    for topic in ("zipped-a", "zipped-b"):
        (queues,) = fastjson_loads(route(client, namesrv.addr, topic).body)["queueDatas"]
        assert (queues["brokerName"], queues["readQueueNums"], queues["writeQueueNums"], queues["perm"]) == (
            "broker-r",
            4,
            4,
            6,
        )


async def test_the_outer_api_raises_a_refusal_and_no_answer_from_the_one_error_tree(namesrv, client):
    """What BrokerOuterAPI makes of a real name server's refusal (a body altered after its CRC was
    computed) and of an address nobody listens at: both are MQError, the refusal says who refused."""
    registration = NamesrvRegistration(stub_broker(namesrv.addr, ["tree"]))
    header = registration._header(b"the body the CRC was computed over")
    outer = BrokerOuterAPI(registration.broker.config)
    try:
        with pytest.raises(MQBrokerError) as refused:
            await outer.register_broker(namesrv.addr, header, b"another body")
        with pytest.raises(RemotingError) as unanswered:
            await outer.register_broker(f"127.0.0.1:{free_port()}", header, b"")
    finally:
        await outer.close()
        await registration.outer.close()
    assert refused.value.code == ResponseCode.SYSTEM_ERROR and refused.value.remark.startswith(
        "crc32 not match"
    )
    assert str(refused.value).startswith(f"name server {namesrv.addr} answered SYSTEM_ERROR")
    assert isinstance(refused.value, MQError) and isinstance(unanswered.value, MQError)
    assert issubclass(ControllerError, MQError) and MQClientError is broker.client.errors.MQClientError
    assert route(client, namesrv.addr, "tree").code == ResponseCode.TOPIC_NOT_EXIST  # nothing registered


def register_raw(
    client, addr, broker_addr="127.0.0.1:20931", broker_id=0, ha="", filter_servers=(), topic="bounded",
    perm=6, sys_flag=0, filter_type="SINGLE_TAG",
):  # fmt: skip
    config = {"topicName": topic, "readQueueNums": 1, "writeQueueNums": 1, "perm": perm,
              "topicSysFlag": sys_flag, "topicFilterType": filter_type}  # fmt: skip
    wrapper = {"topicConfigTable": {topic: config}, "dataVersion": {"timestamp": 1, "counter": 1}}
    body = {"topicConfigSerializeWrapper": wrapper, "filterServerList": list(filter_servers)}
    header = {"brokerName": "broker-bounded", "brokerAddr": broker_addr, "clusterName": "c-bounded",
              "haServerAddr": ha, "brokerId": broker_id, "compressed": False}  # fmt: skip
    return client.invoke(addr, create_request(RequestCode.REGISTER_BROKER, header, orjson.dumps(body)))


@pytest.mark.parametrize(
    ("fields", "phrase"),
    [
        ({"broker_addr": "1" * 5000}, "brokerAddr '1111"),  # before: registered and routed to
        ({"broker_addr": "a" * 4990 + ":10911"}, "at most 253"),
        ({"broker_id": -1}, "brokerId -1 is not 0"),  # before: registered
        ({"broker_addr": "127.0.0.1"}, "port of 1 to 65535"),
        ({"broker_addr": "127.0.0.1:0"}, "port of 1 to 65535"),
        ({"broker_addr": "127.0.0.1:70000"}, "port of 1 to 65535"),
        ({"broker_addr": "bad host;x:10911"}, "the host must be"),
        ({"ha": "127.0.0.1:99999"}, "haServerAddr"),
        ({"filter_servers": ["127.0.0.1:1"] * 65}, "more than 64"),
        ({"filter_servers": ["nowhere"]}, "a filter server 'nowhere'"),
        # Hosts no client can connect to; before: each registered and routed to.
        ({"broker_addr": "-:1"}, "the host must be"),
        ({"broker_addr": ".:1"}, "the host must be"),
        ({"broker_addr": "%%:1"}, "the host must be"),
        ({"broker_addr": ":::1"}, "the host must be"),
        ({"broker_addr": "a:b:c:d:1"}, "the host must be"),
        ({"broker_addr": "999.999.999.999:1"}, "the host must be"),
        ({"broker_addr": "-broker.example:1"}, "the host must be"),
        ({"broker_addr": "127.0.0.1:00080"}, "no leading zero"),
        # Topic configs served in routes as sent; before: registered and routed.
        ({"perm": -1}, "perm=-1 of the topic 'bounded' sets bits"),
        ({"perm": 1 << 40}, "perm=1099511627776"),
        ({"sys_flag": 1 << 62}, "topicSysFlag=4611686018427387904"),
    ],
)
def test_a_registration_with_an_unusable_address_or_id_is_refused(namesrv, client, fields, phrase):
    refused = register_raw(client, namesrv.addr, **fields)
    assert refused.code == ResponseCode.SYSTEM_ERROR and phrase in refused.remark, refused.remark
    assert "registration refused" in refused.remark and len(refused.remark) < 300
    assert route(client, namesrv.addr, "bounded").code == ResponseCode.TOPIC_NOT_EXIST


def test_a_registration_with_a_filter_type_ordinal_is_read_as_fastjson_reads_it(namesrv, client):
    for filter_type in (1, 0, "multi_tag", "UNDECLARED"):  # an undeclared name is Java's null
        answer = register_raw(client, namesrv.addr, filter_type=filter_type)
        assert answer.ok, answer.remark
        assert route(client, namesrv.addr, "bounded").ok


@pytest.mark.parametrize(
    ("filter_type", "phrase"),
    [(2, "topicFilterType 2 is not a TopicFilterType ordinal (0-1"), (0.5, "topicFilterType 0.5 is not")],
)
def test_a_registration_with_a_filter_type_fastjson_cannot_read_is_refused(
    namesrv, client, filter_type, phrase
):
    """As RocketMQ's name server, which cannot decode such a body: nothing of it is registered."""
    refused = register_raw(client, namesrv.addr, filter_type=filter_type)
    assert refused.code == ResponseCode.SYSTEM_ERROR and phrase in refused.remark, refused.remark
    assert "the topic 'bounded'" in refused.remark
    assert route(client, namesrv.addr, "bounded").code == ResponseCode.TOPIC_NOT_EXIST


def test_registrations_as_brokers_send_them_pass_the_bounds(namesrv, client):
    # IPv6 in brackets, and bare as RocketMQ's brokers write brokerIP1:listenPort.
    cases = (
        ("[::1]:20932", 2, "[::1]:20933"),
        ("::1:20935", 3, "::1:20936"),
        ("broker-1.example:20934", 0, ""),
        ("10.0.0.7:20937", 4, "fe80::1%eth0:20938"),
    )
    for broker_addr, broker_id, ha in cases:
        assert register_raw(client, namesrv.addr, broker_addr, broker_id, ha, ["10.0.0.1:30000"], "fits").ok
    brokers = fastjson_loads(route(client, namesrv.addr, "fits").body)["brokerDatas"][0]["brokerAddrs"]
    expected = {"0": "broker-1.example:20934", "2": "[::1]:20932", "3": "::1:20935", "4": "10.0.0.7:20937"}
    assert brokers == expected
