"""The store builds no path from a name that could leave it, whatever its caller checked."""

import pytest

from broker.common.message import MessageExt
from broker.common.names import IllegalName, name_path
from broker.store.consume_queue import ConsumeQueue


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b", "a\\b", "", "x\x00y", "/etc"])
def test_name_path_refuses_names_that_are_not_one_plain_component(tmp_path, name):
    with pytest.raises(IllegalName):
        name_path(tmp_path, name)


def test_name_path_refuses_a_link_that_leads_outside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "linked").symlink_to(outside)
    with pytest.raises(IllegalName, match="outside"):
        name_path(root, "linked")
    assert name_path(root, "%RETRY%" + "g" * 127) == root / ("%RETRY%" + "g" * 127)  # derived names


def test_deleting_a_traversal_topic_removes_nothing_outside_the_store(open_store, tmp_path):
    store = open_store()
    victim = tmp_path / "tmp" / "x"
    victim.mkdir(parents=True)  # empty, as the store's delete removes an emptied topic directory
    assert store.put_message(MessageExt(topic="Kept", body=b"x")).ok
    assert store.wait_for_dispatch(timeout=60)
    traversal = "../" * 2 + "tmp/x"  # from <store>/consumequeue to tmp_path/tmp/x
    assert (store.root / "consumequeue" / traversal).resolve() == victim.resolve()
    assert store.delete_topics({traversal}) == 0
    assert victim.is_dir()
    assert store.get_max_offset_in_queue("Kept", 0) == 1  # the store's own queues are untouched


def test_a_consume_queue_cannot_be_made_for_a_traversal_name(tmp_path):
    with pytest.raises(IllegalName):
        ConsumeQueue(tmp_path / "consumequeue", "../../escape", 0, 20 * 100)
    assert not (tmp_path.parent / "escape").exists()


def test_a_stray_directory_in_consumequeue_is_skipped_at_start(open_store, tmp_path):
    store = open_store()
    assert store.put_message(MessageExt(topic="Kept", body=b"x")).ok
    assert store.wait_for_dispatch(timeout=60)
    store.shutdown()
    (store.root / "consumequeue" / "not a topic" / "0").mkdir(parents=True)
    reopened = open_store()
    assert reopened.topics() == {"Kept"}
