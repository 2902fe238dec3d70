"""mqadmin subcommands, one module per group; ``all_commands`` is the registry ``broker.cli`` reads."""

from __future__ import annotations

from broker.cli_commands.base import Command


def all_commands() -> list[Command]:
    from broker.cli_commands import acl, brokers, cluster, controller, group, message, offset, topic, trace

    return [
        *cluster.COMMANDS,
        *topic.COMMANDS,
        *group.COMMANDS,
        *offset.COMMANDS,
        *message.COMMANDS,
        *trace.COMMANDS,
        *brokers.COMMANDS,
        *acl.COMMANDS,
        *controller.COMMANDS,
    ]
