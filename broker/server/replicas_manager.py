"""Controller mode on the broker side (RocketMQ 5's ReplicasManager): the controllers decide which
broker of the set is master, and this broker takes the role they name while it runs.

Start-up, as RocketMQ 5.1: the brokerId comes from the controller (GET_NEXT_BROKER_ID, then
APPLY_BROKER_ID with registerCheckCode ``address;timestamp``) and is kept in the store
(``broker_identity``), so a restart reuses it; then a heartbeat, REGISTER_BROKER, and the role the
answer names (with no master named, this broker asks for an election). Until then the broker
serves reads but refuses writes; an unreachable controller is retried with one log line per try.

Running:
- BROKER_HEARTBEAT to every controller every ``brokerHeartbeatInterval`` (epoch, max and confirm
  offsets, ``controllerHeartBeatTimeoutMills``, ``brokerElectionPriority``); the leader's
  acknowledgements renew a master's lease (``controller_lease``);
- CONTROLLER_GET_REPLICA_INFO every ``syncBrokerMetadataPeriod`` (RocketMQ's key for it), and at
  once on NOTIFY_BROKER_ROLE_CHANGED: the notification only wakes the poll, the role is the
  leader's answer, never what an unauthenticated one-way request says;
- the leader looked up again every ``syncControllerMetadataPeriod``;
- a master's in-sync set checked every ``checkSyncStateSetPeriod`` (``in_sync_set``) and changed
  through CONTROLLER_ALTER_SYNC_STATE_SET. CONTROLLER_FENCED_MASTER_EPOCH there means this broker
  was replaced: it stops taking writes at once and re-reads the replica info.

A new master epoch naming this broker makes it master, naming another makes it that broker's
slave (``BrokerReplication.become_master`` / ``become_slave``); an older or equal epoch changes
nothing but a master's in-sync set. A set left without a master stops this broker's writes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from functools import partial
from typing import TYPE_CHECKING

from broker.common.codes import ResponseCode
from broker.common.errors import ControllerError
from broker.common.request_headers.controller import (
    BrokerHeartbeatRequestHeader,
    NotifyBrokerRoleChangedRequestHeader,
)
from broker.controller.client import ReplicaInfo
from broker.remoting.command import RemotingCommand, response_to
from broker.store.results import PutMessageStatus
from broker.store.running_flags import NOT_WRITEABLE

from .broker_identity import IdentityFiles
from .controller_lease import LEASE_ENDED, ControllerLease, silence_refusal, unless_silenced
from .in_sync_set import InSyncTracker, SlaveAck
from .outer_api import BrokerOuterAPI

if TYPE_CHECKING:
    from .controller import BrokerController

log = logging.getLogger(__name__)

RETRY_INTERVAL_S = 1.0  # between start-up attempts while the controllers cannot register us
MAX_RETRY_INTERVAL_S = 5.0
MAX_NOTIFY_BODY = 64 * 1024
HEARTBEAT_TIMEOUT_MS = 3000

NO_ROLE_YET = "controller mode: waiting for the controllers to name this broker's role"
FENCED = "controller mode: this broker was replaced as master (CONTROLLER_FENCED_MASTER_EPOCH)"
NO_MASTER = "controller mode: the controllers name no master for this broker set now"
ROLE_CHANGE_FAILED = "controller mode: the last change of role failed (see the log); it is tried again"


class ReplicasManager:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        config = broker.config
        # Signed as the broker's own name-server registration is (innerAccessKey), over TLS when
        # the broker's clients use it: a controller with aclEnable takes only admin accounts.
        self._outer = BrokerOuterAPI(config)
        self.client = self._outer.controller
        self.identity = IdentityFiles(
            config.broker_identity_path, config.broker_cluster_name, config.broker_name
        )
        self.broker_id: int | None = None  # the controller's id for this broker
        self.master_id: int | None = None
        self.master_address = ""
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.state = "INITIAL"  # INITIAL -> RUNNING (registered and a role, or no master, known)
        self.last_error = ""
        self.leader = ""  # the controller leader's address as last found
        self.heartbeats_ok = 0
        self.role_changes = 0
        self.lease = ControllerLease(
            lambda: config.controller_heart_beat_timeout_mills, self._lease_ended, self._lease_renewed
        )
        self._tracker: InSyncTracker | None = None
        self._unsettled: frozenset[int] = frozenset()  # proposed members whose answer never came
        self._role_lock = asyncio.Lock()
        self._poll_now = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._beating: dict[str, asyncio.Task] = {}  # controller address -> its heartbeat in flight
        self._leader_lookup: asyncio.Task | None = None
        self._reasons: list[str] = []  # why writes are refused besides the role (NOT_WRITEABLE)
        self.refuse_writes(NO_ROLE_YET)

    @property
    def is_master(self) -> bool:
        return self.master_id is not None and self.master_id == self.broker_id

    # -- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run())]

    async def stop(self) -> None:
        self.state = "SHUTDOWN"
        self.lease.cancel()
        tasks = [
            *self._tasks,
            *self._beating.values(),
            *([self._leader_lookup] if self._leader_lookup else []),
        ]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._outer.close()

    async def _run(self) -> None:
        attempt = 0
        while True:
            attempt += 1
            try:
                await self._start_up()
                break
            except Exception as exc:  # unreachable, refused, a bad identity file, a failed role change
                self.last_error = str(exc)
                # Jittered (brokers of a set restarted together do not ask in step), longer after
                # each failure up to MAX_RETRY_INTERVAL_S: one log line per try.
                delay = min(MAX_RETRY_INTERVAL_S, RETRY_INTERVAL_S * attempt) * (0.5 + random.random() / 2)
                log.warning("controller mode: cannot register with the controllers %s (attempt %d: %s); "
                            "writes stay refused, retrying in %.1f s", ";".join(self.client.addresses),
                            attempt, exc, delay)  # fmt: skip
                await asyncio.sleep(delay)
        self.state = "RUNNING"
        self.last_error = ""
        loops = (self._heartbeat_loop, self._replica_info_loop, self._leader_loop, self._sync_state_set_loop)
        self._tasks += [asyncio.create_task(loop()) for loop in loops]

    async def _start_up(self) -> None:
        config = self.broker.config
        if self.broker_id is None:
            self.broker_id = await self._obtain_broker_id()
            log.info("controller mode: this broker's id in %s is %d", config.broker_name, self.broker_id)
        # Heard alive before registering: the controller elects only among brokers it hears.
        await self._heartbeat_once()
        info = await self.client.register(
            config.broker_cluster_name, config.broker_name, self.broker_id, config.broker_addr
        )
        if info.master_id is None:
            info = await self._ask_for_election(info)
        await self.apply(info)

    async def _obtain_broker_id(self) -> int:
        applied = self.identity.applied()
        if applied is not None:
            return applied.broker_id
        config = self.broker.config
        pending = self.identity.pending()
        if pending is None:
            next_id = await self.client.next_broker_id(config.broker_cluster_name, config.broker_name)
            check_code = f"{config.broker_addr};{int(time.time() * 1000)}"
            pending = self.identity.note_pending(next_id, check_code)
        try:
            await self.client.apply_broker_id(
                config.broker_cluster_name, config.broker_name, pending.broker_id, pending.register_check_code
            )
        except ControllerError as exc:
            if exc.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
                self.identity.drop_pending()  # taken by another broker meanwhile: ask anew
            raise
        return self.identity.confirm(pending.broker_id).broker_id

    async def _ask_for_election(self, info: ReplicaInfo) -> ReplicaInfo:
        """No master in the set: ask the controller to elect one (RocketMQ's brokerElect)."""
        try:
            return await self.client.elect(self.broker.config.broker_name, self.broker_id)
        except ControllerError as exc:
            log.info("controller mode: no master elected yet (%s)", exc)
            return info

    # -- the role --------------------------------------------------------------------------------
    async def apply(self, info: ReplicaInfo) -> None:
        """Take the role ``info`` (the controller leader's view of this set) names."""
        async with self._role_lock:
            if info.master_epoch < self.master_epoch:
                return  # older than what this broker acted on
            if info.master_epoch == self.master_epoch and (
                info.master_id is not None or self.master_id is None
            ):
                if self.is_master and info.master_id == self.broker_id:
                    self._take_sync_state_set(info.sync_state_set, info.sync_state_set_epoch)
                    self._lease_confirmed()
                return
            await self._change_role(info)

    async def _change_role(self, info: ReplicaInfo) -> None:
        previous_epoch = self.master_epoch
        try:
            await self._switch_role(info)
        except Exception:
            # Half switched (say, the HA port taken): no writes, and the epoch is forgotten so
            # that the next replica info tries the change again.
            log.exception("controller mode: the change of role at epoch %d failed", info.master_epoch)
            self.master_epoch = previous_epoch
            self.refuse_writes(ROLE_CHANGE_FAILED)
            await self.broker.replication.fence()
            raise

    async def _switch_role(self, info: ReplicaInfo) -> None:
        assert self.broker_id is not None
        replication, config = self.broker.replication, self.broker.config
        self.master_epoch = info.master_epoch
        self.master_id = info.master_id
        self.master_address = info.master_address
        self.role_changes += 1
        self._unsettled, self.lease.silent = frozenset(), False  # a new master is silent only unheard
        for reason in [NO_ROLE_YET, *(r for r in self._reasons if r.startswith(LEASE_ENDED))]:
            self.allow_writes(reason)
        self.allow_writes(FENCED)
        self.allow_writes(ROLE_CHANGE_FAILED)
        if info.master_id is None:
            self.refuse_writes(NO_MASTER)
            await self._step_down()
            log.warning(
                "controller mode: %s has no master at epoch %d", config.broker_name, info.master_epoch
            )
            return
        self.allow_writes(NO_MASTER)
        if info.master_id == self.broker_id:
            self.sync_state_set = frozenset({self.broker_id})
            self.sync_state_set_epoch = 0
            self._take_sync_state_set(info.sync_state_set, info.sync_state_set_epoch)
            self._tracker = InSyncTracker(
                self.broker_id, self.broker.store.max_physic_offset, time.monotonic()
            )
            if time.monotonic() >= self.lease.valid_until:  # not heard lately: silent from the start
                self.lease.expired = self.lease.silent = True
                self.fence_if_silent()
            await replication.become_master(info.master_epoch, self._replica_wait)
            await self.broker.start_master_services()  # (each step is a no-op when done already)
        else:
            await self._step_down()
            self._tracker = None
            await replication.become_slave(
                self.broker_id, info.master_id, info.master_address, info.master_epoch
            )
        self.broker.register_soon()  # the name servers learn the new role (id 0 for a master) now

    async def _step_down(self) -> None:
        await self.broker.replication.fence()  # writes refused before anything else changes
        await self.broker.stop_master_services()

    def _take_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        if epoch > self.sync_state_set_epoch:
            if members != self.sync_state_set:
                log.info("controller mode: in-sync set %s (epoch %d), was %s", sorted(members), epoch,
                         sorted(self.sync_state_set))  # fmt: skip
            self.sync_state_set, self.sync_state_set_epoch = members, epoch
            self._unsettled = frozenset()  # the controller's set now, whatever became of proposals

    # -- what a master's send waits for ------------------------------------------------------------
    def _replica_wait(self, end_offset: int) -> PutMessageStatus | asyncio.Future[PutMessageStatus]:
        """What a send waits for (RocketMQ's handleHA in controller mode): with
        allAckInSyncStateSet, every in-sync slave's confirmation of ``end_offset``; without it,
        inSyncReplicas replicas counting the master itself (RocketMQ's default 1: nobody). Fewer
        slaves in sync than that: SLAVE_NOT_AVAILABLE at once; waiting longer than slaveTimeout:
        FLUSH_SLAVE_TIMEOUT. The message is stored either way."""
        server = self.broker.replication.server
        store_config = self.broker.config.store
        if server is None:
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        if self.lease.silent:
            return self._every_member(end_offset)
        slaves = self.sync_state_set - {self.broker_id}
        if store_config.all_ack_in_sync_state_set:
            if self._tracker is not None:  # slaves joining the set are waited for already
                slaves = self._tracker.waited_for(self.sync_state_set)
            return server.wait_for_in_sync(end_offset, slaves) if slaves else PutMessageStatus.PUT_OK
        need = store_config.in_sync_replicas - 1
        if need <= 0:
            return PutMessageStatus.PUT_OK
        if len(slaves) < need:
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        wait = server.wait_for_slave if need == 1 else partial(server.wait_for_in_sync, broker_ids=slaves)
        waiting = wait(end_offset)
        if isinstance(waiting, PutMessageStatus):
            return waiting
        every_member = partial(self._every_member, end_offset)
        return asyncio.ensure_future(unless_silenced(waiting, self.lease, every_member))

    def _every_member(self, end_offset: int) -> PutMessageStatus | asyncio.Future[PutMessageStatus]:
        """A silent master's send: every slave that could have been elected must hold it."""
        server, members = self.broker.replication.server, self._electable_slaves()
        if server is None or not members:
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        return server.wait_for_in_sync(end_offset, members)

    # -- writes refused for controller-mode reasons ------------------------------------------------
    def refuse_writes(self, reason: str) -> None:
        if reason not in self._reasons:
            self._reasons.append(reason)
        # Waiting for a role is every start's first state: not an error.
        level = logging.INFO if self._reasons[0] == NO_ROLE_YET else logging.WARNING
        self.broker.store.running_flags.set(NOT_WRITEABLE, self._reasons[0], level)

    def allow_writes(self, reason: str) -> None:
        if reason in self._reasons:
            self._reasons.remove(reason)
        flags = self.broker.store.running_flags
        if self._reasons:
            flags.set(NOT_WRITEABLE, self._reasons[0], logging.WARNING)
        else:
            flags.clear(NOT_WRITEABLE)

    def _lease_ended(self) -> None:
        if self.is_master:
            log.error("controller mode: lease ended; every write needs the in-sync slaves %s (none: refused)",
                      sorted(self._electable_slaves()))  # fmt: skip
            self.fence_if_silent()

    def _electable_slaves(self) -> frozenset[int]:
        """The slaves the controller may have elected (with those joining: waited for already)."""
        tracker, members = self._tracker, self.sync_state_set
        waited = tracker.waited_for(members) if tracker is not None else members
        return (waited | self._unsettled) - {self.broker_id}

    def fence_if_silent(self) -> None:
        """A silent master refuses writes (saying why) unless every in-sync slave reported
        lately, and takes them again once all have."""
        if not (self.lease.silent and self.is_master):
            return
        slaves = server.slaves() if (server := self.broker.replication.server) else ()
        interval = self.broker.config.store.ha_send_heartbeat_interval
        reason = silence_refusal(self._electable_slaves(), slaves, self.lease, interval)
        current = [r for r in self._reasons if r.startswith(LEASE_ENDED)]
        if current != ([reason] if reason else []):
            for stale in current:
                self.allow_writes(stale)
            if reason:
                self.refuse_writes(reason)

    def _lease_renewed(self) -> None:
        """Heard again, but still silent (another may have been elected meanwhile) until the
        replica info, read now, names this broker master at its epoch (``apply``)."""
        if self.lease.silent:
            self._poll_now.set()

    def _lease_confirmed(self) -> None:
        """The leader named this broker master at its epoch after the lease was renewed."""
        if self.lease.confirm():
            for reason in [r for r in self._reasons if r.startswith(LEASE_ENDED)]:
                self.allow_writes(reason)

    # -- heartbeats ------------------------------------------------------------------------------
    def _heartbeat_header(self) -> BrokerHeartbeatRequestHeader:
        config, store = self.broker.config, self.broker.store
        epochs = self.broker.replication.epochs
        max_offset = store.max_physic_offset
        return BrokerHeartbeatRequestHeader(
            cluster_name=config.broker_cluster_name,
            broker_addr=config.broker_addr,
            broker_name=config.broker_name,
            broker_id=self.broker_id,
            epoch=epochs.last_epoch() if epochs is not None else 0,
            max_offset=max_offset,
            confirm_offset=self._confirm_offset(max_offset),
            heartbeat_timeout_mills=config.controller_heart_beat_timeout_mills,
            election_priority=config.broker_election_priority,
        )

    def _confirm_offset(self, max_offset: int) -> int:
        """What the whole in-sync set holds (a master's), or this log's end (a slave's)."""
        server = self.broker.replication.server
        if not self.is_master or server is None:
            return max_offset
        acked = server.acked_offsets()
        others = self.sync_state_set - {self.broker_id}
        return min([max_offset, *(acked.get(b, 0) for b in others)])

    async def _heartbeat_once(self) -> None:
        """Start-up's heartbeat: the leader looked up, then one heartbeat to every controller,
        all answered (or timed out) before registering."""
        if not self.leader:
            await self._find_leader()
        await asyncio.gather(*self._beat_all(), return_exceptions=True)

    def _beat_all(self) -> list[asyncio.Task]:
        """One heartbeat to each controller (and the leader, if it is named otherwise) that has
        none in flight. Each is a task of its own: a controller that hangs (a paused process, a
        partition) delays nobody else's heartbeats, which the leader's verdict depends on."""
        if not self.leader and (self._leader_lookup is None or self._leader_lookup.done()):
            self._leader_lookup = asyncio.create_task(self._find_leader())
        header = self._heartbeat_header()
        sent_at = time.monotonic()
        started = []
        for address in dict.fromkeys([*self.client.addresses, *([self.leader] if self.leader else [])]):
            running = self._beating.get(address)
            if running is None or running.done():
                started.append(asyncio.create_task(self._beat(address, header, sent_at)))
                self._beating[address] = started[-1]
        return started

    async def _beat(self, address: str, header: BrokerHeartbeatRequestHeader, sent_at: float) -> None:
        """One heartbeat. To the leader, with the question whether it still leads: only its
        acknowledgement *as leader* renews the lease (any controller takes heartbeats, and a
        deposed leader's would renew it while the new one, which may not hear this broker, elects
        another master)."""
        leading = asyncio.ensure_future(self._still_leads(address)) if address == self.leader else None
        try:
            ok = await self.client.heartbeat_to(address, header, HEARTBEAT_TIMEOUT_MS)
        except BaseException:  # cancelled (stopping): the question goes too
            if leading is not None:
                leading.cancel()
            raise
        self.heartbeats_ok += ok
        if leading is None:
            return
        if await leading and ok:  # renewed from the moment of sending
            self.lease.renew(sent_at)
        elif self.leader == address:
            self.leader = ""  # look it up again: it has moved, or cannot be reached

    async def _still_leads(self, address: str) -> bool:
        try:
            return (await self.client.metadata(address)).is_leader
        except ControllerError:
            return False

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.broker.config.broker_heartbeat_interval / 1000)
            try:
                self._beat_all()
            except Exception:
                log.exception("controller mode: heartbeat failed")

    async def _find_leader(self) -> None:
        """Ask every controller at once and take the first that names a leader (asked in turn, a
        hanging controller would hold the lookup, and the lease with it, for a timeout)."""
        asks = [asyncio.create_task(self.client.metadata(address)) for address in self.client.addresses]
        leader = ""
        try:
            for next_answer in asyncio.as_completed(asks):
                try:
                    leader = (await next_answer).leader_address or ""
                except ControllerError as exc:
                    self.last_error = str(exc)
                if leader:
                    break
        finally:
            for ask in asks:
                ask.cancel()
            await asyncio.gather(*asks, return_exceptions=True)
        self.leader = leader

    async def _leader_loop(self) -> None:
        while True:
            await asyncio.sleep(self.broker.config.sync_controller_metadata_period / 1000)
            await self._find_leader()

    # -- the replica info --------------------------------------------------------------------------
    async def _replica_info_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(
                    self._poll_now.wait(), self.broker.config.sync_broker_metadata_period / 1000
                )
            except TimeoutError:
                pass
            self._poll_now.clear()
            try:
                await self.sync_replica_info()
            except Exception:
                log.exception("controller mode: replica info poll failed")

    async def sync_replica_info(self) -> None:
        """The leader's view of this set, acted on (RocketMQ's schedulingSyncBrokerMetadata)."""
        name = self.broker.config.broker_name
        try:
            info = await self.client.replica_info(name)
        except ControllerError as exc:
            self.last_error = str(exc)
            if exc.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST and self.broker_id is not None:
                await self.client.register(
                    self.broker.config.broker_cluster_name,
                    name,
                    self.broker_id,
                    self.broker.config.broker_addr,
                )
            return
        if info.master_id is None and info.master_epoch >= self.master_epoch:
            info = await self._ask_for_election(info)
        await self.apply(info)

    async def on_role_changed(self, _conn, request: RemotingCommand) -> RemotingCommand:
        """NOTIFY_BROKER_ROLE_CHANGED: read the replica info now. Its own content is only
        checked for shape: a one-way request anyone can send never decides the role."""
        try:
            NotifyBrokerRoleChangedRequestHeader.from_ext_fields(request.ext_fields)
            if len(request.body) > MAX_NOTIFY_BODY:
                raise ValueError("body too large")
            if request.body:
                json.loads(request.body)
        except ValueError as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, f"not a role-change notification: {exc}")
        self._poll_now.set()
        return response_to(request)

    # -- the in-sync set -----------------------------------------------------------------------------
    async def _sync_state_set_loop(self) -> None:
        while True:
            await asyncio.sleep(self.broker.config.check_sync_state_set_period / 1000)
            try:
                await self.check_sync_state_set()
            except Exception:
                log.exception("controller mode: in-sync set check failed")

    async def check_sync_state_set(self) -> None:
        server, tracker = self.broker.replication.server, self._tracker
        if not self.is_master or server is None or tracker is None:
            return
        store, store_config = self.broker.store, self.broker.config.store
        epochs = self.broker.replication.epochs
        last = epochs.last_entry() if epochs is not None else None
        wanted = tracker.check(
            self.sync_state_set,
            [SlaveAck(broker_id, acked) for broker_id, acked in server.acked_offsets().items()],
            store.max_physic_offset,
            last.start_offset if last is not None else 0,
            store_config.ha_max_gap_not_in_sync,
            store_config.ha_max_time_slave_not_catchup / 1000,
            time.monotonic(),
        )
        if wanted != self.sync_state_set:
            await self._alter_sync_state_set(wanted)

    async def _alter_sync_state_set(self, wanted: frozenset[int]) -> None:
        assert self.broker_id is not None
        epoch, master_epoch = self.sync_state_set_epoch, self.master_epoch
        try:
            members, new_epoch = await self.client.alter_sync_state_set(
                self.broker.config.broker_name, self.broker_id, master_epoch, set(wanted), epoch
            )
        except ControllerError as exc:
            self.last_error = str(exc)
            if exc.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH:
                log.error("controller mode: this master was replaced (%s): writes refused now", exc.remark)
                self.refuse_writes(FENCED)
                await self._step_down_if_master(master_epoch)
                self._poll_now.set()
            elif exc.code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH:
                self._poll_now.set()
            else:  # a timeout among them: the controller may have taken it all the same
                self._unsettled |= wanted
                log.warning("controller mode: in-sync set %s not taken: %s", sorted(wanted), exc)
            return
        async with self._role_lock:
            if self.master_epoch == master_epoch and self.is_master:
                self._take_sync_state_set(members, new_epoch)

    async def _step_down_if_master(self, master_epoch: int) -> None:
        async with self._role_lock:
            if self.is_master and self.master_epoch == master_epoch:
                await self._step_down()

    # -- answers -----------------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, str]:
        lease_ms = int(self.lease.seconds * 1000)
        return {
            "enableControllerMode": "true",
            "controllerState": self.state,
            "controllerLeaderAddr": self.leader,
            "controllerBrokerId": "" if self.broker_id is None else str(self.broker_id),
            "masterBrokerId": "" if self.master_id is None else str(self.master_id),
            "masterAddr": self.master_address,
            "masterEpoch": str(self.master_epoch),
            "syncStateSet": ",".join(map(str, sorted(self.sync_state_set))) if self.is_master else "",
            "syncStateSetEpoch": str(self.sync_state_set_epoch) if self.is_master else "",
            "controllerLeaseMillis": str(lease_ms),
            "controllerLeaseExpired": str(self.is_master and self.lease.expired).lower(),
            "controllerSilent": str(self.is_master and self.lease.silent).lower(),
            "controllerRoleChanges": str(self.role_changes),
            "controllerLastError": self.last_error,
            "writeRefusedReason": self._reasons[0] if self._reasons else "",
        }
