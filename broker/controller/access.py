"""Which controller requests the plain ACL lets through, and for whom.

RocketMQ 5's controller checks nothing (its name server neither), so anyone reaching the port can
move a broker set's master. Here, when the process that serves the controller has
``aclEnable=true`` (the name server with ``enableControllerInNamesrv``, or a standalone
controller's controller.conf), the controller's requests are checked like the name server's:

- what changes the controller's view needs an **admin** account: a broker's id claim,
  registration, heartbeat (liveness and the offsets an election ranks by: a forged one could keep
  a dead master or crown a lagging slave), in-sync set changes, elections and switchovers, the
  config's reads and writes (the config names the Raft peers) and broker-data clean-up. Brokers
  already sign their name-server registrations with an admin account (``innerAccessKey``), and
  mqadmin's ``electMaster`` signs with ``--access-key``/``--secret-key``;
- CONTROLLER_GET_METADATA_INFO is answered to anyone: it names the controllers and their leader,
  what every broker and tool needs to find the leader (as the name server's route reads);
- the replica reads (GET_REPLICA_INFO, GET_SYNC_STATE_DATA, GET_NEXT_BROKER_ID) need a signature of
  any account of the file.
"""

from __future__ import annotations

from broker.common.codes import RequestCode as RC

CONTROLLER_ADMIN_CODES = frozenset(
    {
        RC.BROKER_HEARTBEAT,
        RC.CONTROLLER_APPLY_BROKER_ID,
        RC.CONTROLLER_REGISTER_BROKER,
        RC.CONTROLLER_ALTER_SYNC_STATE_SET,
        RC.CONTROLLER_ELECT_MASTER,
        RC.UPDATE_CONTROLLER_CONFIG,
        RC.GET_CONTROLLER_CONFIG,
        RC.CLEAN_BROKER_DATA,
    }
)
CONTROLLER_OPEN_READS = frozenset({RC.CONTROLLER_GET_METADATA_INFO})
