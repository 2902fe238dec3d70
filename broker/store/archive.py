"""Copies of sealed commit-log segments, kept for the analytics jobs before deletion.

Segments keep their names (the offset of their first byte) under ``<archive>/commitlog/`` so a
reader can order them; ``manifest.jsonl`` records each one's size and sha256.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from urllib.parse import urlparse

import orjson


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

    def archive(self, path: str | Path) -> str:
        """Copy one sealed segment (verified, atomic, idempotent); return its archived path."""
        source = Path(path)
        self.archive_dir.mkdir(parents=True, exist_ok=True)
        destination = self.archive_dir / source.name
        digest = _sha256(source)
        if destination.exists() and _sha256(destination) == digest:
            return str(destination)
        tmp = destination.with_name(destination.name + ".part")
        with open(source, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        if _sha256(tmp) != digest:
            tmp.unlink(missing_ok=True)
            raise OSError(f"archived copy of {source} does not match the original")
        os.replace(tmp, destination)
        self._record(source, destination, digest)
        return str(destination)

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
