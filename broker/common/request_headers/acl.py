"""Headers of the plain-ACL administration requests (RocketMQ 4.9's codes 50-54).

Permission lists travel as RocketMQ's tools write them: ``topicPerms`` / ``groupPerms`` are one
comma-separated text of ``name=PERM`` items (``topicA=PUB,topicB=DENY``), and the global white
addresses one comma-separated text as well (an address pattern may itself hold commas, as
``192.168.1.1,2,3`` does: RocketMQ splits the text at every comma, and so does the broker here).
"""

from __future__ import annotations

from broker.common.request_headers.base import CommandHeader, header


@header
class CreateAccessConfigRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_ACL_CONFIG (50): an account created, or updated field by field (a field
    left out keeps the account's value; ``admin`` is always written, as RocketMQ's tools do)."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None  # "topicA=DENY,topicB=PUB|SUB"
    group_perms: str | None = None  # "groupA=SUB"


@header
class DeleteAccessConfigRequestHeader(CommandHeader):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str


@header
class UpdateGlobalWhiteAddrsConfigRequestHeader(CommandHeader):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): the whole list, comma-separated (empty: none).

    RocketMQ 5 also sends ``aclFileFullPath`` (which of its ACL files to write); a path from the
    wire never names a file here: the broker writes its one ``plain_acl.yml`` and ignores it."""

    global_white_addrs: str
    acl_file_full_path: str | None = None


@header
class GetBrokerAclConfigResponseHeader(CommandHeader):
    """The answer of GET_BROKER_CLUSTER_ACL_INFO (52): the ACL file's data version (JSON, as a
    broker's DataVersion) and which broker answered. ``allAclFileVersion`` is a JSON object of
    file path → data version."""

    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None
