from broker.common.java_hash import java_string_hash
from broker.store.index import IndexService, index_key_hash


def test_lookup_across_files_time_range_and_collisions(tmp_path):
    index = IndexService(tmp_path, max_hash_slot_num=8, max_index_num=6)
    for i in range(12):
        index.build_index(
            "T",
            [f"k{i % 3}"],
            None,
            commitlog_offset=100 * (i + 1),
            store_timestamp_ms=1_000_000 + i * 10_000,
        )
    assert len(index.files) >= 2  # full files roll over
    assert index.query_offsets("T", "k1", 10, 0, 10**13) == [1100, 800, 500, 200]
    assert index.query_offsets("T", "k1", 2, 0, 10**13) == [1100, 800]
    in_range = index.query_offsets("T", "k1", 10, 1_020_000, 1_050_000)
    assert 500 in in_range and 1100 not in in_range
    assert index.query_offsets("T", "missing", 10, 0, 10**13) == []
    # Re-dispatch after recovery does not index an offset twice.
    index.build_index("T", ["k1"], None, 200, 1_000_000)
    assert index.query_offsets("T", "k1", 10, 0, 10**13).count(200) == 1
    index.shutdown()

    reloaded = IndexService(tmp_path, max_hash_slot_num=8, max_index_num=6)
    reloaded.load(True, 0)
    assert reloaded.query_offsets("T", "k2", 10, 0, 10**13) == [1200, 900, 600, 300]
    assert reloaded.delete_expired(700) >= 1
    assert 300 not in reloaded.query_offsets("T", "k2", 10, 0, 10**13)
    reloaded.shutdown()


def test_equal_java_hashes_share_a_chain(tmp_path):
    # "Aa" and "BB" have the same Java hash: both hits come back, the caller checks the key.
    assert java_string_hash("T#Aa") == java_string_hash("T#BB")
    index = IndexService(tmp_path, max_hash_slot_num=16, max_index_num=100)
    index.build_index("T", ["Aa"], None, 10, 1000)
    index.build_index("T", ["BB"], "UNIQ", 20, 2000)
    assert index.query_offsets("T", "Aa", 10, 0, 5000) == [20, 10]
    assert index.query_offsets("T", "UNIQ", 10, 0, 5000) == [20]
    assert index_key_hash("T", "Aa") >= 0
    index.shutdown()
