"""The Python client SDK.

Blocking API: ``Producer``, ``TransactionProducer``, ``PushConsumer``, ``LitePullConsumer``
(network work runs on a background asyncio loop per client instance). asyncio API:
``AsyncProducer``, ``AsyncPushConsumer`` and ``AsyncLitePullConsumer`` run on your own event
loop (no thread hand-off; ``async def`` listeners are awaited on it).
"""

from broker.common.acl_signature import SessionCredentials
from broker.common.message_queue import MessageQueue
from broker.remoting.tls import ClientTls, TlsConfigError

from .allocate import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateByConfig,
    AllocateByMachineRoom,
    AllocateConsistentHash,
)
from .asyncio_api import AsyncLitePullConsumer, AsyncProducer, AsyncPushConsumer
from .consume_orderly import ConsumeOrderlyStatus
from .consumer_core import (
    BROADCASTING,
    CLUSTERING,
    CONSUME_FROM_FIRST_OFFSET,
    CONSUME_FROM_LAST_OFFSET,
    CONSUME_FROM_TIMESTAMP,
)
from .errors import MQBrokerError, MQClientError
from .message_selector import MessageSelector
from .producer import Producer, SendResult
from .pull_consumer import LitePullConsumer
from .push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from .queue_selectors import hash_selector, random_selector
from .request_reply import RequestTimeoutError, create_reply_message
from .transaction_producer import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)

__all__ = [
    "BROADCASTING",
    "CLUSTERING",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
    "AllocateAveragely",
    "AllocateAveragelyByCircle",
    "AllocateByConfig",
    "AllocateByMachineRoom",
    "AllocateConsistentHash",
    "AsyncLitePullConsumer",
    "AsyncProducer",
    "AsyncPushConsumer",
    "ClientTls",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyStatus",
    "LitePullConsumer",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "MessageQueue",
    "MessageSelector",
    "Producer",
    "PushConsumer",
    "RequestTimeoutError",
    "SendResult",
    "SessionCredentials",
    "TlsConfigError",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "create_reply_message",
    "hash_selector",
    "random_selector",
]
