"""Console view tests: Django's test client against a real name server and two real brokers.

DJANGO_SETTINGS_MODULE is set here, not suite-wide, so engine tests never load Django.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

import pytest  # noqa: E402

from core import cluster_access  # noqa: E402
from tests.cluster import console_preset, logged_in_client, start  # noqa: E402

PASSWORD = "correct horse battery staple 42"


@pytest.fixture(scope="session")
def live_cluster(tmp_path_factory):
    cluster = start(console_preset(), tmp_path_factory.mktemp("console-cluster"))
    yield cluster
    cluster_access.close_all()
    cluster.stop()


_NEEDS_CLUSTER = {
    "live_cluster",
    "admin",
    "viewer_client",
    "operator_client",
    "admin_client_",
    "csrf_operator_client",
}


@pytest.fixture(autouse=True)
def _console_on_live_cluster(request, settings):
    """Point the console at the live cluster for tests that use it (the fixture starts it)."""
    # Test users need no costly password hashing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    if _NEEDS_CLUSTER & set(request.fixturenames):
        cluster = request.getfixturevalue("live_cluster")
        settings.BROKER_NAMESRV = cluster.namesrv_addr


@pytest.fixture
def admin(live_cluster):
    return cluster_access.admin_for(live_cluster.namesrv_addr)


viewer_client = logged_in_client("vera", "viewer", PASSWORD)
operator_client = logged_in_client("otto", "operator", PASSWORD)
admin_client_ = logged_in_client("ada", "admin", PASSWORD)
csrf_operator_client = logged_in_client("carl", "operator", PASSWORD, enforce_csrf_checks=True)
