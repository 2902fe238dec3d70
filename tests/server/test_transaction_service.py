"""Transactional message service and checker on a real store, offsets table and topic manager."""

import asyncio
import time
from types import SimpleNamespace

import pytest

from broker.common import message_const as const
from broker.common import topic_config as tc
from broker.common.json_config_file import ConsumerOffsetTable
from broker.common.message import MessageExt
from broker.common.message_codec import decode_message
from broker.common.request_headers import EndTransactionRequestHeader
from broker.common.sysflag import TRANSACTION_COMMIT_TYPE, transaction_value
from broker.common.system_names import TRANSACTION_CHECK_GROUP
from broker.server.client_manager import ProducerManager
from broker.server.config import BrokerConfig
from broker.server.topic_manager import TopicConfigManager
from broker.server.transaction import half_message as hm
from broker.server.transaction.check_service import TransactionalMessageCheckService
from broker.server.transaction.service import TransactionalMessageService
from broker.store.message_store import MessageStore
from tests.cluster import small_store_config


@pytest.fixture
def broker(tmp_path):
    store = MessageStore(tmp_path / "store", small_store_config())
    store.start()
    config = BrokerConfig(transaction_timeout=1000, transaction_check_max=2)
    topics = TopicConfigManager(tmp_path / "config", "c", "b", True, 4)
    topics.load()
    offsets = ConsumerOffsetTable(tmp_path / "config")
    broker = SimpleNamespace(store=store, config=config, topics=topics, offsets=offsets,
                             producers=ProducerManager(), register_soon=lambda: None)  # fmt: skip
    yield broker
    store.shutdown()


def put_half(store, body=b"order-1", group="pg"):
    msg = MessageExt("Orders", body, queue_id=3, born_timestamp=int(time.time() * 1000))
    msg.properties.update({const.PROPERTY_TRANSACTION_PREPARED: "true", const.PROPERTY_PRODUCER_GROUP: group,
                           const.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: body.decode()})  # fmt: skip
    assert hm.is_half_request(msg)
    hm.to_half_message(msg)
    result = store.put_message(msg)
    store.wait_for_dispatch()
    return result.append


def header(append, group="pg", state=TRANSACTION_COMMIT_TYPE):
    return EndTransactionRequestHeader(group, append.logics_offset, append.wrote_offset, state, "id")


def bodies(store, topic, queue_id):
    return [decode_message(r) for r in store.get_message("g", topic, queue_id, 0, 100).messages]


def found_half(service: TransactionalMessageService, found: EndTransactionRequestHeader) -> MessageExt:
    """The half message ``found`` names (it must be there)."""
    half = service.find_half(found)
    assert isinstance(half, MessageExt), half
    return half


def refusal(service: TransactionalMessageService, refused: EndTransactionRequestHeader) -> str:
    """Why the half message ``refused`` names cannot be ended (it must not be)."""
    answer = service.find_half(refused)
    assert isinstance(answer, str), answer
    return answer


def test_half_message_is_invisible_until_committed_once(broker):
    service = TransactionalMessageService(broker)
    append = put_half(broker.store)
    assert bodies(broker.store, "Orders", 3) == []
    assert service.find_half(header(append, group="other")) == "The producer group wrong"
    half = found_half(service, header(append))
    assert half.properties[const.PROPERTY_REAL_TOPIC] == "Orders"
    assert asyncio.run(service.commit(half)).ok
    broker.store.wait_for_dispatch()
    (final,) = bodies(broker.store, "Orders", 3)
    assert final.body == b"order-1" and transaction_value(final.sys_flag) == TRANSACTION_COMMIT_TYPE
    assert final.prepared_transaction_offset == append.wrote_offset
    (op,) = bodies(broker.store, tc.TRANS_OP_HALF_TOPIC, 0)
    assert (op.body, op.tags) == (b"0", hm.REMOVE_TAG)
    assert "already" in refusal(service, header(append))
    # A fresh service (a restarted broker) learns the same from the op topic.
    assert "already" in refusal(TransactionalMessageService(broker), header(append))


def test_checker_renews_old_half_messages_then_parks_them_after_check_max(broker):
    service = TransactionalMessageService(broker)
    checker = TransactionalMessageCheckService(broker, service, clock=lambda: time.time() + 5)
    put_half(broker.store, b"lost")
    resolved = put_half(broker.store, b"resolved")
    asyncio.run(service.rollback(found_half(service, header(resolved))))

    for _ in range(broker.config.transaction_check_max + 1):
        asyncio.run(checker.check_round())
        broker.store.wait_for_dispatch()
    halves = bodies(broker.store, tc.TRANS_HALF_TOPIC, 0)
    assert [(m.body, hm.check_times(m)) for m in halves] == [(b"lost", 0), (b"resolved", 0), (b"lost", 1),
                                                               (b"lost", 2)]  # fmt: skip
    (parked,) = bodies(broker.store, tc.TRANS_CHECK_MAX_TIME_TOPIC, 0)
    assert parked.body == b"lost" and parked.properties[const.PROPERTY_REAL_TOPIC] == "Orders"
    assert broker.topics.get(tc.TRANS_CHECK_MAX_TIME_TOPIC) is not None
    # Progress is stored as the system group's consumer offsets: everything was passed.
    assert broker.offsets.query(TRANSACTION_CHECK_GROUP, tc.TRANS_HALF_TOPIC, 0) == 4
    assert broker.offsets.query(TRANSACTION_CHECK_GROUP, tc.TRANS_OP_HALF_TOPIC, 0) == 1
    assert bodies(broker.store, "Orders", 3) == []


def test_young_half_messages_wait(broker):
    service = TransactionalMessageService(broker)
    checker = TransactionalMessageCheckService(broker, service)
    put_half(broker.store, b"young")
    asyncio.run(checker.check_round())
    broker.store.wait_for_dispatch()
    assert len(bodies(broker.store, tc.TRANS_HALF_TOPIC, 0)) == 1
    assert broker.offsets.query(TRANSACTION_CHECK_GROUP, tc.TRANS_HALF_TOPIC, 0) == 0
