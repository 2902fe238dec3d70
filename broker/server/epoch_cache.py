"""GET_BROKER_EPOCH_CACHE (RocketMQ 5's getBrokerEpochCache): what a controller-mode broker's log
holds, epoch by epoch, for mqadmin and the controllers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.common.epoch_entries import EpochEntryCache
from broker.remoting.command import RemotingCommand, response_to

if TYPE_CHECKING:
    from .controller import BrokerController


def epoch_cache_handler(broker: BrokerController):
    """GET_BROKER_EPOCH_CACHE (1007): the log's epochs (none outside controller mode) and its max
    offset, under the controller's brokerId for this broker where it has one."""

    async def epoch_cache(_conn, request: RemotingCommand) -> RemotingCommand:
        config, epochs, replicas = broker.config, broker.replication.epochs, broker.replicas
        broker_id = replicas.broker_id if replicas is not None and replicas.broker_id is not None else None
        body = EpochEntryCache(
            config.broker_cluster_name,
            config.broker_name,
            config.broker_id if broker_id is None else broker_id,
            epochs.entries() if epochs is not None else (),
            broker.store.max_physic_offset,
        ).encode()
        return response_to(request, body=body)

    return epoch_cache
