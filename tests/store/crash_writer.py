"""Child process for the crash test: writes with SYNC_FLUSH and reports every acknowledged put.

Each acknowledgement line is written to stdout only after ``put_message`` returned PUT_OK, so
the parent knows exactly which messages the store promised to keep.
"""

import sys

from broker.common.message import MessageExt
from broker.store.message_store import MessageStore
from broker.store.store_config import SYNC_FLUSH, MessageStoreConfig


def main(store_dir: str, start: int) -> None:
    config = MessageStoreConfig(
        flush_disk_type=SYNC_FLUSH,
        mapped_file_size_commit_log=128 * 1024,
        mapped_file_size_consume_queue=100 * 20,
        max_hash_slot_num=1024,
        max_index_num=10_000,
    )
    store = MessageStore(store_dir, config)
    store.start()
    out = sys.stdout
    i = start
    while True:
        msg = MessageExt(topic="crash", body=(f"message-{i}|" * (1 + i % 40)).encode(), queue_id=i % 3)
        msg.keys = [f"k{i}"]
        result = store.put_message(msg)
        if not result.ok or result.append is None:
            print(f"FAIL {i} {result.status}", flush=True)
            return
        out.write(f"{i} {result.append.wrote_offset} {msg.queue_id} {result.append.logics_offset}\n")
        out.flush()
        i += 1


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
