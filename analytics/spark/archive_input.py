"""What a report's input URI holds, checked before Spark starts (no Spark import: the web process
uses this too, to tell a user with an empty archive what to do instead of queueing a run that
can only fail).

Only a local directory (a path or ``file://``) can be looked at; other URIs (``hdfs://``,
``s3a://`` …) are left for Spark to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

WHAT_TO_DO = (
    "A broker copies each commit-log segment there once the segment is full (sealed), when its "
    "broker.conf sets archiveUri to this directory. `make run` does: its var/broker.conf has "
    "archiveUri=<var dir>/archive and 8 MiB segments (mappedFileSizeCommitLog), so send messages "
    "until 8 MiB have been stored, then run the report again."
)


class NoArchivedSegments(FileNotFoundError):
    """The input holds no commit-log segment; the message says what to do."""


@dataclass(frozen=True)
class ArchiveContents:
    directory: Path
    segments: int
    total_bytes: int
    newest_mtime: float | None

    @property
    def newest(self) -> datetime | None:
        """When the newest segment was archived (its copy's modification time), in UTC."""
        return None if self.newest_mtime is None else datetime.fromtimestamp(self.newest_mtime, UTC)


def local_directory(uri: str) -> Path | None:
    """The directory of a local URI (a path or ``file://``); None for any other scheme."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and uri[1:2] == ":"):  # a path (or C:\…)
        return Path(uri)
    return None


def segment_directory(root: Path) -> Path:
    """Segments sit in ``<archive>/commitlog`` (the broker's layout) or in the directory itself."""
    return root / "commitlog" if (root / "commitlog").is_dir() else root


def contents(uri: str) -> ArchiveContents | None:
    """The segments of a local input; None when the URI is not local (cannot be looked at here)."""
    root = local_directory(uri)
    if root is None:
        return None
    directory = segment_directory(root)
    files = []
    if directory.is_dir():
        files = [p for p in directory.iterdir() if p.name.isdigit() and p.is_file()]
    stats = [p.stat() for p in files]
    return ArchiveContents(
        directory=directory,
        segments=len(files),
        total_bytes=sum(s.st_size for s in stats),
        newest_mtime=max((s.st_mtime for s in stats), default=None),
    )


def require_segments(uri: str) -> str:
    """Where Spark reads the segments of ``uri``; raises ``NoArchivedSegments`` for a local
    input holding none (a missing directory, or one with no segment yet)."""
    found = contents(uri)
    if found is None:
        return uri
    if not found.directory.exists():
        raise NoArchivedSegments(f"no archived segments at {uri}: the directory does not exist. {WHAT_TO_DO}")
    if found.segments == 0:
        raise NoArchivedSegments(f"no archived segments in {found.directory} yet. {WHAT_TO_DO}")
    return str(found.directory.resolve())
