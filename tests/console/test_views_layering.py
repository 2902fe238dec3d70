"""Views parse, call, render: no view module imports the admin client, the SDK or cluster access,
nor reaches the cluster through the handle it holds (``cluster.admin`` / ``.producer``), nor writes
the audit log. Reads go through ``console.queries``, actions through ``console.commands`` and the
one boundary that records them (checked with ``ast``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VIEW_MODULES = [
    *sorted((ROOT / "console" / "views").glob("*.py")),
    ROOT / "alerts" / "views.py",
    ROOT / "analytics" / "views.py",
]
# The admin client and the SDK, cluster access; the audit log is written by core.boundary alone.
FORBIDDEN_MODULES = ("broker.client", "core.cluster_access", "core.audit")
FORBIDDEN_NAMES = {
    "admin_of",
    "admin_for",
    "producer_of",
    "producer_for",
    "namesrv_of",
    "MQAdmin",
    "AsyncMQAdmin",
}
CLUSTER_CLIENTS = {"admin", "producer"}  # what a Cluster handle hands out


def violations(source: str) -> list[str]:
    """Where ``source`` (a view module) talks to the cluster itself, one line each."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
            found += [f"{node.lineno}: imports {a.name}" for a in node.names if a.name in FORBIDDEN_NAMES]
        else:
            modules = []
        line = getattr(node, "lineno", 0)
        found += [f"{line}: imports {m}" for m in modules if m.startswith(FORBIDDEN_MODULES)]
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"{node.lineno}: uses {node.id}")
        if isinstance(node, ast.Attribute) and node.attr in CLUSTER_CLIENTS and _is_cluster(node.value):
            found.append(f"{node.lineno}: reaches the cluster through .{node.attr}")
    return found


def _is_cluster(node: ast.expr) -> bool:
    """``cluster`` (the handle's name in every view) or ``cluster_of(request)``."""
    if isinstance(node, ast.Name):
        return node.id == "cluster"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cluster_of"


def test_the_view_modules_are_all_checked():
    names = {p.relative_to(ROOT).as_posix() for p in VIEW_MODULES}
    assert {
        "console/views/topics.py",
        "console/views/dlq.py",
        "alerts/views.py",
        "analytics/views.py",
    } <= names


@pytest.mark.parametrize("path", VIEW_MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_view_talks_to_the_cluster(path):
    assert violations(path.read_text()) == []


@pytest.mark.parametrize(
    "planted",
    [
        "from broker.client.admin import MQClientError",
        "import broker.client",
        "from core.audit import audit_record",
        "from core.cluster_access import current_namesrv",
        "from core import cluster_access\nfrom x import admin_of",
        "def view(request):\n    return admin_of(request).topic_list()",
        "def view(request):\n    cluster = cluster_of(request)\n    return cluster.admin.topic_list()",
        "def view(request):\n    return cluster_of(request).producer.send(None)",
    ],
)
def test_a_planted_violation_is_found(planted):
    assert violations(planted)


def test_what_views_may_do_is_no_violation():
    allowed = (
        "from broker.common.errors import MQClientError\n"
        "from console.queries import topics as queries\n"
        "def view(request):\n"
        "    account = object()\n"
        "    return queries.topic_detail(cluster_of(request), 't'), account.admin\n"
    )
    assert violations(allowed) == []
