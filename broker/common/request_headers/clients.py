"""Headers of the client requests: unregistering, consumer lists, send-back, transactions, running info."""

from __future__ import annotations

from broker.common.request_headers.base import CommandHeader, absent, header, wire


@header
class UnregisterClientRequestHeader(CommandHeader):
    """UNREGISTER_CLIENT (35)."""

    client_id: str = wire("clientID", absent="")
    producer_group: str | None = None
    consumer_group: str | None = None


@header
class GetConsumerListByGroupRequestHeader(CommandHeader):
    """GET_CONSUMER_LIST_BY_GROUP (38); the answer is a body ``{"consumerIdList": [...]}``."""

    consumer_group: str = absent("")


@header
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker → consumer, oneway."""

    consumer_group: str


@header
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    """CONSUMER_SEND_MSG_BACK (36)."""

    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@header
class EndTransactionRequestHeader(CommandHeader):
    """END_TRANSACTION (37). ``commit_or_rollback`` is a MessageSysFlag transaction type."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None


@header
class CheckTransactionStateRequestHeader(CommandHeader):
    """CHECK_TRANSACTION_STATE (39), broker → producer."""

    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


@header
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    """GET_CONSUMER_RUNNING_INFO (307), admin → broker → consumer."""

    consumer_group: str = absent("")
    client_id: str = absent("")
    jstack_enable: bool | None = None


@header
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    """CONSUME_MESSAGE_DIRECTLY (309), admin → broker → consumer."""

    consumer_group: str = absent("")
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
    topic: str | None = None
