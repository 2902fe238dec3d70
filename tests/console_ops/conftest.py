"""Fixtures of the operations-page tests: Django on a temp var dir, a real cluster, users by role."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.project.settings")
os.environ.setdefault("CONSOLE_VAR_DIR", tempfile.mkdtemp(prefix="console-ops-var-"))

import django

django.setup()

import pytest  # noqa: E402

from tests.console_ops.cluster import start_broker, start_namesrv, wait_until  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    namesrv = start_namesrv()
    broker = None
    try:
        broker = start_broker(tmp_path_factory.mktemp("ops-broker"), namesrv.addr)
        from broker.client.admin import MQAdmin

        with MQAdmin(namesrv.addr) as admin:
            wait_until(lambda: admin.cluster_info().brokers, what="the broker to register")
        yield namesrv.addr
    finally:
        if broker is not None:
            broker.stop()
        namesrv.stop()


@pytest.fixture
def namesrv(cluster, settings):
    from console import cluster_access

    settings.BROKER_NAMESRV = cluster
    yield cluster
    cluster_access.close_all()


@pytest.fixture
def admin(namesrv):
    from console import cluster_access

    return cluster_access.admin_for(namesrv)


def _user(django_user_model, name: str, role: str | None):
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(name, password="not-used-in-tests-9x")
    if role:
        user.groups.add(Group.objects.get_or_create(name=role)[0])  # transactional tests flush them
    return user


@pytest.fixture
def viewer(django_user_model):
    return _user(django_user_model, "vera-viewer", "viewer")


@pytest.fixture
def operator(django_user_model):
    return _user(django_user_model, "otto-operator", "operator")


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
    from console.project.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False
