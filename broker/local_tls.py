"""Certificates for a cluster on loopback with TLS, made fresh in a directory (never committed):
what the TLS tests and ``bench/tls_overhead.py`` share. Like ``broker.local_cluster``, a helper
for running the engine locally, not a test module.

One CA signs a server certificate for 127.0.0.1 and localhost and a client certificate; a second,
unrelated CA stands for a wrong trust store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme

from broker.remoting.tls import ClientTls


@dataclass(frozen=True)
class TlsFiles:
    ca: str  # the CA that signed server and client certificates (the right trust store)
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    other_ca: str  # a CA that signed neither (the wrong trust store)
    localhost_only_cert: str  # a server certificate naming localhost but not 127.0.0.1
    localhost_only_key: str

    def client_tls(self) -> ClientTls:
        """A client's TLS settings that trust this CA (the right trust store)."""
        return ClientTls(enable=True, trust_cert_path=self.ca)

    def server_conf(self, mode: str, **extra: str) -> dict[str, str]:
        """``tls.server.*`` conf lines for ``mode``."""
        return {
            "tls.server.mode": mode,
            "tls.server.certPath": self.server_cert,
            "tls.server.keyPath": self.server_key,
            **extra,
        }


def make_tls_files(directory: Path) -> TlsFiles:
    """Fresh certificates in ``directory`` (trustme, of the dev and bench extras)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client.example")
    localhost_only = ca.issue_cert("localhost")

    def write(name: str, blob: trustme.Blob) -> str:
        path = directory / name
        blob.write_to_path(str(path))
        return str(path)

    return TlsFiles(
        ca=write("ca.pem", ca.cert_pem),
        server_cert=write("server.pem", server.cert_chain_pems[0]),
        server_key=write("server.key", server.private_key_pem),
        client_cert=write("client.pem", client.cert_chain_pems[0]),
        client_key=write("client.key", client.private_key_pem),
        other_ca=write("other-ca.pem", other.cert_pem),
        localhost_only_cert=write("localhost.pem", localhost_only.cert_chain_pems[0]),
        localhost_only_key=write("localhost.key", localhost_only.private_key_pem),
    )
