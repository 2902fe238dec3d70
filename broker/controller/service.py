"""The controller process: CONTROLLER_* requests over the remoting server, elections on the leader.

Only the Raft leader answers writes and replica reads (others: CONTROLLER_NOT_LEADER naming the
leader's address, as RocketMQ's DLedgerController); any controller takes heartbeats and answers
GET_METADATA_INFO. The leader scans every ``scanNotActiveBrokerInterval``: a broker set whose
master stopped heartbeating gets a new master from its in-sync set, or none.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time

from broker.common.codes import RequestCode, ResponseCode
from broker.common.conf_file import ConfError, format_properties, parse_properties
from broker.common.request_headers.base import HeaderError
from broker.common.request_headers.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)
from broker.remoting.command import RemotingCommand, response_to
from broker.remoting.connection import RemotingConnection
from broker.remoting.server import RemotingServer

from .config import ControllerConfig, FixedKeyError, config_properties, updated_config
from .election import DEFAULT_HEARTBEAT_TIMEOUT_MS, STALL_S, Liveness, choose_master
from .outer_api import ControllerOuterAPI
from .raft import Peer, RaftNode
from .replicas_info import encode_table
from .state import (
    MAX_REPLICAS_PER_SET,
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    ElectMasterEvent,
    Outcome,
    ReadReplicaEvent,
    ReplicaView,
    UpdateBrokerAddressEvent,
)

log = logging.getLogger(__name__)
_NAME = re.compile(r"^[A-Za-z0-9_.%|-]{1,127}$")  # brokerName / clusterName
_ADDRESS = re.compile(r"^[A-Za-z0-9_.:\[\]-]{1,255}$")  # host:port
MAX_BODY_BYTES = 64 * 1024


class BadRequest(ValueError):
    pass


def _name(value: str, what: str) -> str:
    if not _NAME.match(value):
        raise BadRequest(f"{what} {value[:64]!r} is not a legal name (letters, digits, _.%|-, at most 127)")
    return value


def _address(value: str, what: str) -> str:
    if not _ADDRESS.match(value):
        raise BadRequest(f"{what} {value[:64]!r} is not host:port")
    return value


def sync_state_body(view: ReplicaView) -> bytes:
    return json.dumps(
        {"syncStateSet": sorted(view.sync_state_set), "syncStateSetEpoch": view.sync_state_set_epoch}
    ).encode()


class ControllerService:
    """A controller on its own remoting server (``python -m broker.controller``), or, given
    ``server``, on another process's: the name server with ``enableControllerInNamesrv`` (as
    RocketMQ's, the controller then answers on the name server's port). The processors are
    registered here, before the owner wraps its table (ACL); the owner starts ``server`` before
    :meth:`start` and stops it after :meth:`stop`."""

    def __init__(self, config: ControllerConfig, server: RemotingServer | None = None) -> None:
        self.config = config
        self._owns_server = server is None
        self.server = server or RemotingServer(config.listen_host, config.listen_port)
        self.liveness = Liveness()
        self.raft: RaftNode | None = None
        self._scanner: asyncio.Task | None = None
        self._electing: set[str] = set()
        self._leader_since: float | None = None
        # Built here: unusable TLS files or a half-set account fail the start, not a notification.
        self.outer = ControllerOuterAPI(config)
        self._notifications: set[asyncio.Task] = set()
        handlers = {
            RequestCode.BROKER_HEARTBEAT: self._heartbeat,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self._metadata,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self._next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self._apply_broker_id,
            RequestCode.CONTROLLER_REGISTER_BROKER: self._register_broker,
            RequestCode.CONTROLLER_ELECT_MASTER: self._elect_master,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self._alter_sync_state_set,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self._replica_info,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self._sync_state_data,
            RequestCode.GET_CONTROLLER_CONFIG: self._get_config,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self._update_config,
        }
        for code, handler in handlers.items():
            self.server.register_processor(code, self._guarded(handler))

    @property
    def write_timeout_s(self) -> float:
        return self.config.write_timeout_ms / 1000

    async def start(self) -> int:
        port = await self.server.start() if self._owns_server else self.server.port
        # listenPort 0 (tests): this controller's own address is the port it got.
        peers = [
            Peer(p.peer_id, p.raft_address, f"{self.config.listen_host}:{port}")
            if p.peer_id == self.config.self_id and p.listen_address.endswith(":0")
            else p
            for p in self.config.peers
        ]
        self.raft = RaftNode(self.config.self_id, peers, self.config.store_path, self.config.raft_password)
        self._scanner = asyncio.create_task(self._scan_forever())
        return port

    async def stop(self) -> None:
        if self._scanner is not None:
            self._scanner.cancel()
        for task in list(self._notifications):
            task.cancel()
        await self.outer.close()
        if self._owns_server:
            await self.server.stop()
        if self.raft is not None:
            self.raft.close()

    # ---- plumbing ----

    def _guarded(self, handler):
        async def run(connection: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            try:
                return await handler(request)
            except (HeaderError, BadRequest) as exc:
                return response_to(request, ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc))

        return run

    def _node(self) -> RaftNode:
        assert self.raft is not None, "the controller is not started"
        return self.raft

    @staticmethod
    def _answer(
        request: RemotingCommand, outcome: Outcome, header=None, body: bytes = b""
    ) -> RemotingCommand:
        return response_to(request, outcome.code, outcome.remark, header, body if outcome.ok else b"")

    # ---- requests any controller answers ----

    async def _heartbeat(self, request: RemotingCommand) -> RemotingCommand:
        h = BrokerHeartbeatRequestHeader.from_ext_fields(request.ext_fields)
        _name(h.broker_name, "brokerName")
        _address(h.broker_addr, "brokerAddr")
        if h.broker_id is None or not 0 <= h.broker_id < 1 << 31:
            raise BadRequest("the heartbeat needs brokerId (0 .. 2^31)")
        stored = self.liveness.beat(
            h.broker_name,
            h.broker_id,
            h.broker_addr,
            epoch=h.epoch,
            max_offset=h.max_offset,
            confirm_offset=h.confirm_offset,
            timeout_ms=h.heartbeat_timeout_mills,
            election_priority=h.election_priority,
        )
        if not stored:
            return response_to(request, ResponseCode.SYSTEM_BUSY, "too many brokers heartbeating")
        return response_to(request)

    async def _metadata(self, request: RemotingCommand) -> RemotingCommand:
        node = self._node()
        leader = node.leader()
        header = GetMetaDataResponseHeader(
            group=self.config.group,
            controller_leader_id=leader.peer_id if leader else None,
            controller_leader_address=leader.listen_address if leader else None,
            is_leader=node.is_leader(),
            peers=";".join(f"{p.peer_id}-{p.listen_address}" for p in node.peers),
        )
        return response_to(request, ext_fields=header)

    async def _get_config(self, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, body=format_properties(config_properties(self.config)).encode())

    async def _update_config(self, request: RemotingCommand) -> RemotingCommand:
        """This controller's live settings (RocketMQ: each controller is updated on its own;
        mqadmin sends to every address given). Kept until the process restarts."""
        if len(request.body) > MAX_BODY_BYTES:
            raise BadRequest("the config body is too large")
        updates = parse_properties(request.body.decode("utf-8", errors="replace"))
        if not updates:
            raise BadRequest("the body must hold key=value lines")
        try:
            self.config = updated_config(self.config, updates)
        except FixedKeyError as exc:
            return response_to(request, ResponseCode.NO_PERMISSION, str(exc))
        except ConfError as exc:
            raise BadRequest(str(exc)) from None
        log.info("controller config updated: %s", ", ".join(f"{k}={v}" for k, v in updates.items()))
        return response_to(request)

    # ---- leader only ----

    async def _next_broker_id(self, request: RemotingCommand) -> RemotingCommand:
        h = GetNextBrokerIdRequestHeader.from_ext_fields(request.ext_fields)
        node = self._node()
        if not await node.leader_ready(self.write_timeout_s):
            return self._answer(request, node.not_leader())
        name = _name(h.broker_name, "brokerName")
        header = GetNextBrokerIdResponseHeader(h.cluster_name, name, node.next_broker_id(name))
        return response_to(request, ext_fields=header)

    async def _apply_broker_id(self, request: RemotingCommand) -> RemotingCommand:
        h = ApplyBrokerIdRequestHeader.from_ext_fields(request.ext_fields)
        address = h.register_check_code.split(";", 1)[0]
        event = ApplyBrokerIdEvent(
            _name(h.cluster_name, "clusterName"),
            _name(h.broker_name, "brokerName"),
            h.applied_broker_id,
            h.register_check_code[:300],
            _address(address, "registerCheckCode's address"),
        )
        outcome = await self._node().propose(event, self.write_timeout_s)
        return self._answer(request, outcome, ApplyBrokerIdResponseHeader(h.cluster_name, h.broker_name))

    async def _register_broker(self, request: RemotingCommand) -> RemotingCommand:
        h = RegisterBrokerToControllerRequestHeader.from_ext_fields(request.ext_fields)
        event = UpdateBrokerAddressEvent(
            _name(h.broker_name, "brokerName"), h.broker_id, _address(h.broker_address, "brokerAddress")
        )
        outcome = await self._node().propose(event, self.write_timeout_s)
        if outcome.ok and outcome.view is not None and outcome.view.master_id is None:
            # A set without a master (a new one): elect now rather than at the next scan.
            elected = await self.elect(h.broker_name)
            # Refused (nobody alive yet, or a scan elected first): answer the set as it is now.
            outcome = (
                elected
                if elected.ok
                else Outcome(outcome.code, outcome.remark, self._node().read(h.broker_name))
            )
        view = outcome.view
        header = RegisterBrokerToControllerResponseHeader(
            cluster_name=h.cluster_name,
            broker_name=h.broker_name,
            master_broker_id=view.master_id if view else None,
            master_address=view.master_address if view else None,
            master_epoch=view.master_epoch if view else None,
            sync_state_set_epoch=view.sync_state_set_epoch if view else None,
        )
        body = sync_state_body(view) if view else b""
        return self._answer(request, outcome, header, body)

    async def _elect_master(self, request: RemotingCommand) -> RemotingCommand:
        h = ElectMasterRequestHeader.from_ext_fields(request.ext_fields)
        name = _name(h.broker_name, "brokerName")
        if h.designate_elect and h.broker_id is None:
            raise BadRequest("designateElect needs brokerId")
        outcome = await self.elect(name, h.broker_id if h.designate_elect else None)
        view = outcome.view
        header = ElectMasterResponseHeader(
            master_broker_id=view.master_id if view else None,
            master_address=view.master_address if view else None,
            master_epoch=view.master_epoch if view else None,
            sync_state_set_epoch=view.sync_state_set_epoch if view else None,
        )
        body = b""
        if view is not None:
            body = json.dumps(
                {
                    "brokerMemberGroup": {
                        "cluster": view.cluster_name,
                        "brokerName": view.broker_name,
                        "brokerAddrs": {str(k): v for k, v in sorted(view.replicas.items())},
                    },
                    "syncStateSet": sorted(view.sync_state_set),
                }
            ).encode()
        # Answered with the header even when refused: RocketMQ's MASTER_STILL_EXIST names the master.
        return response_to(request, outcome.code, outcome.remark, header, body)

    async def _alter_sync_state_set(self, request: RemotingCommand) -> RemotingCommand:
        h = AlterSyncStateSetRequestHeader.from_ext_fields(request.ext_fields)
        name = _name(h.broker_name, "brokerName")
        if len(request.body) > MAX_BODY_BYTES:
            raise BadRequest("the SyncStateSet body is too large")
        try:
            body = json.loads(request.body or b"{}")
            ids = body["syncStateSet"]
            epoch = body["syncStateSetEpoch"]
            if not isinstance(ids, list) or len(ids) > MAX_REPLICAS_PER_SET:
                raise TypeError
            if not all(type(i) is int for i in ids) or type(epoch) is not int:
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise BadRequest(
                'the body must be a SyncStateSet: {"syncStateSet": [brokerIds], "syncStateSetEpoch": n}'
            ) from None
        node = self._node()
        if not await node.leader_ready(self.write_timeout_s):
            return self._answer(request, node.not_leader())
        new_set = frozenset(ids)
        dead = sorted(i for i in new_set if i != h.master_broker_id and not self.liveness.alive(name, i))
        if dead:
            # RocketMQ refuses a set naming a broker it does not see alive.
            return response_to(
                request, ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, f"brokerIds {dead} are not alive"
            )
        event = AlterSyncStateSetEvent(name, h.master_broker_id, h.master_epoch, epoch, new_set)
        outcome = await node.propose(event, self.write_timeout_s)
        view = outcome.view
        header = AlterSyncStateSetResponseHeader(view.sync_state_set_epoch if view and outcome.ok else None)
        return self._answer(request, outcome, header, sync_state_body(view) if view else b"")

    async def _replica_info(self, request: RemotingCommand) -> RemotingCommand:
        h = GetReplicaInfoRequestHeader.from_ext_fields(request.ext_fields)
        name = _name(h.broker_name, "brokerName")
        node = self._node()
        if self.config.process_read_event:
            outcome = await node.propose(ReadReplicaEvent(name), self.write_timeout_s)
        elif not await node.leader_ready(self.write_timeout_s):
            outcome = node.not_leader()
        else:
            found = node.read(name)
            outcome = (
                Outcome(ResponseCode.SUCCESS, None, found)
                if found is not None
                else Outcome(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker set {name}")
            )
        view = outcome.view
        if not outcome.ok or view is None:
            return self._answer(request, outcome)
        header = GetReplicaInfoResponseHeader(view.master_id, view.master_address, view.master_epoch)
        return response_to(request, ext_fields=header, body=sync_state_body(view))

    async def _sync_state_data(self, request: RemotingCommand) -> RemotingCommand:
        node = self._node()
        if not await node.leader_ready(self.write_timeout_s):
            return self._answer(request, node.not_leader())
        if len(request.body) > MAX_BODY_BYTES:
            raise BadRequest("the body is too large")
        try:
            names = json.loads(request.body) if request.body else None
            if names is not None and (
                not isinstance(names, list) or not all(isinstance(n, str) for n in names)
            ):
                raise TypeError
        except (ValueError, TypeError):
            raise BadRequest("the body must be a JSON list of brokerNames") from None
        views = node.read_all()
        if names is not None:
            wanted = set(names)
            views = [v for v in views if v.broker_name in wanted]
        return response_to(request, body=encode_table(views, self.liveness.alive_ids))

    # ---- elections ----

    async def elect(self, broker_name: str, designated: int | None = None) -> Outcome:
        """Run DefaultElectPolicy on this leader's view and propose its choice."""
        node = self._node()
        if not await node.leader_ready(self.write_timeout_s):
            return node.not_leader()
        view = node.read(broker_name)
        if view is None:
            return Outcome(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"no broker set {broker_name}")
        alive = self.liveness.alive_ids(broker_name)
        choice = choose_master(view, alive, designated=designated, elect_unclean=self.config.elect_unclean)
        if not choice.ok:
            return Outcome(choice.code, choice.remark, view)
        event = ElectMasterEvent(broker_name, choice.master_id, view.master_epoch, designated is not None)
        outcome = await node.propose(event, self.write_timeout_s)
        if outcome.ok and outcome.view is not None:
            log.info(
                "broker set %s: master %s at epoch %d (was %s)%s",
                broker_name,
                outcome.view.master_id,
                outcome.view.master_epoch,
                view.master_id,
                " by switchover" if designated is not None else "",
            )
            self._notify(outcome.view)
        return outcome

    def _notify(self, view: ReplicaView) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED to every replica, one-way and best effort (RocketMQ's
        notifyBrokerRoleChanged): brokers that miss it learn the change from GET_REPLICA_INFO."""
        if not self.config.notify_role_changed:
            return
        header = NotifyBrokerRoleChangedRequestHeader(
            view.master_address or None, view.master_epoch, view.sync_state_set_epoch, view.master_id
        )
        body = sync_state_body(view)

        async def tell(address: str) -> None:
            try:
                # Connecting is bounded by the client.
                await self.outer.notify_broker_role_changed(address, header, body)
            except Exception as exc:  # a broker that is down or unreachable: it will poll
                log.debug("role-change notification to %s failed: %s", address, exc)

        for address in set(view.replicas.values()):
            task = asyncio.create_task(tell(address))
            self._notifications.add(task)
            task.add_done_callback(self._notifications.discard)

    def _master_lost(self, view: ReplicaView, now: float) -> bool:
        """The set's master stopped heartbeating. A controller that has just become leader
        gives a master it never heard from one heartbeat timeout before judging it: the one the
        set's live brokers give in their heartbeats (controllerHeartBeatTimeoutMills, theirs to
        set), else the default. RocketMQ's judges it inactive at once; a grace is kept for a
        master whose first heartbeat to this controller is on its way."""
        assert view.master_id is not None
        beat = self.liveness.get(view.broker_name, view.master_id)
        if beat is not None:
            return not beat.alive(now)
        since = self._leader_since if self._leader_since is not None else now
        peers = self.liveness.alive_ids(view.broker_name, now).values()
        grace = max((peer.timeout_s for peer in peers), default=DEFAULT_HEARTBEAT_TIMEOUT_MS / 1000)
        return now - since > grace

    async def scan_once(self) -> None:
        node = self._node()
        now = time.monotonic()
        if not await node.leader_ready(self.write_timeout_s):
            self._leader_since = None
            return
        if self._leader_since is None:
            self._leader_since = now
            log.info("controller %s leads the group (term %d)", self.config.self_id, node.term())
        self.liveness.expire(now)
        for view in node.read_all():
            name = view.broker_name
            if name in self._electing:
                continue
            if view.master_id is not None and not self._master_lost(view, now):
                continue
            if view.master_id is None and not self.liveness.alive_ids(name, now):
                continue
            self._electing.add(name)
            try:
                outcome = await self.elect(name)
                if not outcome.ok and outcome.code != ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE:
                    log.info("broker set %s: election refused: %s", name, outcome.remark)
            finally:
                self._electing.discard(name)

    async def _scan_forever(self) -> None:
        while True:
            # Read each round: updateControllerConfig may change it while running.
            interval = self.config.scan_interval_ms / 1000
            slept_from = time.monotonic()
            await asyncio.sleep(interval)
            stalled = time.monotonic() - slept_from - interval
            if stalled > STALL_S:
                # This process did not run (SIGSTOP, a stalled host): nobody could be heard meanwhile,
                # and judging brokers by it would depose a master that heartbeats all along.
                log.warning("controller stalled for %.1f s: heartbeat ages taken from before it", stalled)
                self.liveness.stalled(stalled)
            try:
                await self.scan_once()
            except Exception:
                log.exception("controller scan failed")
