"""Child process for the damaged-commit-log tests: fills a store with 1 KiB messages, waits for
the checkpoint to cover them, writes the acknowledged offsets to a file and waits to be killed.

The broker flushes the checkpoint every ``flushIntervalConsumeQueue`` (1 s by default); after a
SIGKILL everything written sits in the page cache, so the store on disk is exactly what a crash
leaves: an ``abort`` file, and a checkpoint a moment behind the log's end at worst.
"""

import json
import sys
import time

from broker.store.message_store import MessageStore
from tests.store.conftest import small_config
from tests.store.damage_fixtures import GEOMETRY, fill


def main(store_dir: str, offsets_file: str, segments: int) -> None:
    store = MessageStore(store_dir, small_config(**GEOMETRY))
    store.start()
    offsets = fill(store, segments)
    checkpointed = store.checkpoint.physic_msg_timestamp
    deadline = time.monotonic() + 10
    # Wait for two checkpoint flushes after the last put (the first may have begun before it).
    while store.checkpoint.physic_msg_timestamp == checkpointed and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.2)
    with open(offsets_file, "w") as out:
        json.dump(offsets, out)
    print("ready", flush=True)
    time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
