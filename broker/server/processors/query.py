"""QUERY_MESSAGE (by key in a time range) and VIEW_MESSAGE_BY_ID (by commit-log offset).

With ACL on, each message is checked against the topic it belongs to (``acl_stored``): a query
leaves out what the account may not read, a view of it is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.common.acl_rules import SUB
from broker.common.codes import ResponseCode
from broker.common.message_codec import decode_message, encode_message
from broker.common.request_headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from broker.remoting.command import RemotingCommand, response_to

from ..acl_stored import may_read, stored_message_refusal
from .name_checks import name_refusal

if TYPE_CHECKING:
    from ..controller import BrokerController


class QueryProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def query_message(self, conn, request: RemotingCommand) -> RemotingCommand:
        store = self.broker.store
        header = QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        refused = name_refusal(request, (header.topic,))
        if refused is not None:
            return refused
        max_num = min(header.max_num, 64)
        found = store.query_message(
            header.topic, header.key, max_num, header.begin_timestamp, header.end_timestamp
        )
        fields = QueryMessageResponseHeader(
            store.index.last_update_timestamp(), store.index.last_commitlog_offset()
        )
        if self.broker.acl is not None:  # a broker-internal topic holds messages of other topics
            found = [msg for msg in found if may_read(self.broker, conn, request, msg)]
        if not found:
            return response_to(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                fields,
            )
        body = b"".join(bytes(encode_message(msg)) for msg in found)
        return response_to(request, ext_fields=fields, body=body)

    async def view_message_by_id(self, conn, request: RemotingCommand) -> RemotingCommand:
        offset = ViewMessageRequestHeader.from_ext_fields(request.ext_fields).offset
        record = self.broker.store.record_starting_at(offset)
        if record is None:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        msg = decode_message(record, read_body=False)
        refused = stored_message_refusal(self.broker, conn, request, msg, SUB)
        return response_to(request, body=record) if refused is None else refused
