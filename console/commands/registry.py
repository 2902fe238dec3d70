"""Importing this module registers every console command with the boundary (``COMMANDS``) and its
command-line form (``core.command_line.PARSERS``)."""

from console.commands import acl, brokers, command_line, dlq, groups, messages, session, tail, topics

MODULES = (acl, brokers, dlq, groups, messages, session, tail, topics, command_line)
