"""Metric history tests: Django settings here (engine tests never load Django), a fake clock."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()


import pytest  # noqa: E402

CLUSTER = "127.0.0.1:9876"


from tests.history_clock import FakeClock, fake_clock  # noqa: E402, F401  (a fixture)


@pytest.fixture
def one_cluster(settings):
    settings.BROKER_NAMESRV = CLUSTER
    return CLUSTER
