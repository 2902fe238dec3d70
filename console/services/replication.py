"""The cluster page's Replication section with RocketMQ 5's controller mode (issue 22): what the
controllers say of each broker set (master, master epoch, in-sync set, replicas and whether the
leader hears them), each broker's epoch and the set's epoch history (GET_BROKER_EPOCH_CACHE: when
each master took over, at which commit-log offset), beside the replication figures each broker
reports (``cluster_queries.cluster_overview``).

The controllers are ``settings.CONSOLE_CONTROLLER_ADDR`` (RocketMQ's ``host:port;host:port``) or,
unset, the ``controllerAddr`` of the brokers that run with ``enableControllerMode=true`` (their
GET_BROKER_CONFIG). Without either, failover is not configured: masters and slaves are static.
A controller that does not answer is a state of the page, not a failure of it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from django.conf import settings

from broker.client.admin import AsyncMQAdmin, MQAdmin, MQClientError
from broker.common.epoch_entries import OPEN_END, EpochEntry, EpochEntryCache
from broker.common.hosts import parse_host_list
from broker.controller.client import ControllerClient, ControllerError, ControllerMetadata, broker_epoch_cache
from broker.controller.replicas_info import BrokerReplicas, ReplicaIdentity
from core.cluster_queries import BrokerSet, ClusterOverview, _cluster_overview, fan_out

# The whole controller query (every controller's metadata at once, bounded by the client's 3-s
# timeout, then the leader's sync state): a frozen controller costs the page at most this long,
# not one client timeout per controller and request.
CONTROLLER_WAIT_SECONDS = 6.0
# At most this many epochs of a set's history are shown (the newest); the rest are counted.
HISTORY_ROWS = 50


def split_addresses(raw: str, what: str) -> list[str]:
    """RocketMQ's ``host:port;host:port`` list (commas accepted too); a bad one is an
    ``MQClientError`` saying what is wrong with ``what``, which the page shows."""
    return parse_host_list(raw.replace(",", ";"), what, error=MQClientError)


@dataclass
class ControllerSource:
    """Where the console found its controllers, said on the page."""

    addresses: list[str]
    origin: str  # "CONSOLE_CONTROLLER_ADDR", or the brokers that name them


@dataclass
class ControllerMember:
    """A controller of the group as the page shows it."""

    peer_id: str
    address: str
    is_leader: bool = False
    answered: bool | None = None  # None: the console was not given its address, so did not ask
    error: str = ""


@dataclass
class ControllerView:
    source: ControllerSource
    metadata: ControllerMetadata | None = None  # the leader's answer (else the first answer)
    members: list[ControllerMember] = field(default_factory=list)
    sets: dict[str, BrokerReplicas] = field(default_factory=dict)
    error: str = ""

    @property
    def leader(self) -> str:
        meta = self.metadata
        if meta is None or not meta.leader_address:
            return ""
        return f"{meta.leader_id} ({meta.leader_address})" if meta.leader_id else meta.leader_address


@dataclass
class EpochRow:
    epoch: int
    start_offset: int
    end_offset: int | None  # None: the current epoch (RocketMQ's open end)

    @property
    def written(self) -> int | None:
        return None if self.end_offset is None else self.end_offset - self.start_offset


@dataclass
class EpochHistory:
    """One broker's epoch list, shown as its set's history (the master's when it answers)."""

    broker_addr: str
    rows: list[EpochRow]
    max_offset: int
    older: int = 0  # epochs not shown


def _history(addr: str, cache: EpochEntryCache) -> EpochHistory:
    entries: list[EpochEntry] = sorted(cache.epoch_list, key=lambda e: e.epoch)
    shown = entries[-HISTORY_ROWS:]
    rows = [
        EpochRow(e.epoch, e.start_offset, None if e.end_offset == OPEN_END else e.end_offset)
        for e in reversed(shown)  # newest first
    ]
    return EpochHistory(addr, rows, cache.max_offset, len(entries) - len(shown))


@dataclass
class MemberEpoch:
    epoch: int | None = None
    error: str = ""


@dataclass
class SetView:
    """A broker set on the page: the name server's members (with their own figures) and the
    controller's view of it, either of which may be missing."""

    name: str
    cluster: str
    broker_set: BrokerSet | None
    replicas: BrokerReplicas | None = None
    history: EpochHistory | None = None
    history_error: str = ""
    epochs: dict[str, MemberEpoch] = field(default_factory=dict)  # broker address -> its epoch

    @property
    def members(self):
        return self.broker_set.members if self.broker_set else []

    @property
    def master(self):
        return self.broker_set.master if self.broker_set else None

    def identity_of(self, addr: str) -> ReplicaIdentity | None:
        """The controller's replica at broker address ``addr`` (the controller's ids are its own:
        a master registers on the name server as id 0)."""
        if self.replicas is None:
            return None
        return next(
            (r for r in self.replicas.in_sync + self.replicas.not_in_sync if r.broker_address == addr), None
        )

    def in_sync(self, broker_id: int) -> bool:
        return self.replicas is not None and broker_id in self.replicas.sync_state_set

    @property
    def rows(self) -> list[dict]:
        """The template's rows: each name-server member with its controller id, in-sync and alive
        flags (as the controller leader has them) and epoch."""
        out = []
        for member in self.members:
            identity = self.identity_of(member.addr)
            out.append(
                {
                    "m": member,
                    "controller_id": identity.broker_id if identity else None,
                    "alive": identity.alive if identity else None,
                    "in_sync": self.in_sync(identity.broker_id) if identity else None,
                    "epoch": self.epochs.get(member.addr),
                }
            )
        return out

    @property
    def switchover_targets(self) -> list[ReplicaIdentity]:
        """Every replica but the master: the controller decides (and says why it refuses)."""
        if self.replicas is None:
            return []
        replicas = self.replicas.in_sync + self.replicas.not_in_sync
        return [r for r in replicas if r.broker_id != self.replicas.master_id]


@dataclass
class ReplicationView:
    overview: ClusterOverview
    controller: ControllerView | None  # None: no controller configured (static master/slave)
    sets: list[SetView]


# -- controllers -----------------------------------------------------------------------------------


def configured_controllers() -> ControllerSource | None:
    raw = getattr(settings, "CONSOLE_CONTROLLER_ADDR", "") or ""
    addresses = split_addresses(raw, "CONSOLE_CONTROLLER_ADDR")
    return ControllerSource(addresses, "CONSOLE_CONTROLLER_ADDR") if addresses else None


@dataclass
class BrokerHaFacts:
    """What one broker says of controller mode: the controllers it names (None: not in controller
    mode, or its config unknown) and its epoch cache (or why there is none)."""

    controller_addr: str | None = None
    epochs: EpochEntryCache | None = None
    error: str = ""


async def _ha_facts(core: AsyncMQAdmin, addr: str, need_config: bool) -> BrokerHaFacts:
    """One broker's config (only when the console has no controller address of its own) and, in
    controller mode, its epoch cache: one after the other, so a broker that does not answer costs
    one timeout."""
    facts = BrokerHaFacts()
    try:
        if need_config:
            config = await core.broker_config(addr)
            if config.get("enableControllerMode", "false").lower() != "true":
                return facts
            facts.controller_addr = ";".join(
                split_addresses(config.get("controllerAddr", ""), f"controllerAddr of {addr}")
            )
        facts.epochs = await broker_epoch_cache(core.remoting, addr)
    except MQClientError as exc:
        facts.error = str(exc)
    return facts


async def _all_ha_facts(core: AsyncMQAdmin, addrs: list[str], need_config: bool) -> dict[str, BrokerHaFacts]:
    answers = await fan_out([_ha_facts(core, addr, need_config) for addr in addrs])
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer  # a bug: brokers' refusals are facts already
    return dict(zip(addrs, answers, strict=True))


def _named_by_brokers(facts: dict[str, BrokerHaFacts]) -> ControllerSource | None:
    """The controllers the brokers in controller mode name (their controllerAddr)."""
    found: dict[str, list[str]] = {}  # address list -> brokers naming it
    for addr, fact in facts.items():
        if fact.controller_addr:
            found.setdefault(fact.controller_addr, []).append(addr)
    if not found:
        return None
    # One controller group per cluster is the normal case; with several, the most named one.
    named, brokers = max(found.items(), key=lambda item: len(item[1]))
    return ControllerSource(
        split_addresses(named, "controllerAddr"), f"controllerAddr of broker {', '.join(sorted(brokers))}"
    )


async def _broker_addrs(core: AsyncMQAdmin) -> list[str]:
    info = await core.cluster_info()
    return sorted({a for data in info.brokers.values() for a in data.broker_addrs.values()})


async def controller_source(core: AsyncMQAdmin) -> ControllerSource | None:
    """CONSOLE_CONTROLLER_ADDR, else the controllers the brokers in controller mode name."""
    configured = configured_controllers()
    if configured is not None:
        return configured
    return _named_by_brokers(await _all_ha_facts(core, await _broker_addrs(core), need_config=True))


async def _probe(client: ControllerClient, addresses: list[str]) -> dict[str, ControllerMetadata | str]:
    """Every controller's GET_METADATA_INFO at once (a frozen one costs one timeout, not one per
    later request): its answer, or why there is none."""
    answers = await asyncio.gather(*(client.metadata(a) for a in addresses), return_exceptions=True)
    out: dict[str, ControllerMetadata | str] = {}
    for address, answer in zip(addresses, answers, strict=True):
        if isinstance(answer, ControllerMetadata):
            out[address] = answer
        elif isinstance(answer, ControllerError):
            out[address] = answer.remark or str(answer)
        else:
            raise answer
    return out


def _leader_first(source: ControllerSource, probed: dict[str, ControllerMetadata | str]) -> list[str]:
    """The addresses with the leader some controller named first, then those that answered: the
    client asks them in this order."""
    named = [
        m.leader_address for m in probed.values() if isinstance(m, ControllerMetadata) and m.leader_address
    ]
    answered = [a for a, m in probed.items() if isinstance(m, ControllerMetadata)]
    ordered = named[:1] + answered + source.addresses
    return list(dict.fromkeys(ordered))


def _members(source: ControllerSource, probed: dict[str, ControllerMetadata | str]) -> list[ControllerMember]:
    metas = [m for m in probed.values() if isinstance(m, ControllerMetadata)]
    peers = next((m.peers for m in metas if m.is_leader), None) or next((m.peers for m in metas), {})
    leader = next((m.leader_address for m in metas if m.leader_address), None)
    members = [ControllerMember(pid, addr, addr == leader) for pid, addr in sorted(peers.items())]
    known = {m.address for m in members}
    members += [ControllerMember("", a, a == leader) for a in source.addresses if a not in known]
    for member in members:
        answer = probed.get(member.address)
        if answer is not None:
            member.answered = isinstance(answer, ControllerMetadata)
            member.error = "" if member.answered else str(answer)
    return members


async def _ask_controller(source: ControllerSource) -> ControllerView:
    view = ControllerView(source)
    client = ControllerClient(source.addresses)
    try:
        async with asyncio.timeout(CONTROLLER_WAIT_SECONDS):
            probed = await _probe(client, source.addresses)
            view.members = _members(source, probed)
            metas = [m for m in probed.values() if isinstance(m, ControllerMetadata)]
            if not metas:
                view.error = "; ".join(f"{a}: {why}" for a, why in probed.items())
                return view
            view.metadata = next((m for m in metas if m.is_leader), metas[0])
            client.addresses = _leader_first(source, probed)
            view.sets = await client.sync_state_data()
    except TimeoutError:
        view.error = f"no answer within {CONTROLLER_WAIT_SECONDS:g} s from {';'.join(source.addresses)}"
    except ControllerError as exc:
        view.error = str(exc)
    finally:
        await client.close()
    return view


def _latest_epoch(cache: EpochEntryCache) -> int | None:
    return max((e.epoch for e in cache.epoch_list), default=None)


# -- the section -------------------------------------------------------------------------------------


async def _controller_side(core: AsyncMQAdmin) -> tuple[dict[str, BrokerHaFacts], ControllerView | None]:
    """Every broker's controller-mode facts, then the controllers' view (when there are any)."""
    configured = configured_controllers()
    facts = await _all_ha_facts(core, await _broker_addrs(core), need_config=configured is None)
    source = configured or _named_by_brokers(facts)
    if source is None:
        return facts, None
    controller = await _ask_controller(source)
    # A set's history is its master's epoch list: ask the masters only the controller names too.
    others = sorted({r.master_address for r in controller.sets.values() if r.master_address} - set(facts))
    facts.update(await _all_ha_facts(core, others, need_config=False))
    return facts, controller


async def _replication_view(core: AsyncMQAdmin) -> ReplicationView:
    # The brokers' runtime infos and their controller-mode facts at once: a broker that does not
    # answer costs the page one timeout.
    overview, (facts, controller) = await asyncio.gather(_cluster_overview(core), _controller_side(core))
    by_name = {s.name: s for s in overview.broker_sets}
    if controller is None:
        sets = [SetView(s.name, s.cluster, s) for s in overview.broker_sets]
        return ReplicationView(overview, None, sets)
    names = sorted(set(by_name) | set(controller.sets))
    sets = []
    for name in names:
        broker_set = by_name.get(name)
        replicas = controller.sets.get(name)
        cluster = broker_set.cluster if broker_set else (replicas.cluster_name if replicas else "")
        view = SetView(name, cluster, broker_set, replicas)
        for member in view.members:
            fact = facts.get(member.addr)
            if fact is not None and fact.epochs is not None:
                view.epochs[member.addr] = MemberEpoch(_latest_epoch(fact.epochs))
            elif fact is not None:
                view.epochs[member.addr] = MemberEpoch(error=fact.error or "not in controller mode")
        _set_history(view, facts)
        sets.append(view)
    return ReplicationView(overview, controller, sets)


def _set_history(view: SetView, facts: dict[str, BrokerHaFacts]) -> None:
    """The master's epoch list (the name server's master, else the controller's): the log's
    history as the broker that writes it keeps it."""
    candidates = []
    if view.master is not None:
        candidates.append(view.master.addr)
    if view.replicas is not None and view.replicas.master_address:
        candidates.append(view.replicas.master_address)
    for addr in candidates:
        fact = facts.get(addr)
        if fact is not None and fact.epochs is not None:
            view.history = _history(addr, fact.epochs)
            return
        if fact is not None:
            view.history_error = fact.error or f"{addr} is not in controller mode"
    if not candidates:
        view.history_error = "no master to ask"


def replication_view(admin: MQAdmin) -> ReplicationView:
    """The cluster page's brokers and the Replication section, with the controllers' view when
    failover is configured."""
    return admin.run(_replication_view(admin.core))


# -- switchover ---------------------------------------------------------------------------------------


@dataclass
class SwitchoverPlan:
    """What the confirmation step shows and the action checks again."""

    source: ControllerSource
    replicas: BrokerReplicas
    target: ReplicaIdentity
    addresses: list[str]  # the controllers, the leader first

    @property
    def current_master(self) -> ReplicaIdentity | None:
        r = self.replicas
        return next((i for i in r.in_sync + r.not_in_sync if i.broker_id == r.master_id), None)

    @property
    def target_in_sync(self) -> bool:
        return self.target.broker_id in self.replicas.sync_state_set

    @property
    def doubts(self) -> list[str]:
        """Why the controller will likely refuse (it decides; the page only warns)."""
        out = []
        if self.target.broker_id == self.replicas.master_id:
            out.append(f"broker {self.target.broker_id} is already the master")
        if not self.target_in_sync:
            out.append(f"broker {self.target.broker_id} is not in the in-sync set")
        if not self.target.alive:
            out.append(f"the controller does not hear broker {self.target.broker_id} (not alive)")
        return out


class SwitchoverRefused(Exception):
    """The set or the broker the request names does not exist (for a 404), or no controller."""


async def _plan(core: AsyncMQAdmin, broker_name: str, broker_id: int) -> SwitchoverPlan:
    source = await controller_source(core)
    if source is None:
        raise SwitchoverRefused(
            "automatic failover is not configured: no broker runs with enableControllerMode and "
            "CONSOLE_CONTROLLER_ADDR is not set, so there is no controller to switch masters"
        )
    client = ControllerClient(source.addresses)
    try:
        async with asyncio.timeout(CONTROLLER_WAIT_SECONDS):
            addresses = client.addresses = _leader_first(source, await _probe(client, source.addresses))
            sets = await client.sync_state_data([broker_name])
    except TimeoutError:
        raise ControllerError(None, f"no answer within {CONTROLLER_WAIT_SECONDS:g} s") from None
    finally:
        await client.close()
    replicas = sets.get(broker_name)
    if replicas is None:
        raise SwitchoverRefused(f"the controller knows no broker set {broker_name!r}")
    target = next((r for r in replicas.in_sync + replicas.not_in_sync if r.broker_id == broker_id), None)
    if target is None:
        raise SwitchoverRefused(f"broker set {broker_name!r} has no replica with broker id {broker_id}")
    return SwitchoverPlan(source, replicas, target, addresses)


def switchover_plan(admin: MQAdmin, broker_name: str, broker_id: int) -> SwitchoverPlan:
    """The set as the controller sees it now and the replica to make its master; raises
    ``SwitchoverRefused`` (nothing to switch) or ``ControllerError`` (no controller answered)."""
    return admin.run(_plan(admin.core, broker_name, broker_id))


@dataclass
class SwitchoverResult:
    master_id: int | None
    master_address: str
    master_epoch: int


async def _switchover(plan: SwitchoverPlan) -> SwitchoverResult:
    client = ControllerClient(plan.addresses)
    try:
        async with asyncio.timeout(CONTROLLER_WAIT_SECONDS * 2):
            info = await client.switchover(plan.replicas.broker_name, plan.target.broker_id)
    except TimeoutError:
        raise ControllerError(None, f"no answer within {CONTROLLER_WAIT_SECONDS * 2:g} s") from None
    finally:
        await client.close()
    return SwitchoverResult(info.master_id, info.master_address, info.master_epoch)


def switchover(admin: MQAdmin, plan: SwitchoverPlan) -> SwitchoverResult:
    """Ask the controller leader to make ``plan.target`` the master (CONTROLLER_ELECT_MASTER with
    designateElect); its refusal raises ``ControllerError`` with RocketMQ's code and reason."""
    return admin.run(_switchover(plan))
