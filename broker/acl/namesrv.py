"""The plain ACL at the name server: the same ``plain_acl.yml`` format, turned on with
``aclEnable=true`` in namesrv.conf (``aclFilePath`` names the file, required then;
``aclReloadIntervalMillis`` as the broker's).

What changes the name server's picture of the cluster needs an admin account: registering and
unregistering brokers, deleting a topic's route, the KV config's writes, wiping or adding a
broker's write permission (resources.ADMIN_CODES); every other request but the reads below must be
signed by an account of the name server's file. The route, cluster and KV reads (``OPEN_READS``)
are answered to anyone, signed or not, without a check: every client and tool finds its brokers
through them (RocketMQ 4.9's name server has no ACL, so unsigned clients read routes today, and a
client signing with an account only its brokers know must still find them), and a route tells only
topic and broker names and addresses, while each request to a broker is checked there. A global
white address passes everything, as at the broker.

``aclReplayProtection``, ``aclReplayWindowSeconds`` and ``aclRequireTls`` work as at the broker
(``replay.py``): a registration resent as UNREGISTER_BROKER, or resent at all, is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.common.codes import RequestCode as RC
from broker.common.conf_file import get_bool, get_int

from . import open_acl_file
from .acl_file import AclFile
from .plain_config import AclConfigError
from .replay import ReplayGuard, SignedRequestPolicy

OPEN_READS = frozenset(
    {
        RC.GET_ROUTEINFO_BY_TOPIC,
        RC.GET_BROKER_CLUSTER_INFO,
        RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        RC.GET_TOPICS_BY_CLUSTER,
        RC.GET_SYSTEM_TOPIC_LIST_FROM_NS,
        RC.GET_KV_CONFIG,
        RC.GET_KVLIST_BY_NAMESPACE,
    }
)


def namesrv_acl(conf: Mapping[str, str]) -> AclFile | None:
    """The name server's ACL file, loaded, when namesrv.conf turns ACL on; raises
    ``AclConfigError`` (a ConfError) when it is on without a usable file."""
    values = dict(conf)
    if not get_bool(values, "aclEnable", False):
        return None
    path = values.get("aclFilePath")
    if not path:
        raise AclConfigError("aclEnable=true needs aclFilePath (the plain_acl.yml to use)")
    interval = get_int(values, "aclReloadIntervalMillis", 1000)
    if not 100 <= interval <= 3_600_000:
        raise AclConfigError(f"aclReloadIntervalMillis={interval} must be 100 to 3600000")
    return open_acl_file(path, interval)


def namesrv_replay_guard(conf: Mapping[str, str]) -> ReplayGuard:
    """The replay and TLS checks of signed requests that namesrv.conf (or controller.conf) asks
    for; raises ``AclConfigError`` for settings out of bounds or without ACL."""
    return ReplayGuard(SignedRequestPolicy.from_conf(conf))
