"""controller.conf: RocketMQ 5's ControllerConfig key names where they exist."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path

from broker.common.conf_file import ConfError, get_bool, get_int, get_list
from broker.common.tls_modes import TlsMode
from broker.remoting.tls import PLAINTEXT, ClientTls

from .raft import Peer

DEFAULT_LISTEN_PORT = 9878  # RocketMQ's controller port
DEFAULT_RAFT_ADDRESS = "127.0.0.1:9877"
_PEER = re.compile(r"^([A-Za-z0-9_]{1,32})-([^\s;:]+):(\d{1,5})$")


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    listen_host: str
    listen_port: int
    group: str  # controllerDLegerGroup
    self_id: str  # controllerDLegerSelfId
    peers: list[Peer]
    store_path: Path | None  # controllerStorePath; empty: nothing kept on disk
    scan_interval_ms: int  # scanNotActiveBrokerInterval
    elect_unclean: bool  # enableElectUncleanMaster
    write_timeout_ms: int  # controllerWriteTimeoutMillis (ours): how long a write waits for a commit
    raft_password: str  # controllerRaftPassword (ours): pysyncobj's encryption of the Raft port
    raft_password_set: bool = True  # False: a single controller's own random one
    notify_role_changed: bool = True  # notifyBrokerRoleChanged
    process_read_event: bool = False  # isProcessReadEvent: replica reads go through the Raft log
    # The controller's own account and TLS for what it sends brokers (NOTIFY_BROKER_ROLE_CHANGED),
    # as a broker's innerAccessKey/innerSecretKey and tls.enable/tls.client.*: a broker with ACL
    # on drops an unsigned notification.
    inner_access_key: str = ""
    inner_secret_key: str = field(default="", repr=False)
    client_tls: ClientTls = PLAINTEXT


def _raft_password(conf: dict[str, str], peers: list[Peer]) -> str:
    """pysyncobj unpickles what its Raft port receives unless the port is encrypted with a
    password: without one, anyone reaching the port (loopback included: any local user, any
    process a browser or a proxy can make connect) runs code as the controller's user. A group
    needs the password every peer shares; a single controller talks to no peer, so it gets a
    random one of its own and its port takes nothing from anyone."""
    password = conf.get("controllerRaftPassword") or None
    if password is not None:
        return password
    if len(peers) > 1:
        raise ConfError(
            f"controllerDLegerPeers names {len(peers)} controllers: set controllerRaftPassword, the "
            "same on each (their Raft port runs code sent by anyone who can reach it otherwise)"
        )
    return secrets.token_urlsafe(32)


def _parse_peers(key: str, raw: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in raw:
        match = _PEER.match(item)
        if match is None or not 0 < int(match.group(3)) < 65536:
            raise ConfError(f"{key}: {item!r} is not id-host:port (e.g. n0-127.0.0.1:9877)")
        out[match.group(1)] = f"{match.group(2)}:{match.group(3)}"
    return out


def controller_config(conf: dict[str, str]) -> ControllerConfig:
    host = conf.get("listenHost") or "127.0.0.1"
    port = get_int(conf, "listenPort", DEFAULT_LISTEN_PORT)
    raft = _parse_peers("controllerDLegerPeers", get_list(conf, "controllerDLegerPeers")) or {
        "n0": DEFAULT_RAFT_ADDRESS
    }
    self_id = conf.get("controllerDLegerSelfId") or next(iter(raft))
    listen = _parse_peers("controllerPeerListenAddrs", get_list(conf, "controllerPeerListenAddrs"))
    listen.setdefault(self_id, f"{host}:{port}")
    if self_id not in raft:
        raise ConfError(
            f"controllerDLegerSelfId={self_id!r} is not one of controllerDLegerPeers {sorted(raft)}"
        )
    if len(raft) not in (1, 3, 5):
        raise ConfError(f"controllerDLegerPeers names {len(raft)} controllers: use 1, 3 or 5")
    missing = sorted(set(raft) - set(listen))
    if missing:
        raise ConfError(f"controllerPeerListenAddrs lacks {missing}: each peer's remoting address is needed")
    peers = [Peer(pid, raft[pid], listen[pid]) for pid in raft]
    password = _raft_password(conf, peers)
    scan = get_int(conf, "scanNotActiveBrokerInterval", 5000)
    write_timeout = get_int(conf, "controllerWriteTimeoutMillis", 3000)
    if scan <= 0 or write_timeout <= 0:
        raise ConfError("scanNotActiveBrokerInterval and controllerWriteTimeoutMillis must be positive")
    store = conf.get("controllerStorePath", str(Path.home() / "DLedgerController"))
    access_key, secret_key = conf.get("innerAccessKey") or "", conf.get("innerSecretKey") or ""
    if bool(access_key) != bool(secret_key):
        raise ConfError("innerAccessKey and innerSecretKey must be set together")
    return ControllerConfig(
        listen_host=host,
        listen_port=port,
        group=conf.get("controllerDLegerGroup") or "group1",
        self_id=self_id,
        peers=peers,
        store_path=Path(store) if store else None,
        scan_interval_ms=scan,
        elect_unclean=get_bool(conf, "enableElectUncleanMaster", False),
        write_timeout_ms=write_timeout,
        raft_password=password,
        raft_password_set=bool(conf.get("controllerRaftPassword")),
        notify_role_changed=get_bool(conf, "notifyBrokerRoleChanged", True),
        process_read_event=get_bool(conf, "isProcessReadEvent", False),
        inner_access_key=access_key,
        inner_secret_key=secret_key,
        # Unset tls.enable: TLS when this process's own port is TLS-only, as the broker's default.
        client_tls=ClientTls.from_properties(
            conf, default_enable=conf.get("tls.server.mode") == TlsMode.ENFORCING.value
        ),
    )


# ---- GET/UPDATE_CONTROLLER_CONFIG (mqadmin getControllerConfig / updateControllerConfig) ----

MASKED = "******"  # controllerRaftPassword is never shown, only whether it is set

# Keys a running controller takes at once (the next scan, election or request reads them); the
# others shape its sockets, Raft group or store and need a restart with them in the file.
LIVE_KEYS = (
    "scanNotActiveBrokerInterval",
    "enableElectUncleanMaster",
    "controllerWriteTimeoutMillis",
    "notifyBrokerRoleChanged",
    "isProcessReadEvent",
)


class FixedKeyError(ConfError):
    """A key that exists but cannot be changed while the controller runs."""


def config_properties(config: ControllerConfig) -> dict[str, str]:
    """The controller's settings under RocketMQ's key names, as GET_CONTROLLER_CONFIG answers."""

    def peers(address_of) -> str:
        return ";".join(f"{p.peer_id}-{address_of(p)}" for p in config.peers)

    return {
        "listenHost": config.listen_host,
        "listenPort": str(config.listen_port),
        "controllerDLegerGroup": config.group,
        "controllerDLegerSelfId": config.self_id,
        "controllerDLegerPeers": peers(lambda p: p.raft_address),
        "controllerPeerListenAddrs": peers(lambda p: p.listen_address),
        "controllerStorePath": str(config.store_path or ""),
        "scanNotActiveBrokerInterval": str(config.scan_interval_ms),
        "enableElectUncleanMaster": str(config.elect_unclean).lower(),
        "controllerWriteTimeoutMillis": str(config.write_timeout_ms),
        "notifyBrokerRoleChanged": str(config.notify_role_changed).lower(),
        "isProcessReadEvent": str(config.process_read_event).lower(),
        "controllerRaftPassword": MASKED if config.raft_password_set else "",
        "innerAccessKey": config.inner_access_key,
        "innerSecretKey": MASKED if config.inner_secret_key else "",
    }


def updated_config(config: ControllerConfig, updates: dict[str, str]) -> ControllerConfig:
    """``config`` with ``updates`` applied (UPDATE_CONTROLLER_CONFIG); nothing is applied when
    any key is unknown (ConfError), fixed while running (FixedKeyError) or has a bad value."""
    known = config_properties(config)
    for key in updates:
        if key not in known:
            raise ConfError(f"{key[:64]!r} is not a controller setting")
        if key not in LIVE_KEYS:
            raise FixedKeyError(
                f"{key} cannot be changed while the controller runs: set it in its file and restart"
            )
    scan = get_int(updates, "scanNotActiveBrokerInterval", config.scan_interval_ms)
    write_timeout = get_int(updates, "controllerWriteTimeoutMillis", config.write_timeout_ms)
    if not 0 < scan <= 3_600_000 or not 0 < write_timeout <= 600_000:
        raise ConfError(
            "scanNotActiveBrokerInterval (at most 3600000) and controllerWriteTimeoutMillis "
            "(at most 600000) must be positive"
        )
    return replace(
        config,
        scan_interval_ms=scan,
        write_timeout_ms=write_timeout,
        elect_unclean=get_bool(updates, "enableElectUncleanMaster", config.elect_unclean),
        notify_role_changed=get_bool(updates, "notifyBrokerRoleChanged", config.notify_role_changed),
        process_read_event=get_bool(updates, "isProcessReadEvent", config.process_read_event),
    )
