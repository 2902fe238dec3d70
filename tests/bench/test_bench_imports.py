"""The benchmarks and the console run from the product alone: what they share with the tests
lives in the product (``broker.local_cluster``, ``broker.local_failover``, ``broker.local_tls``,
``analytics.spark.standalone``), and the console reaches the engine through the SDK."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def importers(folder: str, prefix: str) -> dict[str, list[str]]:
    found = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        hits = sorted(m for m in imported_modules(path) if m == prefix or m.startswith(prefix + "."))
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    return found


def test_no_benchmark_imports_the_tests():
    assert importers("bench", "tests") == {}


def test_the_console_reaches_the_engine_through_the_sdk_not_the_remoting_layer():
    assert importers("console", "broker.remoting") == {}
