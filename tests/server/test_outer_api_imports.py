"""The import rules of the broker's outbound calls (issue 33, part 3), read from the sources with
``ast``: the controller package never imports the client SDK (the SDK builds on the controller
client, not the reverse), and in ``broker/server`` and the controller's process only one module
builds a RemotingClient (``broker/acl/outbound.py``, which both outer APIs call), so signing
and TLS of every outbound connection are set in one place (the controller client's own default,
for tools that pass none, is the SDK's side)."""

from __future__ import annotations

import ast
from pathlib import Path

BROKER = Path(__file__).resolve().parents[2] / "broker"


def _sources(package: str) -> list[Path]:
    return sorted((BROKER / package).rglob("*.py"))


def _imported(tree: ast.AST, path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports made absolute."""
    package = ".".join(path.relative_to(BROKER.parent).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(filter(None, [base, node.module or ""]))
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_the_controller_package_does_not_import_the_client_sdk():
    offending = {
        str(path.relative_to(BROKER.parent)): sorted(
            name
            for name in _imported(ast.parse(path.read_text()), path)
            if name.split(".")[:2] == ["broker", "client"]
        )
        for path in _sources("controller")
    }
    assert {path: names for path, names in offending.items() if names} == {}


def _builds_remoting_client(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name == "RemotingClient":
                return True
    return False


def test_only_the_outer_api_builds_outbound_clients_in_broker_server():
    """The outer APIs' one connection builder (broker/acl/outbound.py) is the only place in the
    broker and its ACL that makes a RemotingClient."""
    builders = [
        str(path.relative_to(BROKER.parent))
        for path in _sources("server") + _sources("acl")
        if _builds_remoting_client(ast.parse(path.read_text()))
    ]
    assert builders == ["broker/acl/outbound.py"]


def test_the_controller_process_sends_through_the_outer_api():
    builders = [
        str(path.relative_to(BROKER.parent))
        for path in _sources("controller")
        if _builds_remoting_client(ast.parse(path.read_text()))
    ]
    assert builders == ["broker/controller/client.py"]


def test_the_rules_see_what_they_look_for():
    """The checks above would pass on an empty tree: they must find what they forbid."""
    here = BROKER / "controller" / "x.py"
    assert "broker.client.errors" in _imported(ast.parse("from broker.client.errors import A"), here)
    assert "broker.client" in _imported(ast.parse("from ..client import errors"), here)
    assert _builds_remoting_client(ast.parse("c = remoting.client.RemotingClient(tls=None)"))
    assert not _builds_remoting_client(ast.parse("c: RemotingClient | None = None"))
