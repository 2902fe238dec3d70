"""Suite-wide pytest configuration."""

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    # A run that selects nothing must fail loudly: an empty run would otherwise look green in CI
    # whenever a marker or path filter silently excludes every test.
    if not session.items and not session.config.option.collectonly:
        raise pytest.UsageError("no tests were collected")
