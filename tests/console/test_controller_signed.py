"""The console asks controllers with its own account: a controller embedded in a name server with
ACL on refuses unsigned requests, so the replication view reads its leader and sets only when the
console signs its controller requests as it signs every other (``ROCKETMQ_ACCESS_KEY``)."""

from __future__ import annotations

import pytest
import yaml

from broker.common.acl_signature import SessionCredentials
from broker.local_cluster import wait_until
from console.services.replication import replication_view
from core import cluster_access
from tests.controller.embedded import start_embedded_namesrv

pytestmark = pytest.mark.timeout(120)

ADMIN = SessionCredentials("console-ctl-admin", "console-ctl-admin-secret")


@pytest.fixture(scope="module")
def acl_namesrv(tmp_path_factory):
    root = tmp_path_factory.mktemp("console-ctl-acl")
    acl_file = root / "plain_acl.yml"
    accounts = [{"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True}]
    acl_file.write_text(yaml.safe_dump({"accounts": accounts}))
    namesrv = start_embedded_namesrv(root, aclEnable="true", aclFilePath=acl_file)
    try:
        yield namesrv.addr
    finally:
        namesrv.stop()


def _controller_view(addr: str, settings, credentials: SessionCredentials | None):
    settings.BROKER_NAMESRV = settings.CONSOLE_CONTROLLER_ADDR = addr
    settings.ROCKETMQ_ACCESS_KEY = credentials.access_key if credentials else ""
    settings.ROCKETMQ_SECRET_KEY = credentials.secret_key if credentials else ""
    view = replication_view(cluster_access.admin_for(addr)).controller
    assert view is not None
    return view


def test_the_console_signs_its_controller_requests(acl_namesrv, settings):
    view = wait_until(
        lambda: not (v := _controller_view(acl_namesrv, settings, ADMIN)).error and v,
        timeout=30,
        interval=0.5,
        what="the embedded controller to lead, as the console sees it",
    )
    assert view.error == "", view.error
    assert view.metadata is not None and view.metadata.is_leader, view.metadata  # the one controller
    assert view.leader.endswith(f"({acl_namesrv})")  # answers for the group, itself its leader


def test_unsigned_the_controller_refuses_and_the_view_says_why(acl_namesrv, settings):
    """Unsigned (no account set), the group's state is refused and the page says so: the
    controller is the judge, not the console."""
    view = _controller_view(acl_namesrv, settings, None)
    assert view.sets == {}
    assert view.error.startswith("NO_PERMISSION (16): ") and "must be signed" in view.error
