"""A cluster in one ``tls.server.mode``, with the certificates of ``broker.local_tls``."""

from __future__ import annotations

from pathlib import Path

from broker.local_cluster import SMALL_STORE
from broker.local_tls import TlsFiles
from broker.remoting.tls import ClientTls
from tests.cluster import Cluster

BROKER = "broker-tls"  # the broker of a TLS test cluster
TOPIC = "TlsTopic"  # its topic, two queues


def start_tls_cluster(mode: str, certs: TlsFiles, workdir: Path) -> Cluster:
    """A name server and a broker, both in ``mode``; the broker's own connections to the name
    server use TLS whenever its name server takes it."""
    server = certs.server_conf(mode) if mode != "disabled" else {"tls.server.mode": "disabled"}
    broker_client = {"tls.client.trustCertPath": certs.ca, "tls.enable": str(mode != "disabled").lower()}
    client_tls = ClientTls(enable=mode != "disabled", trust_cert_path=certs.ca)
    cluster = Cluster(workdir, f"Tls{mode.title()}Cluster", namesrv_settings=server, client_tls=client_tls)
    try:
        cluster.add_broker(
            BROKER,
            {
                **SMALL_STORE,
                **server,
                **broker_client,
                "registerBrokerIntervalMillis": 500,
                "traceTopicEnable": "true",
            },
        )
        cluster.create_topic(TOPIC, 2)
    except BaseException:
        cluster.stop()
        raise
    return cluster
