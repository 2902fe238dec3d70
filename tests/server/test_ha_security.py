"""Who may replicate (broker/server/ha_security.py): the secrets and members a master's HA port
takes from broker.conf, what a slave signs in with, and the WARNING of an open port."""

from __future__ import annotations

import logging

import pytest

from broker.acl import AclFile
from broker.common.broker_config_keys import ConfigValueError
from broker.server.config import BrokerConfig
from broker.server.ha_security import master_policy, slave_credentials, warn_if_open
from broker.store.ha.auth import SHARED_SECRET_KEY

SECRET = "sixteen characters or more"


def _config(**overrides: object) -> BrokerConfig:
    return BrokerConfig.load(None, {"brokerName": "set-a", **{k: str(v) for k, v in overrides.items()}})


def test_without_acl_or_secret_the_port_is_open_and_says_so(caplog):
    policy = master_policy(_config(), None, lambda: None)
    assert not policy.required
    with caplog.at_level(logging.WARNING):
        warn_if_open(policy, "127.0.0.1:10912")
    assert "accepts any slave" in caplog.text and "haAuthSecret" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        warn_if_open(master_policy(_config(haAuthSecret=SECRET), None, lambda: None), "x:1")
    assert caplog.text == ""


def test_the_shared_secret_and_the_members_a_master_expects():
    policy = master_policy(_config(haAuthSecret=SECRET), None, lambda: 3)
    assert policy.required and policy.secret_of is not None
    assert policy.secret_of(SHARED_SECRET_KEY) == SECRET
    assert policy.secret_of("anyone else") is None
    assert policy.expects("set-a", 1) is None and policy.expects(None, 2) is None
    assert "not this master's" in (policy.expects("set-b", 1) or "")
    assert "no slave's" in (policy.expects("set-a", 0) or "")
    assert "own" in (policy.expects("set-a", 3) or "")  # controller mode: this master's own id


def test_with_acl_only_admin_accounts_sign(tmp_path):
    acl_path = tmp_path / "plain_acl.yml"
    acl_path.write_text(
        "accounts:\n"
        "  - {accessKey: admin-key, secretKey: admin-secret, admin: true}\n"
        "  - {accessKey: app-key, secretKey: app-secret-1}\n"
    )
    acl = AclFile(acl_path)
    acl.load()
    policy = master_policy(_config(), acl, lambda: None)
    assert policy.secret_of is not None
    assert policy.secret_of("admin-key") == "admin-secret"
    assert policy.secret_of("app-key") is None and policy.secret_of(SHARED_SECRET_KEY) is None


def test_a_slave_signs_with_the_shared_secret_first_then_its_inner_account():
    inner = {"innerAccessKey": "inner-key", "innerSecretKey": "inner-secret"}
    both = slave_credentials(_config(haAuthSecret=SECRET, **inner), 1)
    assert both is not None and (both.access_key, both.secret_key) == (SHARED_SECRET_KEY, SECRET)
    only_inner = slave_credentials(_config(**inner), 2)
    assert only_inner is not None and (only_inner.access_key, only_inner.broker_id) == ("inner-key", 2)
    assert only_inner.broker_name == "set-a"
    assert slave_credentials(_config(), 1) is None


def test_a_short_shared_secret_is_refused_at_load():
    with pytest.raises(ConfigValueError, match="at least 16 characters"):
        _config(haAuthSecret="too short")
