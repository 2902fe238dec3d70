"""RocketMQ 4.9's plain ACL for the broker and the name server.

- ``plain_config``: the ``plain_acl.yml`` format, checked by the account rules of
  ``broker.common.acl_rules`` (shared with the admin client), white addresses by the pattern
  grammar of ``broker.common.acl_addresses``;
- ``acl_file``: the file in use, hot-reloaded, written atomically;
- ``resources``: which topics/groups each request code needs, and the admin-only codes;
- ``validator``: the check of one request; ``guard``: the check put in front of the handlers;
- ``outbound``: how a server signs and secures its connections to the others.

The broker's own uses of it live in ``broker/server``: ``acl_admin`` (its ACL admin requests,
codes 50-54) and ``acl_stored`` (the checks of stored messages).

Signatures are computed in ``broker.common.acl_signature``, shared with the clients.
"""

from __future__ import annotations

from pathlib import Path

from .acl_file import AclFile
from .guard import install_acl
from .outbound import inner_credentials
from .plain_config import AclConfigError

ACL_FILE_NAME = "plain_acl.yml"

__all__ = ["ACL_FILE_NAME", "AclConfigError", "AclFile", "inner_credentials", "install_acl", "open_acl_file"]


def open_acl_file(path: str | Path, reload_interval_ms: int) -> AclFile:
    """The ACL file, loaded: raises ``AclConfigError`` (naming the file and the problem) when it
    is missing or not valid, so a server with ``aclEnable=true`` never starts without its ACL."""
    acl = AclFile(path, reload_interval_ms)
    acl.load()
    return acl
