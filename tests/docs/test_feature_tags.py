"""Feature ids cited in the code ("W8", "N3") can be looked up: each is listed in docs/features.md.
Fast (reads files only)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FEATURES = ROOT / "docs" / "features.md"
# Where the code and its pages live (static/vendor holds third-party files).
SOURCES = (
    "broker",
    "console",
    "history",
    "alerts",
    "analytics",
    "bench",
    "scripts",
    "templates",
    "tests",
    "static/console",
    "manage.py",
)
SOURCE_SUFFIXES = {".py", ".html", ".js"}
# An id: the area's letter and the feature's number, standing alone ("A1-A3" cites A1 and A3).
TAG = re.compile(r"\b([SNBCPWAO][1-9][0-9]?)\b")
# docs/features.md lists each id as a bold list item: "- **W8** Dead letters: ...".
LISTED = re.compile(r"^- \*\*([SNBCPWAO][1-9][0-9]?)\*\*", re.MULTILINE)


def _sources() -> list[Path]:
    roots = [ROOT / name for name in SOURCES]
    files = [root for root in roots if root.is_file()]
    for root in (r for r in roots if r.is_dir()):
        files += [p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts]
    return sorted(f for f in files if "artifacts" not in f.relative_to(ROOT).parts)


def _cited() -> dict[str, list[str]]:
    """Each cited id → where (``path:line``)."""
    cited: dict[str, list[str]] = {}
    for path in _sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for tag in TAG.findall(line):
                cited.setdefault(tag, []).append(f"{path.relative_to(ROOT)}:{number}")
    return cited


def test_every_feature_id_cited_in_the_code_is_listed_in_docs_features():
    assert FEATURES.is_file(), "docs/features.md is missing: the code cites feature ids it would define"
    listed = set(LISTED.findall(FEATURES.read_text(encoding="utf-8")))
    cited = _cited()
    assert cited, "no feature id found in the sources: the scan is broken"
    unknown = {tag: places for tag, places in cited.items() if tag not in listed}
    assert not unknown, f"feature ids cited but not in docs/features.md: {unknown}"


def test_docs_features_lists_each_id_once():
    ids = LISTED.findall(FEATURES.read_text(encoding="utf-8"))
    assert ids, "docs/features.md lists no id in the '- **X1** ...' form"
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
