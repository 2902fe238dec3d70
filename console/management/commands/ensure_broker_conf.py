"""Create the ``broker.conf`` of ``make run`` under the var dir when there is none; print its path.

Run by the Procfile before the broker starts (``-c`` that file), so settings changed in the
console's broker page are written to a real file and survive a restart. An existing file is never
touched: what an operator (or the console) wrote stays.

The defaults differ from RocketMQ's in two places, both for analytics on a fresh machine:
commit-log segments of 8 MiB (RocketMQ: 1 GiB) so one fills — is sealed — after a few minutes of
modest traffic, and ``archiveUri`` set to the directory the analytics reports read, so each
sealed segment is copied there at once.

``--replica 1`` and ``--replica 2`` write the two brokers of ``make run-ha`` (``Procfile.ha``)
instead: one broker set in RocketMQ 5's controller mode, configured alike (the controller decides
which is master), each with its own port and store; ``--controller`` writes the controller's
``controller.conf`` they report to. ``make run``'s broker.conf and store are not used by
``make run-ha``: the two stacks keep their data apart.
"""

import os
import secrets
import tempfile
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


# make run-ha: RocketMQ's usual ports on one machine (each broker's HA port is its port + 1) and
# the controller's (9878; its Raft port 9877), as RocketMQ's controller quick start.
REPLICA_LISTEN_PORTS = {1: 10911, 2: 10921}
CONTROLLER_LISTEN_PORT = 9878
CONTROLLER_RAFT_PORT = 9877


def _settings_of(conf: Path) -> dict[str, str]:
    """A conf file's settings, or nothing when it is not written yet (make run-ha's lines start
    at once, so the controller's file may come after a broker's)."""
    try:
        return parse_properties(conf.read_text())
    except OSError:
        return {}


def controller_conf(var_dir: Path) -> str:
    return (
        "# controller.conf of `make run-ha`, created by `python manage.py ensure_broker_conf\n"
        "# --controller` (never overwritten: edit it freely). One controller (RocketMQ 5's controller\n"
        "# mode); README.md: High availability.\n"
        f"listenPort={CONTROLLER_LISTEN_PORT}\n"
        "controllerDLegerGroup=group1\n"
        f"controllerDLegerPeers=n0-127.0.0.1:{CONTROLLER_RAFT_PORT}\n"
        "controllerDLegerSelfId=n0\n"
        f"controllerStorePath={(var_dir / 'controller').resolve()}\n"
        "# How often the controller looks for brokers that stopped heartbeating (RocketMQ: 5000).\n"
        "scanNotActiveBrokerInterval=1000\n"
    )


def controller_addr(var_dir: Path) -> str:
    """Where make run-ha's controller listens: its controller.conf's port when it is written."""
    port = _settings_of(var_dir / "controller.conf").get("listenPort", "")
    return f"127.0.0.1:{port if port.isdigit() else CONTROLLER_LISTEN_PORT}"


HA_SECRET_FILE = "ha-auth-secret"


def shared_ha_secret(var_dir: Path) -> str:
    """The ``haAuthSecret`` both of make run-ha's brokers sign in to each other's HA port with:
    made once (random, readable by its owner only) in the var dir and read by both, which
    Procfile.ha starts at the same moment — so it is created by a link, which only one can make."""
    path = var_dir / HA_SECRET_FILE
    if not path.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=var_dir, prefix=".ha-secret-")
        try:
            with os.fdopen(fd, "w") as file:
                file.write(secrets.token_urlsafe(32) + "\n")
            try:
                os.link(temp, path)  # fails if the other broker's command made it first: use that
            except FileExistsError:
                pass
        finally:
            os.unlink(temp)
    return path.read_text().strip()


def replica_conf(var_dir: Path, namesrv_addr: str, replica: int) -> str:
    store_dir = (var_dir / f"store-ha-{replica}").resolve()
    segment = existing_segment_size(store_dir) or MAKE_RUN_SEGMENT_BYTES
    # One broker archives sealed segments for the analytics reports, whichever role it has (a
    # slave's segments are its master's bytes); two would copy each segment twice.
    archive = f"archiveUri={default_archive_dir()}\n" if replica == 1 else ""
    return (
        f"# broker.conf of `make run-ha`'s broker {replica}, created by `python manage.py\n"
        f"# ensure_broker_conf --replica {replica}` (never overwritten: edit it freely). The two brokers\n"
        "# of broker-a are alike: the controller decides which is master, and elects the other when\n"
        "# the master stops. README.md: High availability.\n"
        "brokerClusterName=DefaultCluster\n"
        "brokerName=broker-a\n"
        "enableControllerMode=true\n"
        f"controllerAddr={controller_addr(var_dir)}\n"
        "# A master answers a send once every broker of the in-sync set has it.\n"
        "brokerRole=SYNC_MASTER\n"
        "allAckInSyncStateSet=true\n"
        "# The controller calls a broker dead after this long without a heartbeat (RocketMQ: 10000);\n"
        "# shorter here so a failover is seen in seconds.\n"
        "controllerHeartBeatTimeoutMills=3000\n"
        f"# Slaves sign in to the master's HA port with this (the same in both files; {HA_SECRET_FILE}).\n"
        f"haAuthSecret={shared_ha_secret(var_dir)}\n"
        f"listenPort={REPLICA_LISTEN_PORTS[replica]}\n"
        f"namesrvAddr={namesrv_addr}\n"
        f"storePathRootDir={store_dir}\n"
        f"mappedFileSizeCommitLog={segment}\n"
        f"{archive}"
    )


class Command(BaseCommand):
    help = "Create make run's broker.conf under the var dir if it does not exist; print its path."

    def add_arguments(self, parser):
        parser.add_argument("--path", help="where the file is (default: under the var dir)")
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--replica",
            type=int,
            choices=sorted(REPLICA_LISTEN_PORTS),
            help="a broker of make run-ha instead (default path: <var dir>/broker-ha-<N>.conf)",
        )
        which.add_argument(
            "--controller",
            action="store_true",
            help="make run-ha's controller.conf instead (default path: <var dir>/controller.conf)",
        )

    def handle(self, *args, path=None, replica: int | None = None, controller: bool = False, **options):
        var_dir = Path(settings.VAR_DIR)
        if controller:
            kind, name, make_text = "controller", "controller.conf", lambda: controller_conf(var_dir)
        elif replica is not None:
            kind, name = "broker", f"broker-ha-{replica}.conf"

            def make_text() -> str:
                return replica_conf(var_dir, settings.BROKER_NAMESRV, replica)
        else:
            kind, name = "broker", "broker.conf"

            def make_text() -> str:
                return make_run_conf(var_dir, settings.BROKER_NAMESRV)

        conf = Path(path) if path else var_dir / name
        if conf.exists():
            self.stdout.write(f"{kind} config: {conf} (existing, left as it is)")
            return
        try:
            conf.parent.mkdir(parents=True, exist_ok=True)
            # A name of this process's: make run-ha's lines may create files at the same moment.
            tmp = conf.with_name(f".{conf.name}.{os.getpid()}.tmp")
            tmp.write_text(make_text())
            os.replace(tmp, conf)  # a process never reads half a file
        except OSError as exc:
            raise CommandError(f"cannot create {conf}: {exc.strerror}") from None
        self.stdout.write(f"{kind} config: {conf} (created)")
