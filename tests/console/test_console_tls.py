"""The console against a real name server and broker in each ``tls.server.mode``: its cluster
page renders when its ROCKETMQ_TLS_* settings fit the mode, and says what is wrong (with advice
naming the settings) when they do not."""

from __future__ import annotations

import pytest
from django.urls import reverse

from broker.common.tls_modes import TLS_MODES
from core import cluster_access
from tests.cluster import logged_in_client
from tests.console.conftest import PASSWORD
from tests.tls_certs import BROKER, start_tls_cluster

tls_viewer = logged_in_client("tess", "viewer", PASSWORD)


@pytest.fixture(scope="module", params=TLS_MODES)
def tls_cluster(request, certs, tmp_path_factory):
    cluster = start_tls_cluster(request.param, certs, tmp_path_factory.mktemp(f"console-tls-{request.param}"))
    yield request.param, cluster
    cluster_access.close_all()
    cluster.stop()


def cluster_page(client, settings, namesrv: str, enable: bool, trust: str = ""):
    settings.BROKER_NAMESRV = namesrv
    settings.ROCKETMQ_TLS_ENABLE = enable
    settings.ROCKETMQ_TLS_TRUST_CERT = trust
    return client.get(reverse("console:cluster"))


def test_cluster_page_with_settings_that_fit_the_mode(tls_cluster, certs, settings, tls_viewer):
    mode, cluster = tls_cluster
    fitting = [False, True] if mode == "permissive" else [mode == "enforcing"]
    for enable in fitting:
        page = cluster_page(tls_viewer, settings, cluster.namesrv_addr, enable, certs.ca)
        assert page.status_code == 200
        assert BROKER in page.content.decode()


def test_cluster_page_with_settings_that_do_not_fit(tls_cluster, certs, settings, tls_viewer):
    mode, cluster = tls_cluster
    if mode == "disabled":
        page = cluster_page(tls_viewer, settings, cluster.namesrv_addr, True, certs.ca)
        reason = "closed the connection during the TLS handshake"
    elif mode == "enforcing":
        page = cluster_page(tls_viewer, settings, cluster.namesrv_addr, False)
        reason = "accepts TLS connections only"
    else:
        page = cluster_page(tls_viewer, settings, cluster.namesrv_addr, True, certs.other_ca)
        reason = "TLS certificate verification failed"
    text = page.content.decode()
    assert page.status_code == 503
    assert reason in text and "ROCKETMQ_TLS_ENABLE" in text, text
