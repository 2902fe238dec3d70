"""Message trace: send and consume records in ``RMQ_SYS_TRACE_TOPIC``, and the query of a trace."""

from broker.common.trace_data import PUB, SUB_AFTER, SUB_BEFORE, TraceRecord, decode_records

from .dispatcher import AsyncTraceDispatcher
from .hooks import ConsumeTraceHooks, SendTraceHook, install_consumer_trace, install_producer_trace
from .query import TraceEvent, event_of, query_message_trace, trace_events

__all__ = [
    "PUB",
    "SUB_AFTER",
    "SUB_BEFORE",
    "AsyncTraceDispatcher",
    "ConsumeTraceHooks",
    "SendTraceHook",
    "TraceEvent",
    "TraceRecord",
    "decode_records",
    "event_of",
    "install_consumer_trace",
    "install_producer_trace",
    "query_message_trace",
    "trace_events",
]
