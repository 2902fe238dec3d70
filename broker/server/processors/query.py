"""QUERY_MESSAGE (by key in a time range) and VIEW_MESSAGE_BY_ID (by commit-log offset)."""

from __future__ import annotations

from broker.common.codes import ResponseCode
from broker.common.message_codec import encode_message
from broker.remoting.command import RemotingCommand, response_to


class QueryProcessor:
    def __init__(self, broker) -> None:
        self.broker = broker

    async def query_message(self, conn, request: RemotingCommand) -> RemotingCommand:
        store = self.broker.store
        topic, key = request.field("topic") or "", request.field("key") or ""
        max_num = min(request.int_field("maxNum", 32), 64)
        begin, end = request.int_field("beginTimestamp", 0), request.int_field("endTimestamp", 2**62)
        found = store.query_message(topic, key, max_num, begin, end)
        fields = {
            "indexLastUpdateTimestamp": store.index.last_update_timestamp(),
            "indexLastUpdatePhyoffset": store.index.last_commitlog_offset(),
        }
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
        offset = request.int_field("offset")
        record = self.broker.store.select_one_message_by_offset(offset)
        if record is None:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        return response_to(request, body=record)
