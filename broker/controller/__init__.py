"""RocketMQ 5's controller: each broker set's master, epochs and in-sync replicas, agreed by Raft.

``state`` (the replicated state machine), ``election`` (liveness and DefaultElectPolicy),
``raft`` (pysyncobj, bridged into asyncio), ``service`` (the CONTROLLER_* requests), ``config``
(controller.conf). Run with ``python -m broker.controller -c controller.conf``.
"""
