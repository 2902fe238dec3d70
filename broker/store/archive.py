"""Copies of sealed commit-log segments: the analytics jobs' input (features S7, A1: docs/features.md).

Segments keep their names (the offset of their first byte) under ``<archive>/commitlog/`` so a
reader can order them; ``manifest.jsonl`` records each one's size and sha256. A copy is written
under a hidden temporary name (``.<name>.part``, which readers skip) and renamed into place once
complete and verified, so a reader never sees half a segment.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import orjson

from broker.common.atomic_file import fsync_directory

# Bytes compared to tell whether an archived copy is of this segment (see ``has_copy_of``).
_HEAD_BYTES = 64 * 1024


class SegmentArchiver:
    def __init__(self, archive_uri: str) -> None:
        parsed = urlparse(archive_uri)
        if parsed.scheme in ("", "file"):
            root = parsed.path if parsed.scheme == "file" else archive_uri
        else:
            raise ValueError(
                f"archive URI {archive_uri!r}: only a local directory or file:// is supported by "
                "the broker; mount the remote store (s3a, hdfs …) or sync the directory to it"
            )
        self.root = Path(root)
        self.archive_dir = self.root / "commitlog"
        self.manifest = self.root / "manifest.jsonl"
        # The archive-on-seal thread and retention's archive-before-delete share one archiver:
        # one copy at a time, so they never write the same temporary file.
        self._lock = threading.Lock()

    def archive(self, path: str | Path) -> str:
        """Copy one sealed segment (verified, atomic, idempotent); return its archived path."""
        source = Path(path)
        with self._lock:
            self.archive_dir.mkdir(parents=True, exist_ok=True)
            destination = self.archive_dir / source.name
            digest = _sha256(source)
            if destination.exists() and _sha256(destination) == digest:
                return str(destination)
            tmp = destination.with_name(f".{destination.name}.part")
            with open(source, "rb") as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
                dst.flush()
                os.fsync(dst.fileno())
            if _sha256(tmp) != digest:
                tmp.unlink(missing_ok=True)
                raise OSError(f"archived copy of {source} does not match the original")
            os.replace(tmp, destination)
            fsync_directory(self.archive_dir)  # the rename itself survives a power loss
            self._record(source, destination, digest)
            return str(destination)

    def has_copy_of(self, path: str | Path) -> bool:
        """Whether the archive holds this segment already: same name, same size, same first
        bytes. Cheap enough for every segment at start-up (no whole-file hash), and still tells
        a copy of another store's segment with the same name (other born/store times) apart."""
        source = Path(path)
        copy = self.archive_dir / source.name
        try:
            if copy.stat().st_size != source.stat().st_size:
                return False
            with open(source, "rb") as a, open(copy, "rb") as b:
                return a.read(_HEAD_BYTES) == b.read(_HEAD_BYTES)
        except FileNotFoundError:
            return False

    def _record(self, source: Path, destination: Path, digest: str) -> None:
        entry = {
            "name": source.name,
            "start_offset": int(source.name) if source.name.isdigit() else None,
            "size": destination.stat().st_size,
            "sha256": digest,
            "archived_at": int(time.time() * 1000),
        }
        with open(self.manifest, "ab") as handle:
            handle.write(orjson.dumps(entry) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())

    def list_archived(self) -> list[str]:
        if not self.archive_dir.exists():
            return []
        return sorted(p.name for p in self.archive_dir.iterdir() if p.name.isdigit())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
