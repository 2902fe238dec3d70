"""Importing this module registers every console command with the boundary (``COMMANDS``)."""

from console.commands import acl, brokers, dlq, groups, messages, session, tail, topics

MODULES = (acl, brokers, dlq, groups, messages, session, tail, topics)
