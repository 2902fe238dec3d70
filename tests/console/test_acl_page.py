"""The ACL page (admins only): each broker's accounts, white list and version; create, update and
delete accounts and replace the white list on a real ACL-enabled cluster, every change audited
without its secret; refusals for other roles and bad input; a broker without ACL says so.
"""

from __future__ import annotations

import html
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from broker.client import SessionCredentials
from broker.client.admin import MQAdmin, MQClientError
from core import cluster_access
from core.models import AuditRecord
from tests.cluster import (
    CLI_CLUSTER,
    console_preset,
    create_user,
    logged_in_client,
    plain_acl,
    start_with_acl,
)
from tests.console.conftest import PASSWORD

pytestmark = pytest.mark.django_db

SECRET = "page-secret-42"


# -- every role but admin is refused ------------------------------------------------------------


@pytest.mark.parametrize("client_name", ["viewer_client", "operator_client"])
def test_other_roles_get_403_on_the_page_and_every_change(request, client_name):
    client = request.getfixturevalue(client_name)
    assert client.get("/acl/").status_code == 403
    for url in ("/acl/accounts/save", "/acl/accounts/delete", "/acl/white-list"):
        response = client.post(url, {"access_key": "someone1", "secret_key": SECRET, "cluster": "x"})
        assert response.status_code == 403
        assert "This action needs the admin role" in response.content.decode()
    records = AuditRecord.objects.all()
    assert {r.result for r in records} == {AuditRecord.RESULT_DENIED} and len(records) == 3
    assert all(SECRET not in str(r.parameters) for r in records)


def test_a_user_without_a_role_gets_403(client, django_user_model):
    client.force_login(create_user("nobody", None, "a long password 123"))
    assert client.get("/acl/").status_code == 403


def test_the_navigation_offers_the_page_to_admins_only(viewer_client, admin_client_, live_cluster):
    assert 'href="/acl/"' not in viewer_client.get("/audit/").content.decode()
    assert 'href="/acl/"' in admin_client_.get("/audit/").content.decode()


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"access_key": "short", "secret_key": SECRET}, "access_key: accessKey: must have at least 7"),
        ({"access_key": "page-user-1", "secret_key": "tiny"}, "secret_key: secretKey: must have at least 7"),
        ({"access_key": "page-user-1", "default_topic_perm": "ALL"}, "default_topic_perm: Select a valid"),
        ({"access_key": "page-user-1", "topic_perms": "orders=PUBLISH"}, "'PUBLISH' is not a permission"),
        ({"access_key": "page-user-1", "group_perms": "billing"}, "'billing' is not name=PERM"),
        (
            {"access_key": "page-user-1", "white_remote_address": "../../etc"},
            "is not an IP address or address pattern",
        ),
    ],
)
def test_bad_account_input_is_a_400_naming_the_field_and_is_audited_without_the_secret(
    admin_client_, live_cluster, fields, reason
):
    data = {"cluster": "AnyCluster", **fields}
    response = admin_client_.post("/acl/accounts/save", data)
    assert response.status_code == 400
    assert reason in html.unescape(response.content.decode())
    record = AuditRecord.objects.get()
    assert record.action == "acl.account.save" and record.result == AuditRecord.RESULT_FAILED
    assert SECRET not in str(record.parameters) and SECRET not in record.detail


def test_a_change_needs_a_cluster_or_a_broker(admin_client_, live_cluster):
    response = admin_client_.post("/acl/white-list", {"addresses": "10.0.0.*"})
    assert response.status_code == 400
    assert "choose a cluster or a broker" in response.content.decode()


# -- a broker running without ACL -----------------------------------------------------------------


def test_brokers_without_acl_say_acl_is_off_and_how_to_turn_it_on_with_no_forms(admin_client_, live_cluster):
    """The console cluster's brokers run without ACL (aclEnable=false): no red error, no account
    or white-list form the brokers would refuse, and what turns ACL on."""
    response = admin_client_.get("/acl/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "ACL is off" in page and "aclEnable=true" in page and "plain_acl.yml" in page
    assert page.count("ACL is off on this broker") == 2  # the two brokers of the console cluster
    assert live_cluster.broker_addr in page
    assert "alert-error" not in page and "No ACL answer" not in page
    assert "/acl/accounts/save" not in page and "/acl/white-list" not in page


# -- on an ACL-enabled cluster ------------------------------------------------------------------

ADMIN_KEY, ADMIN_SECRET = "console-admin-key", "console-admin-secret"
PLAIN_ACL = plain_acl(SessionCredentials(ADMIN_KEY, ADMIN_SECRET))
acl_admin_client = logged_in_client("acl-ada", "admin", PASSWORD)
acl_csrf_admin_client = logged_in_client("acl-carla", "admin", PASSWORD, enforce_csrf_checks=True)


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory):
    cluster = start_with_acl(console_preset(), tmp_path_factory.mktemp("acl-console"), PLAIN_ACL)
    yield cluster
    cluster_access.close_all()
    cluster.stop()


@pytest.fixture
def signed(acl_cluster, settings):
    """The console on the ACL cluster, signing with its admin account; an admin client of the same
    account for the tests' own checks."""
    settings.BROKER_NAMESRV = acl_cluster.namesrv_addr
    settings.ROCKETMQ_ACCESS_KEY, settings.ROCKETMQ_SECRET_KEY = ADMIN_KEY, ADMIN_SECRET
    with MQAdmin(acl_cluster.namesrv_addr, credentials=SessionCredentials(ADMIN_KEY, ADMIN_SECRET)) as admin:
        yield admin


def _accounts(admin, addr: str) -> dict:
    return {a.access_key: a for a in admin.acl_config(addr).accounts}


def _file_accounts(cluster, broker: str) -> dict:
    raw = yaml.safe_load((cluster.workdir / f"{broker}-plain_acl.yml").read_text())
    return {a["accessKey"]: a for a in raw.get("accounts") or []}


def test_an_admin_creates_an_account_on_the_cluster(signed, acl_cluster, acl_admin_client):
    fields = {
        "access_key": "page-app-key",
        "secret_key": SECRET,
        "white_remote_address": "192.168.1.*",
        "default_topic_perm": "DENY",
        "default_group_perm": "SUB",
        "topic_perms": "PageOrders=PUB|SUB\nPageAudit=SUB",
        "group_perms": "page-billing=SUB",
        "cluster": CLI_CLUSTER,
    }
    response = acl_admin_client.post("/acl/accounts/save", fields)
    assert response.status_code == 302
    for addr in signed.acl_targets(None, CLI_CLUSTER):
        account = _accounts(signed, addr)["page-app-key"]
        assert account.secret_key == SECRET and account.topic_perms == ["PageOrders=PUB|SUB", "PageAudit=SUB"]
        assert account.white_remote_address == "192.168.1.*" and account.default_group_perm == "SUB"
    for broker in console_preset().brokers:
        assert _file_accounts(acl_cluster, broker)["page-app-key"]["groupPerms"] == ["page-billing=SUB"]
    record = AuditRecord.objects.get(action="acl.account.save")
    assert record.result == AuditRecord.RESULT_OK and record.target == "page-app-key"
    assert record.parameters["secret_key"] == "******" and SECRET not in str(record.parameters)
    assert record.detail.count(": ok") == 2

    page = acl_admin_client.get("/acl/").content.decode()
    assert page.count("page-app-key") >= 2 and SECRET not in page and ADMIN_SECRET not in page
    assert "PageOrders=PUB|SUB" in page and "No ACL answer" not in page
    edit = acl_admin_client.get(f"/acl/?edit=page-app-key&broker={acl_cluster.broker_addr}").content.decode()
    assert 'value="page-app-key"' in edit and "PageAudit=SUB" in edit and SECRET not in edit


def test_saving_the_form_replaces_every_field_but_an_empty_secret(signed, acl_cluster, acl_admin_client):
    addr, key = acl_cluster.broker_addr, "page-edit-key"
    base = {"access_key": key, "default_topic_perm": "PUB", "default_group_perm": "SUB", "broker_addr": addr}
    acl_admin_client.post("/acl/accounts/save", {**base, "secret_key": SECRET, "topic_perms": "T=PUB"})
    response = acl_admin_client.post("/acl/accounts/save", {**base, "secret_key": "", "topic_perms": ""})
    assert response.status_code == 302
    account = _accounts(signed, addr)[key]
    assert account.secret_key == SECRET and account.topic_perms == []


def test_an_admin_deletes_an_account_and_a_missing_one_is_the_brokers_refusal(
    signed, acl_cluster, acl_admin_client
):
    addr, key = acl_cluster.broker_addr, "page-delete-key"
    perms = {"default_topic_perm": "DENY", "default_group_perm": "DENY"}
    acl_admin_client.post(
        "/acl/accounts/save", {"access_key": key, "secret_key": SECRET, "broker_addr": addr, **perms}
    )
    assert key in _accounts(signed, addr)
    assert (
        acl_admin_client.post("/acl/accounts/delete", {"access_key": key, "broker_addr": addr}).status_code
        == 302
    )
    assert key not in _accounts(signed, addr) and key not in _file_accounts(acl_cluster, "broker-a")

    response = acl_admin_client.post(
        "/acl/accounts/delete", {"access_key": key, "broker_addr": addr}, follow=True
    )
    assert "no ACL account for AccessKey" in html.unescape(response.content.decode())
    failed = AuditRecord.objects.filter(action="acl.account.delete").order_by("-id").first()
    assert failed is not None
    assert failed.result == AuditRecord.RESULT_FAILED and "no ACL account" in failed.detail


def test_an_admin_replaces_the_global_white_list(signed, acl_cluster, acl_admin_client):
    response = acl_admin_client.post(
        "/acl/white-list", {"addresses": "10.10.103.*\n192.168.0.*", "cluster": CLI_CLUSTER}
    )
    assert response.status_code == 302
    for addr in signed.acl_targets(None, CLI_CLUSTER):
        assert signed.acl_config(addr).global_white_addrs == ["10.10.103.*", "192.168.0.*"]
    assert "10.10.103.*" in acl_admin_client.get("/acl/").content.decode()
    acl_admin_client.post("/acl/white-list", {"addresses": "", "cluster": CLI_CLUSTER})
    assert signed.acl_config(acl_cluster.broker_addr).global_white_addrs == []


def test_an_admin_saves_and_deletes_an_account_from_the_command_line(signed, acl_cluster):
    """``manage.py console_command`` parses the page's form: the same change, the same one record."""
    create_user("acl-cli-ada", "admin", PASSWORD)
    fields = {
        "access_key": "cli-app-key",
        "secret_key": SECRET,
        "default_topic_perm": "DENY",
        "default_group_perm": "SUB",
        "topic_perms": "CliOrders=PUB",
        "cluster": CLI_CLUSTER,
    }
    sets = [arg for name, value in fields.items() for arg in ("--set", f"{name}={value}")]
    out = StringIO()
    call_command("console_command", "acl.account.save", "--user", "acl-cli-ada", *sets, stdout=out)
    for addr in signed.acl_targets(None, CLI_CLUSTER):
        account = _accounts(signed, addr)["cli-app-key"]
        assert account.secret_key == SECRET and account.topic_perms == ["CliOrders=PUB"]
    record = AuditRecord.objects.get(action="acl.account.save")
    assert (record.result, record.target, record.username) == ("ok", "cli-app-key", "acl-cli-ada")
    assert record.parameters["secret_key"] == "******" and SECRET not in out.getvalue()
    assert out.getvalue().strip() == record.detail and record.detail.count(": ok") == 2

    delete = ["acl.account.delete", "--user", "acl-cli-ada", "--set", "access_key=cli-app-key"]
    call_command("console_command", *delete, "--set", f"cluster={CLI_CLUSTER}", stdout=StringIO())
    assert all("cli-app-key" not in _accounts(signed, a) for a in signed.acl_targets(None, CLI_CLUSTER))
    addr = acl_cluster.broker_addr
    with pytest.raises(CommandError, match=r"acl\.account\.delete failed: .*no ACL account for AccessKey"):
        call_command("console_command", *delete, "--set", f"broker_addr={addr}", stdout=StringIO())
    results = [r.result for r in AuditRecord.objects.filter(action="acl.account.delete").order_by("id")]
    assert results == ["ok", "failed"]


def test_a_post_without_the_csrf_token_changes_nothing(signed, acl_cluster, acl_csrf_admin_client):
    response = acl_csrf_admin_client.post(
        "/acl/accounts/save",
        {"access_key": "page-csrf-key", "secret_key": SECRET, "cluster": CLI_CLUSTER,
         "default_topic_perm": "DENY", "default_group_perm": "DENY"},
    )  # fmt: skip
    assert response.status_code == 403
    assert "page-csrf-key" not in _accounts(signed, acl_cluster.broker_addr)


def test_without_credentials_the_page_shows_the_brokers_refusal(acl_cluster, settings, acl_admin_client):
    settings.BROKER_NAMESRV = acl_cluster.namesrv_addr
    settings.ROCKETMQ_ACCESS_KEY = settings.ROCKETMQ_SECRET_KEY = ""
    page = html.unescape(acl_admin_client.get("/acl/").content.decode())
    assert page.count("No ACL answer from this broker") == 2
    assert "NO_PERMISSION (16)" in page and "no AccessKey" in page


def test_the_consoles_producer_and_live_tail_reader_sign_with_its_account(signed, acl_cluster):
    """What the Celery tasks (DLQ replays, through cluster_access) and the live tail use."""
    from broker.common.message import Message
    from broker.local_cluster import wait_until
    from console.tail import pump

    account = SessionCredentials(ADMIN_KEY, ADMIN_SECRET)
    signed.create_or_update_topic(acl_cluster.broker_addr, "PageSigned", 2, 2)
    producer = cluster_access.producer_for(acl_cluster.namesrv_addr)
    assert producer.credentials == account

    def sent():
        try:
            return producer.send(Message("PageSigned", b"signed by the console"))
        except MQClientError as exc:
            assert "NO_PERMISSION" not in str(exc), exc
            return None  # the route is not there yet

    assert wait_until(sent, timeout=20, what="a send of the console's producer").send_status == "SEND_OK"
    reader = pump._reader(acl_cluster.namesrv_addr, pump.TailSettings())
    assert reader.consumer.credentials == account
