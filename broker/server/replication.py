"""The broker's side of high availability: which replication service its role runs, what a
slave refuses, and what the name server's registration answer tells a slave.

The replication itself is the store's (``broker/store/ha``): a master runs ``HAServer`` on the
HA port, a slave runs ``HAClient`` towards its master and copies its metadata
(``slave_sync``). A slave's store refuses every put
(SERVICE_NOT_AVAILABLE, "message store is slave mode, so write is not supported"); the requests
below are refused before they reach it, with the answers RocketMQ's slave gives. They are the
slave's handlers for those codes, registered instead of the master's: a master pays nothing.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING

from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.message_codec import PHYSICAL_OFFSET_POSITION
from broker.common.request_headers import UpdateConsumerOffsetRequestHeader
from broker.common.request_headers.namesrv import RegisterBrokerResponseHeader
from broker.remoting.command import RemotingCommand, response_to
from broker.store.ha.master import HAServer
from broker.store.ha.roles import MASTER_ID
from broker.store.ha.slave import HAClient
from broker.store.store_config import SYNC_MASTER

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


def _refusal(code: int, remark: str):
    async def refuse(_conn, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, code, remark)

    return refuse


def _noting_offsets(handler, metadata: SlaveSynchronize):
    """UPDATE_CONSUMER_OFFSET on a slave: kept as on a master, and noted to be handed to the
    master when it is back (a client commits to a slave only while its master is away)."""

    async def update_consumer_offset(conn, request: RemotingCommand) -> RemotingCommand:
        response = await handler(conn, request)
        if response.code == ResponseCode.SUCCESS:
            header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
            metadata.note_client_offset(
                header.consumer_group, header.topic, header.queue_id, header.commit_offset
            )
        return response

    return update_consumer_offset


class BrokerReplication:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        store_config = broker.config.store
        self.is_slave = store_config.is_slave
        self.server: HAServer | None = None
        self.client: HAClient | None = None
        self.master_addr = ""  # a slave's master's remoting address, from the name server
        self._warned_no_master = False
        self.metadata: SlaveSynchronize | None = None
        if self.is_slave:
            self.client = HAClient(broker.store, store_config.ha_master_address)
            self.metadata = SlaveSynchronize(broker)
        else:
            self.server = HAServer(broker.store, broker.config.broker_ip1, broker.config.ha_listen_port)
            if store_config.broker_role == SYNC_MASTER:  # sends wait for a slave's confirmation
                broker.store.replica_wait = self.server.wait_for_slave

    async def start(self) -> None:
        """A master listens on its HA port (a port in use stops the start, as the remoting port
        does); a slave starts following its master."""
        if self.server is not None:
            port = await self.server.start()
            if not self.broker.config.ha_listen_port:  # one the system chose: registered as it is
                self.broker.config.store.ha_listen_port = port
        if self.client is not None:
            self.client.start()
        if self.metadata is not None:
            self.metadata.start()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
        if self.client is not None:
            await self.client.stop()
        if self.metadata is not None:
            await self.metadata.stop()

    def slave_handlers(self, table: dict) -> dict[int, object]:
        """The requests a slave answers itself or watches (none on a master); ``table``: the
        master's handlers."""
        if not self.is_slave or self.metadata is None:
            return {}
        metadata = _refusal(ResponseCode.SYSTEM_ERROR, METADATA_ON_SLAVE)
        return {
            RC.UPDATE_CONSUMER_OFFSET: _noting_offsets(table[RC.UPDATE_CONSUMER_OFFSET], self.metadata),
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
