"""The disk and age figures a broker reports (RocketMQ's runtime info: the console's Disk used
and Hours of data, clusterList's #SPACE and #Hour) and the retention service acts on."""

import math
import os
import re

import pytest

from broker.common.message import MessageExt
from broker.store.disk import disk_used_fraction, disk_used_percent, human_bytes


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
