"""The Python client SDK.

Blocking API: ``Producer``, ``PushConsumer``, ``LitePullConsumer`` (network work runs on a
background asyncio loop per client instance). asyncio API: the ``a``-prefixed coroutines of
``Producer`` (``asend``, ``asend_batch``, ``asend_oneway``) run on that loop; from your own
loop await ``asyncio.wrap_future(producer.send_async(msg))``.
"""

from .allocate import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateByConfig,
    AllocateByMachineRoom,
    AllocateConsistentHash,
)
from .consumer_core import (
    BROADCASTING,
    CLUSTERING,
    CONSUME_FROM_FIRST_OFFSET,
    CONSUME_FROM_LAST_OFFSET,
    CONSUME_FROM_TIMESTAMP,
)
from .errors import MQBrokerError, MQClientError
from .message_queue import MessageQueue
from .producer import Producer, SendResult, hash_selector, random_selector
from .pull_consumer import LitePullConsumer
from .push_consumer import ConsumeConcurrentlyStatus, PushConsumer

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
    "ConsumeConcurrentlyStatus",
    "LitePullConsumer",
    "MQBrokerError",
    "MQClientError",
    "MessageQueue",
    "Producer",
    "PushConsumer",
    "SendResult",
    "hash_selector",
    "random_selector",
]
