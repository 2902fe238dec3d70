"""Create the ``broker.conf`` of ``make run`` under the var dir when there is none; print its path.

Run by the Procfile before the broker starts (``-c`` that file), so settings changed in the
console's broker page are written to a real file and survive a restart. An existing file is never
touched: what an operator (or the console) wrote stays.

The defaults differ from RocketMQ's in two places, both for analytics on a fresh machine:
commit-log segments of 8 MiB (RocketMQ: 1 GiB) so one fills — is sealed — after a few minutes of
modest traffic, and ``archiveUri`` set to the directory the analytics reports read, so each
sealed segment is copied there at once.

``--slave`` writes the slave's file of ``make run-ha`` (``Procfile.ha``) instead: brokerId 1,
brokerRole SLAVE of the same brokerName, a store of its own, listenPort 10921, the master's segment
size (replicated segments are the master's bytes), and no archive (the master archives).
"""

import os
from pathlib import Path
from urllib.parse import urlparse

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from broker.common.conf_file import parse_properties

# Larger than the largest message (maxMessageSize, 4 MiB) plus the end-of-segment blank record:
# a segment must be able to hold any single message or batch.
MAKE_RUN_SEGMENT_BYTES = 8 * 1024 * 1024


def default_archive_dir() -> Path:
    """The analytics input (``ANALYTICS_ARCHIVE_URI``) when it is a local directory; the broker
    writes only to local directories, so for a remote URI it archives under the var dir."""
    uri = settings.ANALYTICS_ARCHIVE_URI
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else uri).resolve()
    return (Path(settings.VAR_DIR) / "archive").resolve()


def existing_segment_size(store_dir: Path) -> int | None:
    """The segment size of a commit log already in ``store_dir`` (a store made before this file
    existed keeps its segments: a broker refuses segments of another size)."""
    commitlog = store_dir / "commitlog"
    if not commitlog.is_dir():
        return None
    for path in sorted(commitlog.iterdir()):
        if path.is_file() and path.name.isdigit() and len(path.name) == 20:
            return path.stat().st_size
    return None


def make_run_conf(var_dir: Path, namesrv_addr: str) -> str:
    store_dir = (var_dir / "store").resolve()
    segment = existing_segment_size(store_dir) or MAKE_RUN_SEGMENT_BYTES
    return (
        "# broker.conf of `make run`, created by `python manage.py ensure_broker_conf` (never\n"
        "# overwritten: edit it freely). The console's broker page writes the keys it changes here.\n"
        "# RocketMQ's key names; see README.md (Analytics input) for the archive settings.\n"
        "brokerClusterName=DefaultCluster\n"
        "brokerName=broker-a\n"
        "brokerId=0\n"
        f"namesrvAddr={namesrv_addr}\n"
        f"storePathRootDir={store_dir}\n"
        "# Commit-log segment size in bytes. A segment is archived when it is full (sealed), so\n"
        "# this is how much traffic the analytics reports lag behind. RocketMQ's default is 1 GiB.\n"
        f"mappedFileSizeCommitLog={segment}\n"
        "# Where sealed segments are copied (a local directory): the analytics reports' input.\n"
        f"archiveUri={default_archive_dir()}\n"
    )


# make run-ha's slave: RocketMQ's usual second port on one machine (the master keeps 10911 and its
# HA port 10912).
SLAVE_LISTEN_PORT = 10921


def _master_settings(master_conf: Path) -> dict[str, str]:
    """The master's broker.conf, or nothing when it is not written yet (both are created at once
    on a first start; the master's is then make run's defaults, which the fallbacks repeat)."""
    try:
        return parse_properties(master_conf.read_text())
    except OSError:
        return {}


def make_run_slave_conf(var_dir: Path, namesrv_addr: str) -> str:
    master = _master_settings(var_dir / "broker.conf")
    store_dir = (var_dir / "store-slave").resolve()
    master_segment = master.get("mappedFileSizeCommitLog", "")
    segment = existing_segment_size(store_dir) or (
        int(master_segment)
        if master_segment.isdigit()
        else existing_segment_size((var_dir / "store").resolve()) or MAKE_RUN_SEGMENT_BYTES
    )
    return (
        "# broker.conf of `make run-ha`'s slave, created by `python manage.py ensure_broker_conf\n"
        "# --slave` (never overwritten: edit it freely). It replicates the master of broker.conf\n"
        "# (same cluster and brokerName), found through the name server. README.md: High availability.\n"
        f"brokerClusterName={master.get('brokerClusterName', 'DefaultCluster')}\n"
        f"brokerName={master.get('brokerName', 'broker-a')}\n"
        "brokerId=1\n"
        "brokerRole=SLAVE\n"
        f"listenPort={SLAVE_LISTEN_PORT}\n"
        f"namesrvAddr={namesrv_addr}\n"
        f"storePathRootDir={store_dir}\n"
        "# The master's segment size: a slave holds the master's segments byte for byte.\n"
        f"mappedFileSizeCommitLog={segment}\n"
    )


class Command(BaseCommand):
    help = "Create make run's broker.conf under the var dir if it does not exist; print its path."

    def add_arguments(self, parser):
        parser.add_argument("--path", help="where the file is (default: <var dir>/broker.conf)")
        parser.add_argument(
            "--slave",
            action="store_true",
            help="the slave's file of make run-ha (default path: <var dir>/broker-slave.conf)",
        )

    def handle(self, *args, path: str | None = None, slave: bool = False, **options):
        var_dir = Path(settings.VAR_DIR)
        conf = Path(path) if path else var_dir / ("broker-slave.conf" if slave else "broker.conf")
        make_conf = make_run_slave_conf if slave else make_run_conf
        if conf.exists():
            self.stdout.write(f"broker config: {conf} (existing, left as it is)")
            return
        try:
            conf.parent.mkdir(parents=True, exist_ok=True)
            tmp = conf.with_name(f".{conf.name}.tmp")
            tmp.write_text(make_conf(var_dir, settings.BROKER_NAMESRV))
            os.replace(tmp, conf)  # a broker never reads half a file
        except OSError as exc:
            raise CommandError(f"cannot create {conf}: {exc.strerror}") from None
        self.stdout.write(f"broker config: {conf} (created)")
