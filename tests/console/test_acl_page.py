"""The ACL page (admins only): each broker's accounts, white list and version; create, update and
delete accounts and replace the white list on a real ACL-enabled cluster, every change audited
without its secret; refusals for other roles and bad input; a broker without ACL says so.
"""

from __future__ import annotations

import html

import pytest

from console.models import AuditRecord

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
    from tests.cluster import create_user

    client.force_login(create_user("nobody", None, "a long password 123"))
    assert client.get("/acl/").status_code == 403


def test_the_navigation_offers_the_page_to_admins_only(viewer_client, admin_client_, live_cluster):
    assert 'href="/acl/"' not in viewer_client.get("/audit/").content.decode()
    assert 'href="/acl/"' in admin_client_.get("/audit/").content.decode()


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"access_key": "short", "secret_key": SECRET}, "access_key: an access key is 7 to"),
        ({"access_key": "page-user-1", "secret_key": "tiny"}, "secret_key: a secret key is 7 to"),
        ({"access_key": "page-user-1", "default_topic_perm": "ALL"}, "default_topic_perm: Select a valid"),
        ({"access_key": "page-user-1", "topic_perms": "orders=PUBLISH"}, "'PUBLISH' is not a permission"),
        ({"access_key": "page-user-1", "group_perms": "billing"}, "'billing' is not name=PERM"),
        ({"access_key": "page-user-1", "white_remote_address": "../../etc"}, "is not an address pattern"),
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


def test_a_broker_without_acl_says_so_on_the_page(admin_client_, live_cluster):
    response = admin_client_.get("/acl/")
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count("No ACL answer from this broker") == 2  # the two brokers of the console cluster
    assert live_cluster.broker_addr in page
