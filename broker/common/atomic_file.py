"""Replacing a small file whole, so that a crash or power loss leaves the old content or the new.

The one home of the write-fsync-rename-fsync sequence every metadata file of the broker uses
(its JSON config tables, the epoch list, the broker identity, the ACL file): the payload goes to
a temp file beside the target, is fsynced, renamed over the target, and the directory is fsynced
so the rename itself is durable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_atomically(
    path: Path,
    payload: bytes,
    *,
    mode: int | None = None,
    before_replace: Callable[[], None] | None = None,
    sync: bool = True,
) -> None:
    """Write ``payload`` as ``path``. ``mode``: the file's permission bits; ``before_replace``:
    run once the new content is safe on disk and before it takes the name (e.g. keeping a backup
    of the old). ``sync=False`` skips both fsyncs, for a file rewritten every second whose last
    version a machine crash may lose (still whole: a process kill keeps the page cache).
    The temp file is ``<name>.tmp``: callers serialise their writes to one file. Raises OSError
    with the target unchanged and no temp file left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # Created with its final mode (under the umask) so a secret is never readable under it.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_directory(path.parent)
