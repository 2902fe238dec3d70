"""Fixtures of the operations-page tests: Django on a temp var dir, a real cluster, users by role."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
os.environ.setdefault("CONSOLE_VAR_DIR", tempfile.mkdtemp(prefix="console-ops-var-"))

import django

django.setup()

import pytest  # noqa: E402

from broker.local_cluster import wait_until  # noqa: E402
from tests.cluster import OPS, create_user, start  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The name server's address, once the broker has registered with it."""
    running = start(OPS, tmp_path_factory.mktemp("ops-cluster"))
    try:
        from broker.client.admin import MQAdmin

        with MQAdmin(running.namesrv_addr) as admin:
            wait_until(lambda: admin.cluster_info().brokers, what="the broker to register")
        yield running.namesrv_addr
    finally:
        running.stop()


@pytest.fixture
def namesrv(cluster, settings):
    from core import cluster_access

    settings.BROKER_NAMESRV = cluster
    yield cluster
    cluster_access.close_all()


@pytest.fixture
def admin(namesrv):
    from core import cluster_access

    return cluster_access.admin_for(namesrv)


@pytest.fixture
def viewer(db):
    return create_user("vera-viewer", "viewer", "not-used-in-tests-9x")


@pytest.fixture
def operator(db):
    return create_user("otto-operator", "operator", "not-used-in-tests-9x")


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


@pytest.fixture
def operator_client(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def eager_celery():
    from project.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False
