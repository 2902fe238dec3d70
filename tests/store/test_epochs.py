"""The epoch list a broker keeps in controller mode (broker/store/ha/epochs.py): RocketMQ's
EpochFileCache semantics, its file, and a bad file refused without harm."""

import zlib

import pytest

from broker.common.epoch_entries import MAX_ENTRIES, OPEN_END, EpochEntry
from broker.store.ha.epochs import FILE_NAME, MAX_FILE_BYTES, EpochFile


@pytest.fixture
def path(tmp_path):
    return tmp_path / FILE_NAME


def test_empty_list(path):
    epochs = EpochFile(path)
    assert epochs.entries() == () and epochs.last_epoch() == 0 and epochs.last_entry() is None
    assert not path.exists()


def test_append_closes_the_previous_entry_and_persists_in_rocketmqs_format(path):
    epochs = EpochFile(path)
    epochs.append(1, 0)
    epochs.append(2, 1000)
    epochs.append(5, 2500)
    assert epochs.entries() == (
        EpochEntry(1, 0, 1000),
        EpochEntry(2, 1000, 2500),
        EpochEntry(5, 2500, OPEN_END),
    )
    assert epochs.last_epoch() == 5 and epochs.last_entry() == EpochEntry(5, 2500)
    lines = "1-0\n2-1000\n5-2500\n"
    assert path.read_text() == f"3\n{zlib.crc32(lines.encode()) & 0x7FFFFFFF}\n{lines}"
    assert EpochFile(path).entries() == epochs.entries()
    assert not path.with_name(FILE_NAME + ".tmp").exists()
    last = epochs.entry_at(10**12)
    assert epochs.entry_at(999) == EpochEntry(1, 0, 1000) and last is not None and last.epoch == 5


def test_append_refuses_an_epoch_not_above_the_last(path):
    epochs = EpochFile(path)
    epochs.append(3, 100)
    for epoch in (3, 2, 0, -1):
        with pytest.raises(ValueError):
            epochs.append(epoch, 200)
    with pytest.raises(ValueError):
        epochs.append(4, -1)
    assert epochs.entries() == (EpochEntry(3, 100),)


def test_append_drops_entries_beyond_its_start(path):
    """A broker that becomes master with a log shorter than its list says (it was cut)."""
    epochs = EpochFile(path)
    epochs.append(1, 0)
    epochs.append(2, 500)
    epochs.append(3, 900)
    epochs.append(4, 600)
    assert epochs.entries() == (EpochEntry(1, 0, 500), EpochEntry(2, 500, 600), EpochEntry(4, 600))
    epochs.append(5, 600)  # an epoch that wrote nothing stays, empty
    assert epochs.entries()[-2:] == (EpochEntry(4, 600, 600), EpochEntry(5, 600))


def test_truncate_suffix_reopens_the_entry_holding_the_cut(path):
    epochs = EpochFile(path)
    for epoch, start in ((1, 0), (2, 500), (3, 900)):
        epochs.append(epoch, start)
    epochs.truncate_suffix(700)
    assert epochs.entries() == (EpochEntry(1, 0, 500), EpochEntry(2, 500))
    epochs.truncate_suffix(500)  # an entry starting at the cut holds nothing any more
    assert epochs.entries() == (EpochEntry(1, 0),)
    assert EpochFile(path).entries() == (EpochEntry(1, 0),)
    epochs.truncate_suffix(0)
    assert epochs.entries() == () and EpochFile(path).entries() == ()


def test_truncate_prefix_drops_entries_that_ended_before_the_oldest_segment(path):
    epochs = EpochFile(path)
    for epoch, start in ((1, 0), (2, 500), (3, 900)):
        epochs.append(epoch, start)
    epochs.truncate_prefix(500)
    assert [e.epoch for e in epochs.entries()] == [2, 3]
    epochs.truncate_prefix(10**9)  # the newest stays
    assert epochs.entries() == (EpochEntry(3, 900),)


def test_replace_with_validates_and_recomputes_ends(path):
    epochs = EpochFile(path)
    epochs.replace_with([EpochEntry(1, 0, 7), EpochEntry(4, 300, 999)])
    assert epochs.entries() == (EpochEntry(1, 0, 300), EpochEntry(4, 300))
    for bad in (
        [EpochEntry(2, 0), EpochEntry(2, 10)],
        [EpochEntry(2, 100), EpochEntry(3, 50)],
        [EpochEntry(0, 0)],
    ):
        with pytest.raises(ValueError):
            epochs.replace_with(bad)
    assert epochs.entries() == (EpochEntry(1, 0, 300), EpochEntry(4, 300))


def _list(*items):
    entries = []
    for i, (epoch, start) in enumerate(items):
        end = items[i + 1][1] if i + 1 < len(items) else OPEN_END
        entries.append(EpochEntry(epoch, start, end))
    return tuple(entries)


@pytest.mark.parametrize(
    ("mine", "my_max", "theirs", "their_max", "point"),
    [
        # same epoch, behind: everything agrees up to the shorter end
        (((1, 0),), 300, ((1, 0),), 900, 300),
        # same epoch, ahead (the other side is behind)
        (((1, 0),), 900, ((1, 0),), 300, 300),
        # old master wrote [500, 800) at epoch 1; the new one wrote [500, 1200) at epoch 2
        (((1, 0),), 800, ((1, 0), (2, 500)), 1200, 500),
        # ... and the longer divergent tail: [500, 2000) at epoch 1
        (((1, 0),), 2000, ((1, 0), (2, 500)), 1200, 500),
        # both went on to later epochs, the newest shared is epoch 2
        (((1, 0), (2, 500), (3, 700)), 900, ((1, 0), (2, 500), (4, 650)), 1200, 650),
        # same epoch number, different start: not the same epoch history
        (((1, 0), (2, 400)), 900, ((1, 0), (2, 500)), 1200, 400),
        # nothing shared
        (((3, 0),), 900, ((1, 0), (2, 500)), 1200, -1),
        ((), 900, ((1, 0),), 1200, -1),
        # an entry beyond its log's end describes nothing of it
        (((1, 0), (2, 500)), 400, ((2, 500),), 1200, -1),
    ],
)
def test_find_consistent_point(path, mine, my_max, theirs, their_max, point):
    epochs = EpochFile(path)
    for epoch, start in mine:
        epochs.append(epoch, start)
    assert epochs.find_consistent_point(_list(*theirs), their_max, my_max) == point


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x00\xff\xfe garbage",
        b"2\n0\n1-0\n",  # says 2, holds 1
        b"1\n12345\n1-0\n",  # checksum mismatch
        b"2\n0\n2-0\n1-500\n",  # epochs falling
        b"2\n0\n1-500\n2-100\n",  # starts falling
        b"1\n0\n1--5\n",  # negative offset
        b"1\n0\n0-0\n",  # epoch 0
        b"1\n0\n99999999999-0\n",  # not a Java int
        b"1\n0\n1-99999999999999999999999\n",  # huge digits
        f"{MAX_ENTRIES + 1}\n0\n".encode()
        + b"".join(f"{i + 1}-{i}\n".encode() for i in range(MAX_ENTRIES + 1)),
        b"9" * (MAX_FILE_BYTES + 10),  # too large: not read whole
    ],
)
def test_a_bad_file_is_refused_with_a_log_line_and_kept_aside(path, content, caplog):
    path.write_bytes(content)
    epochs = EpochFile(path)
    assert epochs.entries() == ()
    assert "epoch file" in caplog.text and "refused" in caplog.text
    assert not path.exists() and path.with_name(FILE_NAME + ".corrupt").read_bytes() == content
    epochs.append(1, 0)  # and the broker goes on with a fresh list
    assert EpochFile(path).entries() == (EpochEntry(1, 0),)


def test_unchecked_checksum_zero_is_accepted(path):
    path.write_bytes(b"2\n0\n1-0\n3-64\n")
    assert EpochFile(path).entries() == _list((1, 0), (3, 64))
