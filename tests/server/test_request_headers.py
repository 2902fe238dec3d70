"""Header dataclasses: RocketMQ's wire names, required fields, V1 ↔ V2 send headers."""

import pytest

from broker.common import request_headers as rh


def test_send_header_v2_round_trips_to_v1_with_single_letters():
    v1 = rh.SendMessageRequestHeader("pg", "T", "TBW102", 4, -1, 0, 1700, 0, "TAGS\x01a\x02", 0, batch=True)
    v2 = rh.SendMessageRequestHeaderV2.from_v1(v1)
    fields = v2.to_ext_fields()
    assert fields["a"] == "pg" and fields["b"] == "T" and fields["e"] == "-1" and fields["m"] == "true"
    assert set(fields) <= set("abcdefghijklm")
    assert rh.decode_send_header(310, fields) == v1
    assert rh.decode_send_header(10, v1.to_ext_fields()) == v1


def test_wire_names_are_rocketmq_field_names():
    assert rh.PullMessageRequestHeader.wire_names() == [
        "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
        "suspendTimeoutMillis", "subVersion", "subscription", "expressionType",
    ]  # fmt: skip
    assert rh.UnregisterClientRequestHeader.wire_names()[0] == "clientID"
    assert "isForce" in rh.ResetOffsetRequestHeader.wire_names()
    assert "indexLastUpdatePhyoffset" in rh.QueryMessageResponseHeader.wire_names()
    response = rh.SendMessageResponseHeader("ID", 1, 7, msg_region="DefaultRegion", trace_on="true")
    fields = response.to_ext_fields()
    assert fields == {"msgId": "ID", "queueId": "1", "queueOffset": "7", "MSG_REGION": "DefaultRegion",
                      "TRACE_ON": "true"}  # fmt: skip


def test_missing_required_field_and_bad_number_are_named():
    with pytest.raises(rh.HeaderError, match="'queueId'"):
        rh.GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T"})
    with pytest.raises(rh.HeaderError, match="'queueId'='x1' is not a number"):
        rh.GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T", "queueId": "x1"})
    with pytest.raises(rh.HeaderError):
        rh.decode_send_header(310, {"a": "pg"})


def test_optional_fields_default_and_booleans_parse_like_java():
    header = rh.GetConsumeStatsRequestHeader.from_ext_fields({"consumerGroup": "g"})
    assert header.topic is None and header.to_ext_fields() == {"consumerGroup": "g"}
    reset = rh.ResetOffsetRequestHeader.from_ext_fields({"topic": "t", "group": "g", "timestamp": "-1",
                                                         "isForce": "TRUE"})  # fmt: skip
    assert reset.is_force is True and reset.timestamp == -1
    create = {"topic": "t", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8",
              "perm": "6", "topicFilterType": "SINGLE_TAG", "order": "yes"}  # fmt: skip
    assert rh.CreateTopicRequestHeader.from_ext_fields(create).order is False


def test_lock_batch_bodies():
    body = rh.LockBatchRequestBody.from_json_dict(
        {"consumerGroup": "g", "clientId": "c", "mqSet": [{"topic": "t", "brokerName": "b", "queueId": "2"}]}
    )
    assert body.to_json_dict()["mqSet"] == [{"brokerName": "b", "queueId": 2, "topic": "t"}]
    assert rh.LockBatchResponseBody.from_json_dict({"lockOKMQSet": body.mq_set}).lock_ok_mq_set == body.mq_set
    with pytest.raises(rh.HeaderError):
        rh.UnlockBatchRequestBody.from_json_dict({"consumerGroup": "g"})


def test_answers_keep_the_broker_s_field_order_and_leave_out_none():
    # The send and pull answers go out once per message; their keys stay in the order the broker
    # has always written them, and a None field (no transactionId, no masterAddr) is left out.
    send = rh.SendMessageResponseHeader("ID", 1, 7, None, "DefaultRegion", "true")
    assert list(send.to_ext_fields().items()) == [
        ("msgId", "ID"), ("queueId", "1"), ("queueOffset", "7"), ("MSG_REGION", "DefaultRegion"),
        ("TRACE_ON", "true"),
    ]  # fmt: skip
    pull = rh.PullMessageResponseHeader(
        next_begin_offset=9, min_offset=0, max_offset=12, suggest_which_broker_id=0
    )
    assert list(pull.to_ext_fields().items()) == [
        ("nextBeginOffset", "9"), ("minOffset", "0"), ("maxOffset", "12"), ("suggestWhichBrokerId", "0"),
    ]  # fmt: skip
    assert rh.RegisterBrokerResponseHeader("", None).to_ext_fields() == {"haServerAddr": ""}
    assert rh.QueryDataVersionResponseHeader(False).to_ext_fields() == {"changed": "false"}
    assert rh.GetBrokerConfigResponseHeader("{}").to_ext_fields() == {"version": "{}"}
    # After its first use a class's to_ext_fields is its own generated encoder.
    assert rh.PullMessageResponseHeader.to_ext_fields.__name__ == "encode"
    assert rh.PullMessageResponseHeader.from_ext_fields(pull.to_ext_fields()) == pull
