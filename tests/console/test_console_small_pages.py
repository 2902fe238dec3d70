"""Issue 32 item 7, the console's small pages: /admin/ in the staff users' navigation, the ACL page
of brokers running without ACL, system topics offered no Send or Delete (and refused by the server),
the reset-offset form's default topic."""

from __future__ import annotations

import pytest

from tests.cluster import create_user
from tests.console.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def _nav(html: str) -> str:
    return html.split('class="mainnav"')[1].split("</nav>")[0]


def test_django_admin_is_in_the_navigation_of_staff_users_only(client, admin_client_, live_cluster):
    assert 'href="/admin/"' not in _nav(admin_client_.get("/audit/").content.decode())
    staff = create_user("stella", "admin", PASSWORD)
    staff.is_staff = True
    staff.save()
    client.force_login(staff)
    assert 'href="/admin/"' in _nav(client.get("/audit/").content.decode())
