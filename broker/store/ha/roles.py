"""Which role a broker has, and the start-up check that its brokerId agrees with it."""

from __future__ import annotations

from broker.store.store_config import ASYNC_MASTER, SLAVE, SYNC_MASTER

MASTER_ID = 0
ROLES = (ASYNC_MASTER, SYNC_MASTER, SLAVE)


def role_problem(role: str, broker_id: int) -> str | None:
    """Why ``brokerRole`` and ``brokerId`` cannot go together (None when they can).

    Not asked in controller mode (``enableControllerMode``): the controllers decide the role and
    the id there, and the broker's start-up says so (``BrokerConfig``).

    RocketMQ's BrokerStartup stops a SLAVE whose brokerId is not above 0 ("Slave's brokerId must
    be > 0") and silently makes any master's brokerId 0. This broker refuses the second case as
    well: a conf with ``brokerId=1`` and no ``brokerRole`` was meant for a slave, and made master
    it would register under its master's name as a second, writable master."""
    if role == SLAVE and broker_id <= MASTER_ID:
        return f"brokerRole=SLAVE needs brokerId > 0 (it is {broker_id}): a slave's brokerId must be > 0"
    if role != SLAVE and broker_id != MASTER_ID:
        return (
            f"brokerRole={role} needs brokerId=0 (it is {broker_id}): set brokerRole=SLAVE for a "
            f"slave, or brokerId=0 for a master"
        )
    return None
