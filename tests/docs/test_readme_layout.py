"""The README's Layout names what is in the tree: every top-level entry of the repository and of
broker/ (no more, no fewer), and every deeper entry it names exists where it is shown. Fast (reads
files only)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# An entry line of the Layout block: at most a few spaces of indent (two per level), then its
# name(s) ("cli.py, cli_commands/"), then two spaces or more before the description; deeper
# indented lines continue a description.
ENTRY = re.compile(r"^(?P<indent> {0,6})(?P<names>\S+(?:, \S+)*)(?: {2,}|$)")


def _layout_block() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1]
    block = re.search(r"^```\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert block, "README's Layout section has no ``` block"
    return block.group(1).splitlines()


@dataclass
class Entry:
    names: list[str]  # as paths from the root: "broker/common/", "core/errors.py"
    home: str  # the directory the description speaks of: the entry itself, or its parent's
    description: str = ""


def layout() -> list[Entry]:
    entries: list[Entry] = []
    parents: list[str] = []  # the directory of each level above the current line
    for line in _layout_block():
        match = ENTRY.match(line)
        if not match:
            if entries:  # a description continued
                entries[-1].description += " " + line.strip()
            continue
        level = len(match["indent"]) // 2
        assert level <= len(parents), f"indented under nothing: {line!r}"
        del parents[level:]
        prefix = "".join(parents)
        names = [prefix + name for name in match["names"].split(", ")]
        home = names[0] if len(names) == 1 and names[0].endswith("/") else prefix
        entries.append(Entry(names, home, line[match.end() :].strip()))
        parents.append(names[-1] if names[-1].endswith("/") else prefix)
    return entries


def layout_entries() -> set[str]:
    """Every entry the Layout names, as a path."""
    return {name for entry in layout() for name in entry.names}


def _ignored(name: str) -> bool:
    """Names git does not carry: hidden ones and the root .gitignore's single-name patterns."""
    if name.startswith(".") or name == "__pycache__":
        return True
    patterns = [p.strip().strip("/") for p in (ROOT / ".gitignore").read_text().splitlines()]
    return any(fnmatch.fnmatch(name, p) for p in patterns if p and not p.startswith("#") and "/" not in p)


def tree_entries(directory: Path) -> set[str]:
    """The entries of ``directory`` as the Layout spells them (directories end with "/")."""
    prefix = "" if directory == ROOT else f"{directory.relative_to(ROOT)}/"
    return {
        prefix + p.name + ("/" if p.is_dir() else "")
        for p in directory.iterdir()
        if not _ignored(p.name) and p.name != "__init__.py"
    }


def _under(entries: set[str], prefix: str) -> set[str]:
    return {
        e for e in entries if e.startswith(prefix) and e != prefix and "/" not in e[len(prefix) :].rstrip("/")
    }


def test_the_layout_names_every_top_level_entry_and_nothing_else():
    named = {e for e in layout_entries() if "/" not in e.rstrip("/")}
    actual = tree_entries(ROOT)
    assert actual - named == set(), "in the tree, missing from README's Layout"
    assert named - actual == set(), "in README's Layout, not in the tree"


def test_the_layout_names_every_entry_of_broker_and_nothing_else():
    named = _under(layout_entries(), "broker/")
    actual = tree_entries(ROOT / "broker")
    assert actual - named == set(), "in broker/, missing from README's Layout"
    assert named - actual == set(), "in README's Layout under broker/, not in the tree"


def test_every_deeper_entry_the_layout_names_is_where_it_is_shown():
    misplaced = sorted(e for e in layout_entries() if not (ROOT / e).exists())
    assert misplaced == [], "named in README's Layout, not at that path"


# What a description names as a place: a module ("route.py", "acl_*.py") or a directory ("ha/",
# "project/").
PLACE = re.compile(r"(?<![\w/.*-])([\w*-]+(?:/[\w*-]+)*(?:\.py|/))(?![\w/])")


def _found(place: str, home: str) -> bool:
    """A place with a directory part is read from the root when it starts with a top-level entry,
    else from the entry's directory; a bare name may be anywhere below the entry's directory."""
    base = ROOT / home
    if "/" in place.rstrip("/"):
        top = place.split("/", 1)[0] + "/"
        start = ROOT if top in tree_entries(ROOT) else base
        return any(start.glob(place.rstrip("/")))
    return any(base.rglob(place.rstrip("/")))


def test_every_module_and_directory_a_description_names_is_under_its_entry():
    misplaced = sorted(
        f"{place} (said of {entry.names})"
        for entry in layout()
        for place in PLACE.findall(entry.description)
        if not _found(place, entry.home)
    )
    assert misplaced == [], "README's Layout describes these where they are not"
