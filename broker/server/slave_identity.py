"""The start-up check of a slave's identity: is the master it is about to copy its own?

A slave with static roles (``brokerRole=SLAVE``, no controller mode) names its master by
``brokerName`` (the name server then hands it that set's master) or directly by
``haMasterAddress``. A typo in either made it copy a foreign broker set's commit log, or wait
for a master that never comes, with one error line in its log. Before the broker serves, this
asks the name servers which masters exist (GET_BROKER_CLUSTER_INFO) and the masters that matter
their own settings (GET_BROKER_CONFIG: cluster, haListenPort, brokerIP2), and refuses to start
when:

- ``haMasterAddress`` is the HA address of the master of another broker set (brokerName or
  cluster);
- the name servers list a master under this brokerName whose HA address is not
  ``haMasterAddress``;
- the master of this brokerName says it belongs to another cluster.

Anything less certain is a warning and the slave starts, as RocketMQ's does: no master known
under this brokerName yet (it may start later: the name of a master that does exist close to
this one's is shown, in case of a typo), a name server or master that does not answer, refuses
(ACL) or answers nonsense, a host that does not resolve. The check never costs more than
``CHECK_DEADLINE_S``, and availability never depends on it.

Two addresses name the same HA port when their ports are equal and their hosts share an IP
address, or both hosts are this machine's (a master listening on every interface is reached
through any of them).
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import ipaddress
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from broker.common import fastjson
from broker.common.conf_file import ConfError, parse_properties
from broker.common.errors import MQBrokerError, MQError
from broker.common.hosts import parse_host
from broker.common.names import shown

from .config import BrokerConfig
from .outer_api import BodyError, BrokerOuterAPI

log = logging.getLogger(__name__)

# Each round of requests (name servers, then masters) and of name resolution has its own limit;
# on loopback all answer within milliseconds. The whole check is cut at CHECK_DEADLINE_S.
REQUEST_ROUND_S = 2.0
RESOLVE_ROUND_S = 1.0
CHECK_DEADLINE_S = 2 * REQUEST_ROUND_S + 2 * RESOLVE_ROUND_S
REQUEST_TIMEOUT_MS = int(REQUEST_ROUND_S * 1000)
# What is read of an answer: a cluster-info body lists every broker set in about 150 bytes (512 KiB:
# thousands of sets), a config body a few hundred keys. Larger is not a real answer; the cap also
# bounds the parsing of a hostile body that only fastjson's slow path reads (about 1.5 s a MiB).
MAX_CLUSTER_INFO_BYTES = 512 << 10
MAX_CONFIG_BYTES = 256 << 10
MAX_BROKER_SETS = 10_000
MAX_MASTERS_ASKED = 32  # masters whose settings are read (this set's and those sharing the host)
MAX_NAMES_SHOWN = 8
MAX_NAMES_RESOLVED = 4  # host names (not IPs) looked up
_PLAIN_NAME = re.compile(r"[%|a-zA-Z0-9_.-]{1,64}")
_PLAIN_ADDR = re.compile(r"[\[\]a-zA-Z0-9_.:%-]{3,300}")


class CheckSkipped(Exception):
    """Nothing could be learned from one peer; the message says why (a warning)."""


@dataclass(frozen=True)
class MasterRecord:
    """A master as the name servers list it and, when it answered, as it describes itself."""

    broker_name: str
    addr: str  # remoting address
    cluster: str
    ha_addr: str | None = None  # None: not known (not asked, or its settings could not be read)
    asked: bool = False  # its settings were asked for (it may be this slave's master)


@dataclass(frozen=True)
class Verdict:
    refusal: str | None  # the one line saying which key to fix; None: the slave may start
    warnings: tuple[str, ...] = ()


# -- the decision -------------------------------------------------------------------------------
SameAddress = Callable[[str, str], "bool | None"]  # None: cannot tell (a host did not resolve)


def judge(config: BrokerConfig, masters: Iterable[MasterRecord], same: SameAddress) -> Verdict:
    """Whether a slave of ``config`` may start beside ``masters`` (what the name servers and the
    masters said); ``same`` compares two host:port addresses."""
    name, cluster = config.broker_name, config.broker_cluster_name
    configured = config.store.ha_master_address
    masters = list(masters)
    own = [m for m in masters if m.broker_name == name]
    warnings: list[str] = []
    unread = [m for m in masters if m.asked and m.ha_addr is None]
    if unread:
        warnings.append(
            "could not read the settings of the master(s) at "
            + ", ".join(_display_addr(m.addr) for m in unread[:MAX_NAMES_SHOWN])
            + ": their HA addresses are not checked against this slave's"
        )

    if configured:
        for master in masters:
            if master.ha_addr is None or (master.broker_name, master.cluster) == (name, cluster):
                continue
            if same(configured, master.ha_addr):
                return Verdict(_foreign_master(configured, master, name, cluster), tuple(warnings))
        # Several entries under one name (name servers that disagree, one of them stale): the
        # address must be one of them.
        compared = [(master, same(configured, master.ha_addr)) for master in own if master.ha_addr]
        if compared and all(verdict is False for _, verdict in compared):
            master = compared[0][0]
            return Verdict(
                f"haMasterAddress {configured} is not the HA address of {_display(name)}'s master: "
                f"the name servers list that master at {_display_addr(master.addr)}, HA address "
                f"{_display_addr(master.ha_addr or '')}: fix haMasterAddress (or leave it empty to "
                f"follow the name servers)",
                tuple(warnings),
            )
        if compared and not any(verdict for _, verdict in compared):
            warnings.append(
                f"cannot tell whether haMasterAddress {configured} is the HA address of "
                f"{_display(name)}'s master ({_display_addr(compared[0][0].ha_addr or '')}): a host "
                f"did not resolve"
            )
    for master in own:
        if master.ha_addr is not None and master.cluster != cluster:
            return Verdict(
                f"{_display(name)}'s master at {_display_addr(master.addr)} is in cluster "
                f"{_display(master.cluster)}; this slave's brokerClusterName is {_display(cluster)}: "
                f"fix brokerClusterName (or brokerName)",
                tuple(warnings),
            )
    if not own:
        warnings.append(_no_master_yet(name, cluster, masters, configured))
    return Verdict(None, tuple(warnings))


def _foreign_master(configured: str, master: MasterRecord, name: str, cluster: str) -> str:
    where = f"{_display(master.broker_name)}'s master (cluster {_display(master.cluster)})"
    if master.broker_name != name:
        return (
            f"haMasterAddress {configured} is the HA port of {where}; this slave's brokerName is "
            f"{_display(name)}: fix brokerName or haMasterAddress"
        )
    return (
        f"haMasterAddress {configured} is the HA port of {where}; this slave's brokerClusterName is "
        f"{_display(cluster)}: fix brokerClusterName or haMasterAddress"
    )


def _no_master_yet(name: str, cluster: str, masters: list[MasterRecord], configured: str) -> str:
    """Not a refusal: the master may simply start later (RocketMQ's slave waits for it). A name
    close to this one among the masters that do exist may be a typo; the operator decides."""
    others = sorted({m.broker_name for m in masters})
    text = f"the name servers know no master under brokerName {_display(name)} yet"
    if configured:
        text += f"; replicating from haMasterAddress {configured} once it answers"
    else:
        text += "; replicating once it registers"
    close = difflib.get_close_matches(name, others, n=1, cutoff=0.75)
    if close:
        text += f". Did you mean brokerName {_display(close[0])}? (a master of that name is up)"
    elif others:
        shown_names = ", ".join(_display(n) for n in others[:MAX_NAMES_SHOWN])
        more = f" and {len(others) - MAX_NAMES_SHOWN} more" if len(others) > MAX_NAMES_SHOWN else ""
        text += f" (masters known: {shown_names}{more}; this slave's cluster: {_display(cluster)})"
    return text


def _display(name: str) -> str:
    """A name from the wire as a log or error line may show it."""
    return name if _PLAIN_NAME.fullmatch(name) else shown(name)


def _display_addr(addr: str) -> str:
    return addr if _PLAIN_ADDR.fullmatch(addr) else shown(addr)


# -- addresses ----------------------------------------------------------------------------------
class AddressBook:
    """Host names resolved once, and which IPs are this machine's, so that ``same`` compares two
    addresses without further waiting. Few names are resolved (brokers register IPs; a hostile
    list of names must not keep a start waiting), on threads of its own: a lookup still running
    when the check ends is abandoned, not waited for (asyncio.run waits for its default executor)."""

    def __init__(self) -> None:
        self.ips: dict[str, frozenset[str]] = {}
        self._pool = ThreadPoolExecutor(max_workers=MAX_NAMES_RESOLVED, thread_name_prefix="slave-check-dns")
        self._lookups = 0

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def resolve(self, addrs: Iterable[str]) -> None:
        hosts = {host for host in (_host_of(a) for a in addrs) if host is not None and host not in self.ips}
        loop = asyncio.get_running_loop()

        async def one(host: str) -> None:
            literal = _ip_literal(host)
            if literal is not None:
                self.ips[host] = frozenset({literal})
                return
            if self._lookups >= MAX_NAMES_RESOLVED:
                return  # unknown: compares as "cannot tell"
            self._lookups += 1
            try:
                infos = await loop.run_in_executor(
                    self._pool, functools.partial(socket.getaddrinfo, host, None, type=socket.SOCK_STREAM)
                )
            except (OSError, UnicodeError):
                self.ips[host] = frozenset()
                return
            self.ips[host] = frozenset(
                literal for info in infos if (literal := _ip_literal(str(info[4][0]))) is not None
            )

        await asyncio.gather(*(one(host) for host in hosts))

    def same(self, a: str, b: str) -> bool | None:
        try:
            host_a, port_a = parse_host(a)
            host_b, port_b = parse_host(b)
        except ValueError:
            return None
        if port_a != port_b:
            return False
        ips_a, ips_b = self.ips.get(host_a), self.ips.get(host_b)
        if ips_a is None:
            ips_a = frozenset({lit}) if (lit := _ip_literal(host_a)) else None
        if ips_b is None:
            ips_b = frozenset({lit}) if (lit := _ip_literal(host_b)) else None
        if not ips_a or not ips_b:
            return None
        if ips_a & ips_b:
            return True
        # One port on this machine has one listener, whichever of its addresses names it.
        return all(map(_is_local, ips_a)) and all(map(_is_local, ips_b))

    def may_share_host(self, configured: str, master_addr: str) -> bool:
        """Whether a master registered at ``master_addr`` may listen for replication at the host
        of ``configured`` (its HA port is compared once its settings are read)."""
        host = _host_of(master_addr)
        try:
            port = parse_host(configured)[1]
        except ValueError:
            return False
        if host is None:
            return False
        return self.same(configured, f"[{host}]:{port}") is not False


def _host_of(addr: str) -> str | None:
    try:
        return parse_host(addr)[0]
    except ValueError:
        return None


def _ip_literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.split("%", 1)[0]))
    except ValueError:
        return None


@functools.lru_cache(maxsize=256)
def _is_local(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    if address.is_loopback:
        return True
    if address.is_unspecified or address.is_multicast:
        return False
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((ip, 0))  # only one of this machine's own addresses can be bound
    except OSError:
        return False
    return True


# -- asking the name servers and the masters ------------------------------------------------------
async def _within(seconds: float, coros: list) -> list:
    """Each coroutine's result or exception, those not done after ``seconds`` cancelled and
    reported as ``CheckSkipped``: one peer that never answers costs the round, not the check."""
    if not coros:
        return []
    tasks = [asyncio.ensure_future(c) for c in coros]
    _, pending = await asyncio.wait(tasks, timeout=seconds)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
    return [
        CheckSkipped(f"no answer within {seconds:g} s")
        if task in pending
        else task.exception() or task.result()
        for task in tasks
    ]


async def _ask(request: Awaitable[bytes]) -> bytes:
    """A body asked through the outer API; whatever went wrong is a ``CheckSkipped`` saying why."""
    try:
        return await request
    except MQBrokerError as exc:
        raise CheckSkipped(f"refused ({exc.code}: {shown(exc.remark or '')})") from None
    except BodyError as exc:  # too large: the message names the server and the bound
        raise CheckSkipped(str(exc)) from None
    except (MQError, OSError, TimeoutError) as exc:
        raise CheckSkipped(f"no answer ({exc})") from None


def _masters_listed(body: bytes) -> list[tuple[str, str, str]]:
    """(brokerName, master address, cluster) of every broker set with a master, from a
    GET_BROKER_CLUSTER_INFO body; entries not of the expected shape are left out."""
    try:
        raw = fastjson.loads(body)
    except (ValueError, RecursionError):
        raise CheckSkipped("the cluster info is not JSON") from None
    table = raw.get("brokerAddrTable") if isinstance(raw, dict) else None
    if not isinstance(table, dict):
        raise CheckSkipped("the cluster info has no brokerAddrTable")
    listed = []
    for name, data in list(table.items())[:MAX_BROKER_SETS]:
        if not isinstance(name, str) or not isinstance(data, dict):
            continue
        addrs, cluster = data.get("brokerAddrs"), data.get("cluster")
        if not isinstance(addrs, dict) or not isinstance(cluster, str):
            continue
        master = addrs.get("0", addrs.get(0))
        if isinstance(master, str) and len(master) <= 300 and _host_of(master) is not None:
            listed.append((name, master, cluster))
    return listed


def _ha_address(master_addr: str, settings: dict[str, str]) -> str:
    """Where a master's slaves connect, from its own settings: brokerIP2 (else the host it
    registered) and haListenPort (0: listenPort + 1, i.e. the port it registered + 1)."""
    host, port = parse_host(master_addr)
    ha_host = settings.get("brokerIP2") or host
    try:
        ha_port = int(settings.get("haListenPort") or "0")
    except ValueError:
        raise CheckSkipped("its haListenPort is not a number") from None
    if ha_port <= 0:
        ha_port = port + 1
    address = f"[{ha_host}]:{ha_port}" if ":" in ha_host else f"{ha_host}:{ha_port}"
    if not 0 < ha_port <= 65535 or not _PLAIN_ADDR.fullmatch(address):
        raise CheckSkipped("its HA address makes no sense")
    return address


async def _describe(outer: BrokerOuterAPI, name: str, addr: str, listed_cluster: str) -> MasterRecord:
    """A master as it describes itself (GET_BROKER_CONFIG): its cluster and HA address."""
    try:
        body = await _ask(outer.get_broker_config(addr, MAX_CONFIG_BYTES, REQUEST_TIMEOUT_MS))
        settings = parse_properties(body.decode("utf-8", errors="replace"))
        ha_addr = _ha_address(addr, settings)
    except CheckSkipped as exc:
        log.warning("slave identity check: master %s of %s: %s", _display_addr(addr), _display(name), exc)
        return MasterRecord(name, addr, listed_cluster, asked=True)
    # The master's own word on its cluster wins over the name server's last registration.
    cluster = settings.get("brokerClusterName") or listed_cluster
    return MasterRecord(name, addr, cluster, ha_addr, asked=True)


async def _listed_masters(config: BrokerConfig, outer: BrokerOuterAPI) -> dict[tuple[str, str], str] | None:
    """(brokerName, master address) -> cluster, as every name server that answered lists them;
    None when none did."""
    answers = await _within(
        REQUEST_ROUND_S,
        [_ask(outer.get_broker_cluster_info(ns, MAX_CLUSTER_INFO_BYTES, REQUEST_TIMEOUT_MS))
         for ns in config.namesrv_addrs],
    )  # fmt: skip
    listed: dict[tuple[str, str], str] = {}
    heard = False
    for ns, answer in zip(config.namesrv_addrs, answers, strict=True):
        try:
            if isinstance(answer, BaseException):
                raise answer if isinstance(answer, CheckSkipped) else CheckSkipped(repr(answer))
            for name, addr, cluster in _masters_listed(answer):
                listed.setdefault((name, addr), cluster)
            heard = True
        except CheckSkipped as exc:
            log.warning("slave identity check: name server %s: %s", _display_addr(ns), exc)
    return listed if heard else None


async def gather_masters(
    config: BrokerConfig, outer: BrokerOuterAPI, book: AddressBook
) -> list[MasterRecord] | None:
    """Every master the name servers list; those that may be this slave's (its brokerName's,
    and those on the host of its haMasterAddress) as they describe themselves. None when no
    name server answered."""
    listed = await _listed_masters(config, outer)
    if listed is None:
        return None
    configured = config.store.ha_master_address
    if configured:
        await _within(RESOLVE_ROUND_S, [book.resolve([configured, *(addr for _, addr in listed)])])

    def relevant(name: str, addr: str) -> bool:
        return name == config.broker_name or (bool(configured) and book.may_share_host(configured, addr))

    asking = sorted((key for key in listed if relevant(*key)), key=lambda key: key[0] != config.broker_name)
    if len(asking) > MAX_MASTERS_ASKED:
        log.warning("slave identity check: %d masters may listen at the host of haMasterAddress; "
                    "checking %d", len(asking), MAX_MASTERS_ASKED)  # fmt: skip
        asking = asking[:MAX_MASTERS_ASKED]
    answers = await _within(REQUEST_ROUND_S, [_describe(outer, *key, listed[key]) for key in asking])
    described = [
        answer if isinstance(answer, MasterRecord) else MasterRecord(*key, listed[key], asked=True)
        for key, answer in zip(asking, answers, strict=True)
    ]
    # The others count as known names (for the typo hint) and are never compared.
    return described + [MasterRecord(*key, cluster) for key, cluster in listed.items() if key not in asking]


async def check(config: BrokerConfig) -> Verdict:
    """The verdict on a slave of ``config`` (``refusal`` runs it before the broker serves)."""
    try:
        outer = BrokerOuterAPI(config)
    except ConfError as exc:  # bad TLS or ACL settings: the broker's own start reports them
        return Verdict(None, (f"not checked: no client could be made ({exc})",))
    book = AddressBook()
    try:
        masters = await asyncio.wait_for(gather_masters(config, outer, book), CHECK_DEADLINE_S)
        if masters is None:
            return Verdict(None, ("not checked: no name server answered",))
        configured = config.store.ha_master_address
        known = [m.ha_addr for m in masters if m.ha_addr is not None]
        if configured:
            await _within(RESOLVE_ROUND_S, [book.resolve([configured, *known])])
    except TimeoutError:
        return Verdict(None, (f"not checked: no complete answer within {CHECK_DEADLINE_S:g} s",))
    finally:
        await outer.close()
        book.close()
    return judge(config, masters, book.same)


def applies_to(config: BrokerConfig) -> bool:
    """Static-role slaves that know name servers: a master has nothing to follow, and in
    controller mode the controller assigns roles and masters (an absent key counts as false)."""
    controller_mode = bool(getattr(config, "enable_controller_mode", False))
    return config.store.is_slave and not controller_mode and bool(config.namesrv_addrs)


class MisconfiguredSlave(ConfError):
    """A slave whose brokerName, brokerClusterName or haMasterAddress names another broker set's
    master; the message is the one line saying which key to fix."""


def refusal(config: BrokerConfig) -> str | None:
    """The line to refuse the start with, or None (warnings are logged). Masters and
    controller-mode brokers return at once, without a request."""
    if not applies_to(config):
        return None
    verdict = asyncio.run(check(config))
    for warning in verdict.warnings:
        log.warning("slave identity check: %s", warning)
    return verdict.refusal


def check_before_start(config: BrokerConfig) -> None:
    """Run before the broker serves; raises ``MisconfiguredSlave`` for a slave of another set."""
    refused = refusal(config)
    if refused is not None:
        raise MisconfiguredSlave(refused)
