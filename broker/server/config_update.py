"""UPDATE_BROKER_CONFIG on a running broker: check every value first, keep it in ``broker.conf``,
then apply it — at once for a live key, at the next start for the others, which stay listed as
pending until then so nobody is told a value is in use while the broker runs another one."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.common.conf_file import ConfError, write_properties
from broker.common.connection_limits import LIMIT_KEYS, ConnectionLimits

from . import config_schema as schema

if TYPE_CHECKING:
    from .controller import BrokerController

log = logging.getLogger(__name__)


@dataclass
class ConfigUpdateOutcome:
    applied: dict[str, str] = field(default_factory=dict)  # live now
    pending: dict[str, str] = field(default_factory=dict)  # written, used after a restart
    persisted: bool = True  # written to broker.conf

    def remark(self) -> str:
        """What the operator reads in the answer (mqadmin prints it, the console shows it)."""
        parts = []
        if self.applied:
            parts.append("applied now: " + ", ".join(f"{k}={v}" for k, v in self.applied.items()))
        if self.pending:
            parts.append(
                "needs restart: "
                + ", ".join(f"{k}={v}" for k, v in self.pending.items())
                + " written to broker.conf, the running broker keeps its current value until restarted"
            )
        if not self.persisted:
            parts.append("not kept: the broker runs without a broker.conf, a restart forgets it")
        return "; ".join(parts)


class BrokerConfigUpdater:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # Restart-required values accepted since start: key -> value as written.
        self.pending: dict[str, str] = {}
        self._hooks: dict[str, Callable[[Any], None]] = {
            "autoCreateTopicEnable": broker.topics.set_auto_create,
            "autoCreateSubscriptionGroup": self._set_group_auto_create,
            "defaultTopicQueueNums": broker.topics.set_default_queue_nums,
            "brokerPermission": self._permission_changed,
        }

    def update(self, updates: dict[str, str]) -> ConfigUpdateOutcome:
        """Raises ``ConfError`` (nothing applied, nothing written) for an unknown key, a key
        that cannot change at run time or a bad value."""
        config = self.broker.config
        typed = schema.validate_update(updates)
        self._check_connection_limits(typed)
        needs_restart = sorted(k.name for k in typed if k.apply is schema.Apply.RESTART)
        if needs_restart and config.conf_path is None:
            raise ConfError(
                f"{', '.join(needs_restart)} takes effect only after a restart, and this broker was "
                "started without a broker.conf (-c) to keep it in"
            )
        texts = {key.name: key.format(value) for key, value in typed.items()}
        if config.conf_path is not None:
            write_properties(config.conf_path, texts)
        outcome = ConfigUpdateOutcome(persisted=config.conf_path is not None)
        for key, value in typed.items():
            if key.apply is schema.Apply.LIVE:
                self._apply_live(key, value)
                outcome.applied[key.name] = texts[key.name]
            elif texts[key.name] == config.value_of(key):
                self.pending.pop(key.name, None)  # back to what runs: nothing waits
                outcome.applied[key.name] = texts[key.name]
            else:
                self.pending[key.name] = outcome.pending[key.name] = texts[key.name]
        log.info("broker config updated: %s", outcome.remark())
        self.broker.register_soon()
        return outcome

    def _check_connection_limits(self, typed: dict[schema.ConfigKey, Any]) -> None:
        """The network limits hold together (the unfinished-frame bound at least one frame): a
        combination refused here would otherwise be written and stop the next start."""
        if not any(key.name in LIMIT_KEYS for key in typed):
            return
        config = self.broker.config
        after = {name: config.value_of(schema.KEYS[name]) for name in LIMIT_KEYS}
        after.update({name: value for name, value in self.pending.items() if name in LIMIT_KEYS})
        after.update({key.name: key.format(value) for key, value in typed.items() if key.name in LIMIT_KEYS})
        ConnectionLimits.from_conf(after)

    def _apply_live(self, key: schema.ConfigKey, value: Any) -> None:
        setattr(self.broker.config.holder_of(key), key.attr, value)
        self.pending.pop(key.name, None)
        hook = self._hooks.get(key.name)
        if hook is not None:
            hook(value)

    def _set_group_auto_create(self, enabled: bool) -> None:
        self.broker.groups.auto_create = enabled

    def _permission_changed(self, _perm: int) -> None:
        # Clients learn the broker's permission from its routes: a new data version makes the
        # name servers take the registration that carries it (as RocketMQ does).
        self.broker.topics.data_version.next_version()
