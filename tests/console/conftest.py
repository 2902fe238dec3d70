"""Console view tests: Django's test client against a real name server and two real brokers.

DJANGO_SETTINGS_MODULE is set here, not suite-wide, so engine tests never load Django.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.project.settings")

import django

django.setup()

import pytest  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.test import Client  # noqa: E402

from console import cluster_access  # noqa: E402
from tests.console.small_cluster import start_small_cluster  # noqa: E402

PASSWORD = "correct horse battery staple 42"


@pytest.fixture(scope="session")
def live_cluster(tmp_path_factory):
    cluster = start_small_cluster(tmp_path_factory.mktemp("console-cluster"))
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


def _user(name: str, role: str | None) -> User:
    user = User.objects.create_user(name, password=PASSWORD)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def viewer_client(db) -> Client:
    client = Client()
    client.force_login(_user("vera", "viewer"))
    return client


@pytest.fixture
def operator_client(db) -> Client:
    client = Client()
    client.force_login(_user("otto", "operator"))
    return client


@pytest.fixture
def admin_client_(db) -> Client:
    client = Client()
    client.force_login(_user("ada", "admin"))
    return client


@pytest.fixture
def csrf_operator_client(db) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(_user("carl", "operator"))
    return client
