"""Suite-wide pytest configuration."""

import os
from pathlib import Path

import pytest

from broker.local_cluster import PORT_RANGE_VARIABLE, port_slice
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
    worker = getattr(config, "workerinput", None)
    if worker is not None:  # a parallel process: its servers' ports are its own (and its children's)
        os.environ[PORT_RANGE_VARIABLE] = port_slice(int(worker["workerid"][2:]), int(worker["workercount"]))


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
def django_db_setup(django_db_setup, django_db_blocker):
    """The test databases as the migrations left them (their data migrations' rows: default alert
    rules, role groups, ...), kept to be put back after each test that flushes them (below)."""
    from django.db import connections

    with django_db_blocker.unblock():
        for connection in connections.all(initialized_only=True):
            _MIGRATED_ROWS[connection.alias] = connection.creation.serialize_db_to_string()


_MIGRATED_ROWS: dict[str, str] = {}


def _flushes_database(item: pytest.Item) -> bool:
    """A transactional test: its database is emptied (flushed) when it ends, not rolled back."""
    marker = item.get_closest_marker("django_db")
    marked = marker is not None and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences"))
    names = set(getattr(item, "fixturenames", ()))
    return bool(marked or names & {"transactional_db", "live_server", "django_db_reset_sequences"})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After a transactional test's flush, the migrations' rows are put back: every test starts on
    the migrated database whichever test ran before it in its process. (One process orders the
    transactional tests last, as Django does; a parallel process runs whole modules in turn.)"""
    result = yield
    # With no next test the session has ended: the test databases are gone with it.
    if _MIGRATED_ROWS and nextitem is not None and _flushes_database(item):
        from django.core.management import call_command
        from django.db import connections
        from pytest_django.plugin import blocking_manager_key

        with item.config.stash[blocking_manager_key].unblock():
            for alias, rows in _MIGRATED_ROWS.items():
                # The flush re-created content types and permissions (post_migrate) under new ids:
                # emptied again without them, the tables take the migrated rows back as they were.
                call_command(
                    "flush", database=alias, interactive=False, verbosity=0, inhibit_post_migrate=True
                )
                connections[alias].creation.deserialize_db_from_string(rows)
    return result


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


# Directories whose modules each start whole stacks (console, PostgreSQL, Celery, browser) or JVMs:
# a minute or more per module. On parallel processes (make test) they are handed out first, so no
# process is left running one of them alone at the end of the run; every module stays whole and in
# its own order (the scheduler hands out whole files, Makefile: --dist loadfile).
_LONG_MODULES_FIRST = ("tests/browser/", "tests/analytics/", "tests/scaleout/", "tests/integration/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # one process: the collection's order
        return

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.replace("\\", "/")
        return next((i for i, prefix in enumerate(_LONG_MODULES_FIRST) if path.startswith(prefix)), 99)

    items.sort(key=rank)  # stable: a module's tests keep their order
