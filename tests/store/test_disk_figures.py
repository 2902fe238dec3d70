"""The store figures a broker reports in its runtime info (disk use, data age, average message
size, data left to flush: the console's Disk used and Hours of data, clusterList's #SPACE and
#Hour) and the retention service acts on."""

import math
import os
import re

import pytest

from broker.common.message import MessageExt
from broker.store.disk import disk_used_fraction, disk_used_percent, human_bytes
from broker.store.mapped_file import MappedFileQueue


def statvfs_used_percent(path) -> float:
    """df's Use%, computed here from statvfs: used / (used + available to unprivileged users)."""
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    return 100.0 * used / (used + st.f_bavail * st.f_frsize)


def test_used_share_leaves_out_blocks_reserved_for_root(tmp_path):
    assert disk_used_percent(str(tmp_path)) == pytest.approx(statvfs_used_percent(tmp_path), abs=0.05)
    assert disk_used_fraction(str(tmp_path)) == math.ceil(disk_used_percent(str(tmp_path))) / 100


def test_a_path_that_cannot_be_measured_reports_minus_one(tmp_path):
    assert disk_used_fraction(str(tmp_path / "missing")) == -1.0


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (5 * 1024**3, "5.0 GiB")],
)
def test_human_bytes_in_binary_units(count, text):
    assert human_bytes(count) == text


def test_runtime_info_reports_disk_and_the_oldest_message(open_store):
    clock = {"now": 1_000.0}
    store = open_store()
    store.commitlog._clock = lambda: clock["now"]
    info = store.runtime_info()
    assert info["earliestMessageTimeStamp"] == "-1"  # nothing stored yet
    expected = math.ceil(statvfs_used_percent(store.root)) / 100
    assert float(info["commitLogDiskRatio"]) == pytest.approx(expected, abs=0.011)
    assert float(info["consumeQueueDiskRatio"]) == pytest.approx(expected, abs=0.011)
    assert 0 < float(info["commitLogDiskRatio"]) <= 1
    size = r"(\d+ B|\d+\.\d [KMGTPE]iB)"
    assert re.fullmatch(f"Total : {size}, Free : {size}\\.", info["commitLogDirCapacity"])

    for second in (5.0, 6.0):
        clock["now"] = 1_000.0 + second
        assert store.put_message(MessageExt(topic="T", body=b"x", queue_id=0)).ok
    assert store.runtime_info()["earliestMessageTimeStamp"] == "1005000"


def test_unflushed_bytes_are_what_was_written_since_the_last_flush(tmp_path):
    files = MappedFileQueue(tmp_path / "log", 4096)
    first = files.last_file_for_write()
    first.append(b"a" * 4096)  # fills the first segment
    files.last_file_for_write().append(b"b" * 100)  # the next one
    assert files.unflushed_bytes == 4196
    assert human_bytes(files.unflushed_bytes) == "4.1 KiB"  # remainHowManyDataToFlush
    files.flush()
    assert files.unflushed_bytes == 0
    assert files.last_file is not None
    files.last_file.append(b"c" * 10)
    assert files.unflushed_bytes == 10
    files.destroy()


def test_runtime_info_reports_average_size_and_data_left_to_flush(open_store):
    store = open_store()
    for body in (b"x" * 10, b"y" * 30):
        assert store.put_message(MessageExt(topic="T", body=body, queue_id=0)).ok
    store.commitlog.flush()
    info = store.runtime_info()
    assert float(info["putMessageAverageSize"]) == int(info["putMessageSizeTotal"]) / 2
    assert info["remainHowManyDataToFlush"] == "0 B"
