"""The broker's side of high availability: which replication service its role runs, what a
slave refuses, and what the name server's registration answer tells a slave.

The replication itself is the store's (``broker/store/ha``): a master runs ``HAServer`` on the
HA port, a slave runs ``HAClient`` towards its master and copies its metadata
(``slave_sync``). A slave's store refuses every put
(SERVICE_NOT_AVAILABLE, "message store is slave mode, so write is not supported"); the requests
below are refused before they reach it, with the answers RocketMQ's slave gives. They are the
slave's handlers for those codes, registered instead of the master's: a master pays nothing.

In controller mode (``enableControllerMode``, RocketMQ 5) the role is not broker.conf's: the
controllers name the master (``replicas_manager``), and this broker changes role while it runs
(``become_master`` / ``become_slave``). Until the first word from them it is a slave with no master
(refuses writes, replicates from nobody). The slave-only handlers then follow the role at every
request, and each role change starts what the new role runs and stops what the old one ran: the
HA server and the commit log's epochs for a master, the HA client and metadata copy for a slave.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING

from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.errors import MQError
from broker.common.message_codec import PHYSICAL_OFFSET_POSITION
from broker.common.request_headers import UpdateConsumerOffsetRequestHeader
from broker.common.request_headers.namesrv import RegisterBrokerResponseHeader
from broker.remoting.command import RemotingCommand, response_to
from broker.store.ha.epochs import EpochFile
from broker.store.ha.master import HAServer
from broker.store.ha.protocol import parse_host_port
from broker.store.ha.roles import MASTER_ID
from broker.store.ha.slave import HAClient
from broker.store.store_config import SLAVE, SYNC_MASTER

from . import ha_security
from .processors.clients import total_physical_memory
from .slave_sync import SlaveSynchronize

if TYPE_CHECKING:
    from .controller import BrokerController

log = logging.getLogger(__name__)
_PHYSICAL_OFFSET = struct.Struct(">q")

# RocketMQ's remarks (EndTransactionProcessor, AdminBrokerProcessor.validateSlave, resetOffsetInner).
END_TRANSACTION_ON_SLAVE = "Message store is slave mode, so end transaction is forbidden."
METADATA_ON_SLAVE = (
    "Can't modify topic or subscription group from slave broker, please execute it from master broker."
)
RESET_OFFSET_ON_SLAVE = "Can not reset offset in slave broker"
BIND_RETRY_S = 1.0


def ha_port_unbound(address: str, exc: OSError) -> str:
    """Why a new master refuses writes while its HA port is not bound: a SYNC_MASTER that no
    slave can reach would take writes no slave can copy."""
    return (
        f"this master's HA port {address} cannot be bound ({exc.strerror or exc}): no slave can "
        f"replicate, so writes are refused until it is (tried again every {BIND_RETRY_S:g} s)"
    )


def _refusal(code: int, remark: str):
    async def refuse(_conn, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, code, remark)

    return refuse


def _noting_offsets(handler, replication: BrokerReplication):
    """UPDATE_CONSUMER_OFFSET on a slave: kept as on a master, and noted to be handed to the
    master when it is back (a client commits to a slave only while its master is away)."""

    async def update_consumer_offset(conn, request: RemotingCommand) -> RemotingCommand:
        response = await handler(conn, request)
        metadata = replication.metadata
        if response.code == ResponseCode.SUCCESS and metadata is not None:
            header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
            metadata.note_client_offset(
                header.consumer_group, header.topic, header.queue_id, header.commit_offset
            )
        return response

    return update_consumer_offset


def _following_role(replication: BrokerReplication, master_handler, slave_handler):
    """Controller mode: the master's or the slave's handler, by the role at this request."""

    def by_role(conn, request: RemotingCommand):  # the handler's answer or awaitable, as it gives it
        return (slave_handler if replication.is_slave else master_handler)(conn, request)

    return by_role


class BrokerReplication:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        store_config = broker.config.store
        self.controller_mode = broker.config.enable_controller_mode
        self.server: HAServer | None = None
        self.client: HAClient | None = None
        self.master_addr = ""  # a slave's master's remoting address (name server or controller)
        self._warned_no_master = False
        self.metadata: SlaveSynchronize | None = None
        self.epochs: EpochFile | None = None
        self._finding_master: asyncio.Task | None = None
        self._binding: asyncio.Task | None = None  # the HA port's bind, retried (controller mode)
        self._policy = ha_security.master_policy(broker.config, broker.acl, self._own_controller_id)
        if self.controller_mode:
            # Nothing is decided before the controllers answer: no writes, nobody to follow.
            store_config.broker_role = SLAVE
            self.epochs = EpochFile(broker.config.epoch_file_path)
        elif store_config.is_slave:
            self.client = self._new_ha_client(broker.config.broker_id, store_config.ha_master_address)
            self.metadata = SlaveSynchronize(broker)
        else:
            self.server = self._new_ha_server()
            if store_config.broker_role == SYNC_MASTER:  # sends wait for a slave's confirmation
                broker.store.replica_wait = self.server.wait_for_slave

    def _own_controller_id(self) -> int | None:
        replicas = self.broker.replicas
        return replicas.broker_id if replicas is not None else None

    @property
    def is_slave(self) -> bool:
        return self.broker.config.store.is_slave

    async def start(self) -> None:
        """A master listens on its HA port (a port in use stops the start, as the remoting port
        does); a slave starts following its master. In controller mode, neither yet."""
        if self.server is not None or self.controller_mode:  # one that is or may become master
            ha_security.warn_if_open(self._policy, self.broker.config.ha_server_addr)
        if self.server is not None:
            await self._listen(self.server)
        if self.client is not None:
            self.client.start()
        if self.metadata is not None:
            self.metadata.start()

    async def _listen(self, server: HAServer) -> None:
        port = await server.start()
        if not self.broker.config.ha_listen_port:  # one the system chose: registered as it is
            self.broker.config.store.ha_listen_port = port

    async def stop(self) -> None:
        if self._finding_master is not None:
            self._finding_master.cancel()
        self._stop_binding()
        if self.server is not None:
            await self.server.stop()
        if self.client is not None:
            await self.client.stop()
        if self.metadata is not None:
            await self.metadata.stop()

    # -- controller mode: changing role while running ---------------------------------------------
    async def become_master(self, epoch: int, replica_wait) -> None:
        """Master of epoch ``epoch``: stop following, start this epoch at the log's end, serve
        slaves, take writes (RocketMQ's changeToMaster; the role is SYNC_MASTER as there, and
        ``replica_wait`` decides what a send waits for)."""
        store, config = self.broker.store, self.broker.config
        await self._stop_following()
        # A record whose rest never came from the old master is cut before this log takes puts
        # of its own, or they would follow half a record (RocketMQ's truncateInvalidMsg).
        store.replica_log().cut_incomplete_tail()
        assert self.epochs is not None
        last = self.epochs.last_epoch()
        if epoch > last:
            self.epochs.append(epoch, store.max_physic_offset)
        elif epoch < last:
            # The controllers lost their state (epochs start again at 1): this log's epochs are
            # above theirs, and slaves comparing epochs would be refused. Said, not hidden.
            log.error("the controllers name this broker master at epoch %d, but its log already has "
                      "epoch %d (were the controllers' stores wiped?)", epoch, last)  # fmt: skip
        # (equal: a master registering again within its own epoch keeps its entry)
        if self.server is None:
            self.server = self._new_ha_server()
        bound = await self._bind_or_keep_trying(self.server)
        self.master_addr = ""
        config.broker_id = MASTER_ID
        store.replica_wait = replica_wait
        config.store.broker_role = SYNC_MASTER
        store.writability.update()  # the store re-reads its role
        log.info("now the master of %s at epoch %d (log end %d)%s", config.broker_name, epoch,
                 store.max_physic_offset, "" if bound else "; its HA port is not bound yet")  # fmt: skip

    async def _bind_or_keep_trying(self, server: HAServer) -> bool:
        """Listen on the HA port now, or keep trying every BIND_RETRY_S while this broker is
        master (a port still held by a process that has not quite let go of it, say). Meanwhile
        no slave can replicate, so this SYNC_MASTER refuses writes, saying why."""
        if server.listening or (self._binding is not None and not self._binding.done()):
            return server.listening
        try:
            await self._listen(server)
            return True
        except OSError as exc:
            reason = ha_port_unbound(self.broker.config.ha_server_addr, exc)
            log.error("%s", reason)
            if self.broker.replicas is not None:
                self.broker.replicas.refuse_writes(reason)
            self._binding = asyncio.create_task(self._keep_binding(server, reason))
            return False

    async def _keep_binding(self, server: HAServer, reason: str) -> None:
        try:
            while self.server is server and not server.listening:
                await asyncio.sleep(BIND_RETRY_S)
                try:
                    await self._listen(server)
                except OSError as exc:
                    log.debug("HA port still not bound: %s", exc)
            if server.listening:
                log.warning("the HA port %s is bound at last: slaves can replicate",
                            self.broker.config.ha_server_addr)  # fmt: skip
        finally:  # bound, or no longer master (cancelled): the reason goes either way
            if self.broker.replicas is not None:
                self.broker.replicas.allow_writes(reason)

    def _stop_binding(self) -> None:
        if self._binding is not None:
            self._binding.cancel()
            self._binding = None

    async def become_slave(self, own_id: int, master_id: int, master_addr: str, epoch: int) -> None:
        """Slave of ``master_id`` at ``master_addr`` in epoch ``epoch``: refuse writes first, stop
        serving slaves, then follow the master (its HA client handshakes and cuts a divergent
        tail) and copy its metadata (RocketMQ's changeToSlave)."""
        store, config = self.broker.store, self.broker.config
        config.store.broker_role = SLAVE
        store.writability.update()  # the store re-reads its role
        store.replica_wait = None
        config.broker_id = own_id
        self._stop_binding()
        if self.server is not None:
            await self.server.stop()
            self.server = None
        if self.client is not None and master_addr == self.master_addr:
            return  # the same master in a new epoch: the connection goes on
        await self._stop_following()
        self.master_addr = master_addr
        self.client = self._new_ha_client(own_id)
        self.client.start()
        self.metadata = SlaveSynchronize(self.broker)
        self.metadata.start()
        self._finding_master = asyncio.create_task(self._find_master_ha_address(master_addr))
        log.info("now a slave (brokerId %d) of brokerId %d at %s, epoch %d", own_id, master_id, master_addr,
                 epoch)  # fmt: skip

    async def fence(self) -> None:
        """Stop taking writes now (this master was replaced, or cannot prove it still is one)."""
        self.broker.config.store.broker_role = SLAVE
        self.broker.store.writability.update()

    async def _stop_following(self) -> None:
        if self._finding_master is not None:
            self._finding_master.cancel()
            self._finding_master = None
        if self.client is not None:
            await self.client.stop()
            self.client = None
        if self.metadata is not None:
            await self.metadata.stop()
            self.metadata = None

    def _new_ha_server(self) -> HAServer:
        """The HA port (controller mode: with epochs), its sign-in and TLS (``ha_security``)."""
        config = self.broker.config
        return HAServer(
            self.broker.store,
            config.broker_ip1,
            config.ha_listen_port,
            epochs=self.epochs,
            auth=self._policy,
            tls=ha_security.server_tls(config),
        )

    def _new_ha_client(self, own_id: int, static_master: str = "") -> HAClient:
        """A slave's client, signing in as ``own_id`` when it has a secret; in controller mode it
        handshakes with brokerId and epochs, and cuts a tail the new master does not share."""
        config = self.broker.config
        return HAClient(
            self.broker.store,
            static_master,
            epochs=self.epochs,
            broker_id=own_id,
            credentials=ha_security.slave_credentials(config, own_id),
            ssl_context=ha_security.client_ssl(config),
        )

    async def _find_master_ha_address(self, master_addr: str) -> None:
        """Ask the master for its HA port until the HA client has an address (the name server's
        answer may name the old master for a while after a failover)."""
        while self.client is not None and not self.client.master_address:
            address = await self._ask_ha_address(master_addr)
            if address and self.client is not None and self.master_addr == master_addr:
                self.client.update_master_address(address)
                return
            await asyncio.sleep(1.0)

    async def _ask_ha_address(self, master_addr: str) -> str:
        metadata = self.metadata
        if metadata is None:
            return ""
        try:
            table = await metadata.outer.get_broker_runtime_info(master_addr)
            if table.get("brokerRole") == SLAVE or not str(table.get("haListenPort", "")).isdigit():
                return ""  # not master yet: its HA port is not open
            host, _ = parse_host_port(master_addr)
        except (MQError, ValueError, AttributeError) as exc:  # unreachable, refused, a bad answer
            log.debug("cannot ask %s for its HA address: %s", master_addr, exc)
            return ""
        return f"{host}:{table['haListenPort']}"

    def slave_handlers(self, table: dict) -> dict[int, object]:
        """The requests a slave answers itself or watches (none on a master); ``table``: the
        master's handlers. In controller mode, handlers that follow the role at each request."""
        if self.controller_mode:
            own = self._slave_table(table)
            return {code: _following_role(self, table[code], handler) for code, handler in own.items()}
        if not self.is_slave:
            return {}
        return self._slave_table(table)

    def _slave_table(self, table: dict) -> dict[int, object]:
        metadata = _refusal(ResponseCode.SYSTEM_ERROR, METADATA_ON_SLAVE)
        return {
            RC.UPDATE_CONSUMER_OFFSET: _noting_offsets(table[RC.UPDATE_CONSUMER_OFFSET], self),
            RC.END_TRANSACTION: _refusal(ResponseCode.SLAVE_NOT_AVAILABLE, END_TRANSACTION_ON_SLAVE),
            RC.UPDATE_AND_CREATE_TOPIC: metadata,
            RC.DELETE_TOPIC_IN_BROKER: metadata,
            RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: metadata,
            RC.DELETE_SUBSCRIPTIONGROUP: metadata,
            RC.INVOKE_BROKER_TO_RESET_OFFSET: _refusal(ResponseCode.SYSTEM_ERROR, RESET_OFFSET_ON_SLAVE),
        }

    # -- reads from slaves ------------------------------------------------------------------------
    def suggest_broker_id(self, group: str, result) -> int:
        """The pull answer's suggestWhichBrokerId (RocketMQ's PullMessageProcessor): with
        ``slaveReadEnable``, a consumer reading further behind than accessMessageInMemoryMaxRatio
        of the machine's memory is sent to its group's whichBrokerWhenConsumeSlowly (a slave, 1 by
        default), any other to its group's brokerId (0); without it, to the master. A slave whose
        master is up sends a consumer that caught up back to the master."""
        config = self.broker.config
        behind = self._reads_from_disk(result)
        suggest = MASTER_ID
        group_config = self.broker.groups.table.get(group) if config.slave_read_enable else None
        if group_config is not None:
            suggest = group_config.which_broker_when_consume_slowly if behind else group_config.broker_id
        if self.redirects_reads() and not behind:
            suggest = MASTER_ID
        return suggest

    def redirects_reads(self) -> bool:
        """Whether this is a slave whose master is up (its HA connection is)."""
        return self.client is not None and self.client.connected

    def _reads_from_disk(self, result) -> bool:
        """Whether the pull's last message lies further behind the log's end than the share of
        memory (accessMessageInMemoryMaxRatio) RocketMQ assumes cached (isSuggestPullingFromSlave)."""
        if not result.messages:
            return False
        (offset,) = _PHYSICAL_OFFSET.unpack_from(result.messages[-1], PHYSICAL_OFFSET_POSITION)
        cached = total_physical_memory() * self.broker.config.access_message_in_memory_max_ratio / 100
        return self.broker.store.max_physic_offset - offset > cached

    def registered(self, namesrv: str, response: RemotingCommand) -> None:
        """A name server's answer to REGISTER_BROKER: for a slave, its master's HA and remoting
        addresses (RocketMQ's RegisterBrokerResult haServerAddr and masterAddr)."""
        if self.client is None:
            return
        answer = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields)
        if self.controller_mode:
            # The controllers name the master; the name server's answer may still name the old
            # one for a while after a failover: only its HA address for the named master is used.
            if answer.master_addr == self.master_addr and answer.ha_server_addr:
                self.client.update_master_address(answer.ha_server_addr)
            return
        if answer.master_addr:
            self.master_addr = answer.master_addr
            self._warned_no_master = False
        elif not self._warned_no_master:
            self._warned_no_master = True
            log.error("name server %s knows no master for brokerName %s in cluster %s: nothing to replicate "
                      "from until one registers", namesrv, self.broker.config.broker_name,
                      self.broker.config.broker_cluster_name)  # fmt: skip
        if answer.ha_server_addr:
            self.client.update_master_address(answer.ha_server_addr)

    def runtime_info(self) -> dict[str, str]:
        info = {"brokerRole": self.broker.config.store.broker_role}
        if self.server is not None:
            info.update(self.server.runtime_info())
        if self.client is not None:
            info.update(self.client.runtime_info())
            info["masterAddr"] = self.master_addr
        if self.metadata is not None:
            info.update(self.metadata.runtime_info())
        return info
