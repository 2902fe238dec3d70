"""The segment decoder alone (no Spark): where a segment ends and what a torn tail looks like."""

import subprocess
import sys

from analytics.spark.codec_zip import build_codec_zip
from analytics.spark.segment_rows import COLUMNS, decode_partition, op_offsets, segment_rows, topic_kind
from broker.common import message_const as const
from broker.common.message import MessageExt
from broker.common.message_codec import encode_blank, encode_message
from broker.common.sysflag import TRANSACTION_COMMIT_TYPE

BASE = 1 << 20


def records(*messages: MessageExt) -> bytes:
    out, offset = bytearray(), BASE
    for msg in messages:
        msg.commitlog_offset = offset
        encoded = encode_message(msg)
        out += encoded
        offset += len(encoded)
    return bytes(out)


def message(topic="orders", body=b"hello", **props) -> MessageExt:
    return MessageExt(
        topic=topic,
        body=body,
        properties=dict(props),
        born_timestamp=1000,
        store_timestamp=1005,
        born_host=("10.0.0.1", 4000),
        store_host=("::1", 10911),
    )


def rows_of(data: bytes) -> list[dict]:
    return [dict(zip(COLUMNS, row, strict=True)) for row in segment_rows(f"{BASE:020d}", data)]


def test_a_sealed_segment_stops_at_the_blank_record():
    data = records(message(TAGS="a", KEYS="k1 k2"), message("%RETRY%g", RETRY_TOPIC="orders"))
    rows = rows_of(data + encode_blank(4096) + b"\xff" * 4088)
    assert [r["kind"] for r in rows] == ["normal", "retry"]
    first, second = rows
    assert (first["tags"], first["keys"], first["body_size"], first["commitlog_offset"]) == (
        "a",
        "k1 k2",
        5,
        BASE,
    )
    assert first["store_host"] == "[::1]:10911" and first["born_host"] == "10.0.0.1:4000"
    assert (second["group"], second["original_topic"]) == ("g", "orders")


def test_zero_bytes_after_the_last_record_end_a_segment_still_being_written():
    assert [r["kind"] for r in rows_of(records(message()) + bytes(500))] == ["normal"]


def test_a_torn_tail_yields_one_torn_row_with_its_offset_and_length():
    data = records(message(), message(body=b"x" * 300))
    first_size = len(records(message()))
    rows = rows_of(data[: first_size + 100])
    assert [r["kind"] for r in rows] == ["normal", "torn"]
    assert (rows[1]["commitlog_offset"], rows[1]["body_size"]) == (BASE + first_size, 100)


def test_garbage_after_a_record_is_a_torn_tail_not_an_error():
    rows = rows_of(records(message()) + b"\x00\x00\x01\x00" + b"\x12" * 300)
    assert [r["kind"] for r in rows] == ["normal", "torn"]


def test_damaged_bytes_between_records_are_one_torn_row_and_the_rows_go_on():
    """Damage the broker quarantined (not purged) mid-segment: before, the rows stopped there."""
    data = bytearray(records(message(), message(body=b"x" * 300), message(body=b"after")))
    first_size = len(records(message()))
    second_size = len(encode_message(message(body=b"x" * 300)))
    data[first_size + 2 : first_size + 60] = b"\xab" * 58  # the second record's header
    rows = rows_of(bytes(data) + encode_blank(64))
    assert [r["kind"] for r in rows] == ["normal", "torn", "normal"]
    assert (rows[1]["commitlog_offset"], rows[1]["body_size"]) == (BASE + first_size, second_size)
    assert rows[2]["commitlog_offset"] == BASE + first_size + second_size and rows[2]["body_size"] == 5


def test_zeros_followed_by_sound_records_are_one_torn_row_and_the_rows_go_on():
    """Attack break 8: zeros where records were (a lost block) read as the unwritten rest of the
    segment. Before: the rows stopped there, no torn row (400 rows of 864 in the attack). After:
    one torn row over the zeros, then every record after them."""
    messages = [message(body=bytes([65 + i % 26]) * 200) for i in range(10)]
    data = bytearray(records(*messages))
    size = len(data) // 10
    data[3 * size : 5 * size + 17] = bytes(2 * size + 17)  # two records and the next one's header
    rows = rows_of(bytes(data) + bytes(300))
    assert [r["kind"] for r in rows] == ["normal"] * 3 + ["torn"] + ["normal"] * 4
    assert (rows[3]["commitlog_offset"], rows[3]["body_size"]) == (BASE + 3 * size, 3 * size)
    assert [r["commitlog_offset"] for r in rows[4:]] == [BASE + i * size for i in range(6, 10)]
    # The same zeros at the very start of a segment.
    data[: 5 * size + 17] = bytes(5 * size + 17)
    assert [r["kind"] for r in rows_of(bytes(data))] == ["torn"] + ["normal"] * 4


def test_transaction_records_and_their_columns():
    commit = message("orders", UNIQ_KEY="U1")
    commit.sys_flag = TRANSACTION_COMMIT_TYPE
    commit.prepared_transaction_offset = 777
    half = message("RMQ_SYS_TRANS_HALF_TOPIC", REAL_TOPIC="orders", TRAN_MSG="true", UNIQ_KEY="U1")
    op = message("RMQ_SYS_TRANS_OP_HALF_TOPIC", body=b"3,9", TAGS="d")
    rows = rows_of(records(half, op, commit))
    assert [r["kind"] for r in rows] == ["trans_half", "trans_op", "normal"]
    assert rows[0]["real_topic"] == "orders" and rows[0]["unique_key"] == "U1"
    assert rows[1]["op_offsets"] == [3, 9]
    assert (rows[2]["transaction_state"], rows[2]["prepared_transaction_offset"]) == ("commit", 777)


def test_delay_level_and_schedule_kind():
    parked = message(
        "SCHEDULE_TOPIC_XXXX", **{const.PROPERTY_DELAY_TIME_LEVEL: "4", "REAL_TOPIC": "%RETRY%g"}
    )
    (row,) = rows_of(records(parked))
    assert (row["kind"], row["delay_level"], row["group"]) == ("schedule", 4, "g")


def test_kinds_of_topics():
    assert topic_kind("%DLQ%g") == "dlq"
    assert topic_kind("TRANS_CHECK_MAX_TIME_TOPIC") == "trans_given_up"
    assert topic_kind("RMQ_SYS_TRACE_TOPIC") == "trace"
    assert topic_kind("TBW102") == "system"
    assert op_offsets(b"12") == [12] and op_offsets(b"junk") == []


def test_files_that_are_not_segments_are_skipped():
    data = records(message())
    files = [("file:/a/manifest.jsonl", b"{}"), (f"file:/a/{BASE:020d}", data), ("file:/a/1.part", data)]
    assert len(list(decode_partition(files))) == 1


def test_the_shipped_codec_zip_alone_decodes_a_segment(tmp_path):
    """Executors have only the zip: every module the row mapper imports must be in it."""
    archive = build_codec_zip(tmp_path)
    segment = tmp_path / f"{BASE:020d}"
    segment.write_bytes(records(message(), message("%RETRY%g")))
    script = """if True:
        import sys
        from pathlib import Path
        zip_path, segment = sys.argv[1], Path(sys.argv[2])
        sys.path.insert(0, zip_path)
        from analytics.spark.segment_rows import segment_rows
        rows = list(segment_rows(segment.name, segment.read_bytes()))
        ours = [m for name, m in sys.modules.items() if name.split(".")[0] in ("broker", "analytics")]
        assert all(m.__file__.startswith(zip_path) for m in ours)
        print(len(rows))
    """
    # -I: neither the working directory nor PYTHONPATH put this repository on the path.
    done = subprocess.run(
        [sys.executable, "-I", "-c", script, str(archive), str(segment)],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout.strip()) == (0, "2"), done.stderr
