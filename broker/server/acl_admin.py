"""The broker's ACL administration requests (RocketMQ 4.9's codes 50-54): create or update an
account, delete one, replace the global white list, and read the configuration and its version.

Every change is checked as the file is (an account RocketMQ would refuse is refused with the
reason), written to ``plain_acl.yml`` atomically and in use once the write succeeded. These
requests are admin-only (see resources.ADMIN_CODES); with ``aclEnable=false`` they are refused,
as RocketMQ's broker refuses them, since nothing would use what they change.

The configuration answer (54) carries the secret keys, as RocketMQ's does: only an admin account
can ask for it, and the tools showing it (mqadmin, the console) mask them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import orjson

from broker.acl.plain_config import AclConfig, AclConfigError, build_config, check_account
from broker.common.acl_rules import MAX_WHITE_ADDRS, split_addresses, split_entries
from broker.common.codes import RequestCode as RC
from broker.common.codes import ResponseCode
from broker.common.request_headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from broker.remoting.command import RemotingCommand, response_to
from broker.remoting.connection import Handler

if TYPE_CHECKING:
    from .controller import BrokerController


class AclAdminProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # One change at a time: each is computed from the configuration in use and written (on a
        # thread: an fsync must not hold the loop), so two at once could lose one of them.
        self._changing = asyncio.Lock()

    def handlers(self) -> dict[int, Handler]:
        return {
            RC.UPDATE_AND_CREATE_ACL_CONFIG: self.create_or_update,
            RC.DELETE_ACL_CONFIG: self.delete,
            RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white,
            RC.GET_BROKER_CLUSTER_ACL_INFO: self.info,
            RC.GET_BROKER_CLUSTER_ACL_CONFIG: self.config,
        }

    def _refusal(self, request: RemotingCommand) -> RemotingCommand | None:
        if self.broker.acl is None:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, "ACL is not enabled on this broker (aclEnable=false)"
            )
        return None

    async def _write(self, request: RemotingCommand, config: AclConfig) -> RemotingCommand:
        acl = self.broker.acl
        assert acl is not None
        try:
            await asyncio.to_thread(acl.write, config)
        except OSError as exc:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"cannot write the ACL file: {exc.strerror or exc}"
            )
        return response_to(request)

    async def create_or_update(self, conn, request: RemotingCommand) -> RemotingCommand:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        header = CreateAccessConfigRequestHeader.from_ext_fields(request.ext_fields)
        async with self._changing:
            return await self._create_or_update(request, header)

    async def _create_or_update(
        self, request: RemotingCommand, header: CreateAccessConfigRequestHeader
    ) -> RemotingCommand:
        acl = self.broker.acl
        assert acl is not None
        current = acl.current
        existing = current.accounts.get(header.access_key)
        raw: dict[str, Any] = existing.to_json() if existing is not None else {"accessKey": header.access_key}
        given: dict[str, Any] = {
            "secretKey": header.secret_key,
            "whiteRemoteAddress": header.white_remote_address,
            "defaultTopicPerm": header.default_topic_perm,
            "defaultGroupPerm": header.default_group_perm,
            "topicPerms": None if header.topic_perms is None else split_entries(header.topic_perms),
            "groupPerms": None if header.group_perms is None else split_entries(header.group_perms),
        }
        raw.update({name: value for name, value in given.items() if value is not None})
        raw["admin"] = header.admin
        try:
            account = check_account(raw, f"account {header.access_key!r}")
            accounts = dict(current.accounts)
            accounts[account.access_key] = account
            config = build_config(current.global_white_addresses, list(accounts.values()))
        except AclConfigError as exc:
            return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        return await self._write(request, config)

    async def delete(self, conn, request: RemotingCommand) -> RemotingCommand:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        header = DeleteAccessConfigRequestHeader.from_ext_fields(request.ext_fields)
        acl = self.broker.acl
        assert acl is not None
        async with self._changing:
            current = acl.current
            if header.access_key not in current.accounts:
                return response_to(
                    request,
                    ResponseCode.SYSTEM_ERROR,
                    f"no ACL account for AccessKey {header.access_key[:64]!r}",
                )
            accounts = [a for key, a in current.accounts.items() if key != header.access_key]
            return await self._write(request, build_config(current.global_white_addresses, accounts))

    async def update_global_white(self, conn, request: RemotingCommand) -> RemotingCommand:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        header = UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext_fields(request.ext_fields)
        acl = self.broker.acl
        assert acl is not None
        addresses = split_addresses(header.global_white_addrs)
        if len(addresses) > MAX_WHITE_ADDRS:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, f"more than {MAX_WHITE_ADDRS} global white addresses"
            )
        async with self._changing:
            try:
                config = build_config(addresses, list(acl.current.accounts.values()))
            except AclConfigError as exc:
                return response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
            return await self._write(request, config)

    def info(self, conn, request: RemotingCommand) -> RemotingCommand:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        acl = self.broker.acl
        assert acl is not None
        version = orjson.dumps(acl.version_json()).decode()
        config = self.broker.config
        header = GetBrokerAclConfigResponseHeader(
            version=version,
            broker_name=config.broker_name,
            broker_addr=config.broker_addr,
            cluster_name=config.broker_cluster_name,
            all_acl_file_version=orjson.dumps({str(acl.path): acl.version_json()}).decode(),
        )
        return response_to(request, ext_fields=header)

    def config(self, conn, request: RemotingCommand) -> RemotingCommand:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        acl = self.broker.acl
        assert acl is not None
        current = acl.current
        body = {
            "globalWhiteAddrs": list(current.global_white_addresses),
            "plainAccessConfigs": [account.to_json() for account in current.accounts.values()],
        }
        return response_to(request, body=orjson.dumps(body))
