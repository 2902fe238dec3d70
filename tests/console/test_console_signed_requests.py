"""The console's admin client against servers that check signed requests fully (issue 31, section
4): ACL, ``aclReplayProtection=true`` and ``aclRequireTls=true`` on permissive TLS ports. Signing
with ROCKETMQ_ACCESS_KEY over ROCKETMQ_TLS_*, its reads and an admin write work; without TLS its
signed requests are refused with the reason."""

from __future__ import annotations

import pytest

from broker.client.admin import MQClientError
from core import cluster_access
from tests.acl.acl_cluster import ADMIN, TOPIC


@pytest.fixture(scope="module")
def signed_cluster(signed_tls_cluster):
    yield signed_tls_cluster
    cluster_access.close_all()


def test_the_consoles_admin_client_works_with_every_check_on(signed_cluster, certs, settings):
    settings.ROCKETMQ_ACCESS_KEY, settings.ROCKETMQ_SECRET_KEY = ADMIN.access_key, ADMIN.secret_key
    settings.ROCKETMQ_TLS_ENABLE, settings.ROCKETMQ_TLS_TRUST_CERT = True, certs.ca
    admin = cluster_access.admin_for(signed_cluster.namesrv_addr)
    assert [b.broker_name for b in admin.cluster_list()] == ["broker-acl"]
    assert TOPIC in admin.all_topic_configs(signed_cluster.broker_addr)
    admin.create_or_update_topic(signed_cluster.broker_addr, "ConsoleSignedTopic", 1, 1)
    assert "ConsoleSignedTopic" in admin.all_topic_configs(signed_cluster.broker_addr)


def test_without_tls_the_consoles_signed_requests_are_refused(signed_cluster, settings):
    settings.ROCKETMQ_ACCESS_KEY, settings.ROCKETMQ_SECRET_KEY = ADMIN.access_key, ADMIN.secret_key
    settings.ROCKETMQ_TLS_ENABLE = False
    admin = cluster_access.admin_for(signed_cluster.namesrv_addr)
    with pytest.raises(MQClientError, match="aclRequireTls=true"):
        admin.all_topic_configs(signed_cluster.broker_addr)
