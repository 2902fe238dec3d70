"""Which part of the project may import which: the import graph read from every module with ``ast``
(imports at module level, inside functions and under ``if TYPE_CHECKING``, relative ones resolved),
checked against the rules below. Fast (parses files only, imports nothing).

The Django side: feature apps (``console``, ``history``, ``alerts``, ``analytics``) import ``core``
and the engine's client, never each other; ``core`` imports no feature app; neither imports the
project package (``project`` imports them, to mount their URLs). The engine (``broker``) imports no
Django app, no project, no tests; ``bench`` and ``scripts`` no tests. Inside ``broker`` the layers go
downward (``BROKER_LAYERS``: each allowed arrow named, with why).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FEATURE_APPS = ("console", "history", "alerts", "analytics")
DJANGO_SIDE = ("project", "core", *FEATURE_APPS)
# The top-level packages and modules of the repository: an import of any other top-level name is the
# standard library's or a third party's, which every part may use.
OWN = ("broker", *DJANGO_SIDE, "tests", "bench", "scripts", "docker", "manage")
CHECKED = ("broker", *DJANGO_SIDE, "tests", "bench", "scripts", "docker")

# What of the engine the Django apps may use: its client (the SDK and the admin API), the protocol's
# vocabulary, and the controller's client (the console's replication pages ask controllers through
# ControllerClient, and show its records).
ENGINE_CLIENT = (
    "broker.client",
    "broker.common",
    "broker.controller.client",
    "broker.controller.replicas_info",
    "broker.controller.state",
)
# Arrows from one module to one more place, each with its reason.
NAMED_ARROWS: dict[str, tuple[str, ...]] = {
    # A Spark standalone cluster for the scale-out tests and the decode benchmark, started on
    # loopback ports as the engine's own launcher starts its processes (free_port, wait_until).
    "analytics.spark.standalone": ("broker.local_cluster",),
}


@dataclass(frozen=True)
class Layer:
    name: str
    modules: tuple[str, ...]  # the modules (and their submodules) of the layer
    may_import: tuple[str, ...]  # the layers it may import (itself always)
    why: str


# From the bottom up. A module belongs to the layer with the longest matching prefix.
BROKER_LAYERS = (
    Layer("root", ("broker",), (), "the package itself: its version"),
    Layer(
        "common",
        ("broker.common",),
        (),
        "the protocol's vocabulary: messages, codes, headers, codecs, the broker.conf keys with the "
        "remoting ports' limits and TLS mode names",
    ),
    Layer("remoting", ("broker.remoting",), ("common",), "frames and connections carry the vocabulary"),
    Layer(
        "store",
        ("broker.store",),
        ("common", "remoting"),
        "the HA port of a master listens with remoting's TLS",
    ),
    Layer(
        "controller client",
        ("broker.controller.client", "broker.controller.replicas_info", "broker.controller.state"),
        ("common", "remoting"),
        "the controller's wire client and the replica-set records it returns",
    ),
    Layer(
        "client",
        ("broker.client",),
        ("common", "remoting", "controller client"),
        "the SDK and the admin API; the admin's controller requests go through the controller client",
    ),
    Layer(
        "acl",
        ("broker.acl",),
        ("common", "remoting"),
        "the plain ACL every server installs (broker, name server, controller) and how a server signs "
        "its outbound connections",
    ),
    Layer(
        "server",
        ("broker.server",),
        ("root", "common", "remoting", "store", "controller client", "acl"),
        "the broker over its store; it registers with controllers through the controller client",
    ),
    Layer(
        "controller",
        ("broker.controller",),
        ("common", "remoting", "controller client", "acl"),
        "the controller service: it installs the plain ACL every server shares",
    ),
    Layer(
        "namesrv",
        ("broker.namesrv",),
        ("common", "remoting", "acl", "controller", "controller client"),
        "the name server: its ACL is the plain ACL, and it may host a controller",
    ),
    Layer(
        "mqadmin",
        ("broker.cli", "broker.cli_commands"),
        ("common", "remoting", "client", "controller client"),
        "the command line over the SDK's admin API",
    ),
    Layer("grpc", ("broker.grpc",), (), "empty: the gRPC endpoint's place"),
    Layer(
        "launchers",
        ("broker.local_cluster", "broker.local_failover", "broker.local_tls", "broker.process_ties"),
        (
            "root",
            "common",
            "remoting",
            "store",
            "controller client",
            "client",
            "server",
            "controller",
            "acl",
            "namesrv",
            "mqadmin",
            "launchers",
        ),
        "start the engine's processes on loopback (the tests', benchmarks' and make run's harness)",
    ),
)


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _within_any(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(_within(module, p) for p in prefixes)


def broker_layer(module: str) -> Layer:
    best: tuple[int, Layer] | None = None
    for layer in BROKER_LAYERS:
        for prefix in layer.modules:
            if _within(module, prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), layer)
    assert best is not None, f"{module} is in no layer of BROKER_LAYERS"
    return best[1]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass(frozen=True)
class Import:
    line: int
    target: str  # ``from a.b import c`` gives "a.b.c": ``c`` may be a module (the rules match prefixes)


@functools.cache  # the tree is parsed once for every test of the module
def imports_of(root: Path, path: Path) -> tuple[Import, ...]:
    """Every import of the file, at module level, in functions and classes, under any ``if``
    (``if TYPE_CHECKING`` too: a name in an annotation is an arrow like any other)."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = parts[: len(parts) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                found.append(Import(node.lineno, f"{target}.{alias.name}" if alias.name != "*" else target))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return tuple(found)


def rule_broken(source: str, target: str) -> str | None:
    """Why ``source`` may not import ``target`` (both dotted module names), or None."""
    top, target_top = source.split(".")[0], target.split(".")[0]
    if target_top not in OWN or target_top == top:
        if top == "broker" and target_top == "broker":
            return _broker_rule(source, target)
        if top == "broker" and target_top == "django":
            return "the engine imports no Django"
        return None
    if any(_within(target, allowed) for allowed in NAMED_ARROWS.get(source, ())):
        return None
    if target_top == "tests" and top != "tests":
        return f"{top} imports no tests"
    if top in FEATURE_APPS:
        if target_top == "core" or _within_any(target, ENGINE_CLIENT):
            return None
        return f"a feature app imports only core and the engine's client ({', '.join(ENGINE_CLIENT)})"
    if top == "core":
        if _within_any(target, ENGINE_CLIENT):
            return None
        return "core imports no feature app, no project, and of the engine only its client"
    if top == "broker":
        return "the engine imports no Django app, no project, no tests, no bench"
    return None  # project, tests, bench, scripts, docker: anything but tests (above)


def _broker_rule(source: str, target: str) -> str | None:
    here, there = broker_layer(source), broker_layer(target)
    if there.name == here.name or there.name in here.may_import:
        return None
    return f"broker layer {here.name!r} may import only {', '.join(here.may_import) or 'nothing else'}"


def violations(root: Path) -> list[str]:
    found = []
    for top in CHECKED:
        for path in sorted((root / top).rglob("*.py")) if (root / top).is_dir() else ():
            source = module_name(root, path)
            for imported in imports_of(root, path):
                why = rule_broken(source, imported.target)
                if why:
                    found.append(
                        f"{path.relative_to(root)}:{imported.line}: imports {imported.target}: {why}"
                    )
    return found


def _defined_names(path: Path) -> set[str]:
    """The names a module binds at any level: what ``from it import name`` may take."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def unresolved(root: Path) -> list[str]:
    """Imports of the project's own modules that name no module or name in the tree. Python would
    not always say so: an editable install of another checkout (a worktree sharing a virtualenv)
    answers an import of a module this tree moved away with that checkout's copy."""
    modules = {
        module_name(root, path): path
        for top in CHECKED
        if (root / top).is_dir()
        for path in (root / top).rglob("*.py")
    }
    defined: dict[str, set[str]] = {}
    found = []
    for path in sorted(modules.values()):
        for imported in imports_of(root, path):
            target = imported.target
            if target.split(".")[0] not in CHECKED or target in modules:
                continue
            parent, _, name = target.rpartition(".")
            if parent in modules:
                if parent not in defined:
                    defined[parent] = _defined_names(modules[parent])
                if name == "*" or name in defined[parent]:
                    continue
            found.append(f"{path.relative_to(root)}:{imported.line}: {target} is not in the tree")
    return found


def test_every_import_of_the_projects_own_modules_resolves_in_the_tree():
    assert unresolved(ROOT) == []


def test_an_import_of_a_module_moved_away_is_found(tmp_path):
    (tmp_path / "console").mkdir()
    (tmp_path / "console" / "__init__.py").write_text("from .kept import KEPT\n", encoding="utf-8")
    (tmp_path / "console" / "kept.py").write_text("KEPT = 1\n", encoding="utf-8")
    (tmp_path / "console" / "user.py").write_text(
        "from console import KEPT, kept\nfrom console import cluster_access\n", encoding="utf-8"
    )
    assert unresolved(tmp_path) == ["console/user.py:2: console.cluster_access is not in the tree"]


def test_the_whole_project_keeps_the_import_rules():
    assert violations(ROOT) == []


def test_every_engine_module_has_a_layer_and_every_named_arrow_a_layer_it_reaches():
    names = {layer.name for layer in BROKER_LAYERS}
    for layer in BROKER_LAYERS:
        assert set(layer.may_import) <= names, layer.name
    for path in (ROOT / "broker").rglob("*.py"):
        broker_layer(module_name(ROOT, path))  # raises for a module no layer holds


TYPES_ONLY = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
# (module path, its source, the rule it breaks, or None when it keeps them)
PLANTED = [
    ("alerts/planted.py", "def f():\n    from history import query\n", "feature app"),
    ("console/planted.py", "from alerts.models import AlertEvent\n", "feature app"),
    ("history/sub/planted.py", "from ...console import tasks\n", "feature app"),
    ("analytics/planted.py", "import project.settings\n", "feature app"),
    ("console/planted.py", "from broker.server.config import BrokerConfig\n", "feature app"),
    (
        "core/planted.py",
        TYPES_ONLY + "    import console.models\n",
        "core",
    ),
    ("core/planted.py", "from history import query\n", "core"),
    ("broker/server/planted.py", "from console import tasks\n", "engine imports no Django app"),
    ("broker/store/planted.py", "import django.db\n", "engine imports no Django"),
    ("broker/common/planted.py", "from broker.remoting.command import RemotingCommand\n", "'common'"),
    ("broker/common/planted.py", "from broker.remoting.tls import ServerTls\n", "'common'"),
    ("broker/remoting/planted.py", "from ..store import commitlog\n", "'remoting'"),
    ("broker/client/planted.py", "from broker.server import config\n", "'client'"),
    ("broker/acl/planted.py", "from broker.server.controller import BrokerController\n", "'acl'"),
    (
        "broker/acl/planted.py",
        TYPES_ONLY + "    from broker.server.controller import BrokerController\n",
        "'acl'",  # names in annotations are arrows too
    ),
    ("bench/planted.py", "from tests.cluster import live_cluster\n", "bench imports no tests"),
    (
        "alerts/planted.py",
        "from core import clock\nfrom broker.client.admin import MQAdmin\nimport yaml\n",
        None,
    ),
    ("broker/server/planted.py", "from ..store import commitlog\nfrom broker.common import codes\n", None),
    ("project/planted.py", "from console.tail import routing\n", None),
]


@pytest.mark.parametrize(("path", "source", "broken"), PLANTED)
def test_a_planted_import_is_found_and_an_allowed_one_is_not(tmp_path, path, source, broken):
    planted = tmp_path / path
    planted.parent.mkdir(parents=True)
    planted.write_text(source, encoding="utf-8")
    found = violations(tmp_path)
    if broken is None:
        assert found == []
    else:
        assert len(found) == 1 and broken in found[0], found
