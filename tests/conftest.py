"""Suite-wide pytest configuration."""

import os
from pathlib import Path

import pytest

from broker.local_tls import TlsFiles, make_tls_files
from broker.process_ties import MARKER, Keeper, reap_leftovers, run_marker

CHECKOUT = Path(__file__).resolve().parents[1]
_KEEPER = pytest.StashKey[Keeper]()


def pytest_configure(config: pytest.Config) -> None:
    # Every process this run starts dies with it, however it dies: what an earlier killed run of
    # this checkout left is killed now, and each child inherits this run's marker, which a keeper
    # process kills once this pytest is gone (its SIGKILL included). Other checkouts are not ours.
    reap_leftovers(CHECKOUT)
    os.environ[MARKER] = run_marker(CHECKOUT)
    config.stash[_KEEPER] = Keeper(os.environ[MARKER])


def pytest_unconfigure(config: pytest.Config) -> None:
    keeper = config.stash.get(_KEEPER, None)
    if keeper is not None:
        keeper.close()  # a clean end: what a test left running goes too


def pytest_collection_finish(session: pytest.Session) -> None:
    # A run that selects nothing must fail loudly: an empty run would otherwise look green in CI
    # whenever a marker or path filter silently excludes every test.
    if not session.items and not session.config.option.collectonly:
        raise pytest.UsageError("no tests were collected")


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """One set of TLS certificates for the run (read-only files): every TLS test's trust store,
    server and client certificates."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def signed_tls_cluster(tmp_path_factory: pytest.TempPathFactory, certs: TlsFiles):
    """The ACL cluster with every check of signed requests on, on permissive TLS ports
    (tests.acl.acl_cluster.start_signed_tls_cluster): the SDK's and the console's tests of it
    share one."""
    from tests.acl.acl_cluster import start_signed_tls_cluster

    running = start_signed_tls_cluster(tmp_path_factory.mktemp("signed-tls"), certs)
    yield running
    running.stop()
