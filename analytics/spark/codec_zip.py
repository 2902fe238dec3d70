"""The zip shipped to Spark executors: the store's codec (``broker/common``) and the row mapper.

Executors on a cluster have none of this repository; ``SparkContext.addPyFile`` puts the zip on
their ``sys.path`` so they decode with exactly the code the store writes with.
"""

from __future__ import annotations

import hashlib
import tempfile
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# Package markers plus the modules executors import; broker/common needs nothing else.
SHIPPED = (
    "broker/__init__.py",
    "broker/common/*.py",
    "analytics/__init__.py",
    "analytics/spark/__init__.py",
    "analytics/spark/segment_rows.py",
    "analytics/spark/arrow_rows.py",
)


def shipped_files(root: Path = REPO_ROOT) -> list[Path]:
    files: list[Path] = []
    for pattern in SHIPPED:
        matches = sorted(root.glob(pattern))
        if not matches:
            raise FileNotFoundError(f"{pattern} not found under {root}: cannot ship the codec")
        files.extend(matches)
    return files


def build_codec_zip(directory: Path | None = None, root: Path = REPO_ROOT) -> Path:
    """Write the zip (named by its content hash, so an unchanged codec is built once)."""
    files = shipped_files(root)
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    target_dir = Path(directory or tempfile.gettempdir()) / "pyrocket-spark"
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"pyrocket_codec_{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        tmp = target.with_suffix(".tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, str(path.relative_to(root)))
        tmp.replace(target)
    return target
