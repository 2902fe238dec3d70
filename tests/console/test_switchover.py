"""The cluster page with RocketMQ 5's controller mode (issue 22): a real controller process, broker
sets registered on it by hand through ``ControllerClient`` (apply an id, register, heartbeat), and
for each replica a remoting server standing for its broker (it answers GET_BROKER_EPOCH_CACHE and
takes the controller's role-change notification), as tests/controller does.

Checked: the controller leader, each set's master, master epoch, in-sync set and the replicas out of
it with their alive flags, the epoch history of the set's master; the switchover (admins only,
CSRF, a confirmation step, audited with who, set, from -> to and result), the controller's
refusals shown as messages, bad input refused with a reason; no controller (static master/slave)
and a controller that does not answer as states of a page that still works.
"""

from __future__ import annotations

import itertools
import re
import time

import pytest
from django.test import Client

from broker.local_cluster import free_port, wait_until
from core import cluster_access
from core.models import AuditRecord
from tests.cluster import create_user
from tests.console.conftest import PASSWORD
from tests.console.controller_sets import running_controller, three_replicas
from tests.controller.wire import ControllerGroup, Wire

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(180)]

_names = itertools.count(1)


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    """One controller process; its remoting address."""
    with running_controller(tmp_path_factory.mktemp("console-controller")) as group:
        yield group.listen["n0"]


@pytest.fixture
def hand_set(controller, settings):
    """A set of three on the controller: 1 the master, 1 and 2 in sync and alive, 3 silent."""
    settings.CONSOLE_CONTROLLER_ADDR = controller
    replicas = three_replicas([controller], f"hand-{next(_names)}")
    yield replicas
    replicas.stop()


def _client(role: str, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(create_user(f"{role}-{next(_names)}", role, PASSWORD))
    return client


@pytest.fixture
def page_clients(live_cluster, settings):
    settings.BROKER_NAMESRV = live_cluster.namesrv_addr
    return {role: _client(role) for role in ("viewer", "operator", "admin")}


def _set_block(html: str, name: str) -> str:
    return html.split(f'data-broker-set="{name}"', 1)[1].split('class="broker-set"', 1)[0]


def _flash(response) -> str:
    return " ".join(str(m) for m in response.wsgi_request._messages)


# -- the page -------------------------------------------------------------------------------------


def test_without_a_controller_the_section_says_failover_is_not_configured(page_clients, settings):
    settings.CONSOLE_CONTROLLER_ADDR = ""  # and the live cluster's brokers do not run in controller mode
    html = page_clients["viewer"].get("/cluster/").content.decode()
    assert 'data-controller="none"' in html and "Automatic failover is not configured" in html
    assert "static master/slave" in html
    assert "data-controller-set" not in html and "switchover" not in html.lower().split("<h2>replication")[-1]


def test_the_page_shows_the_controllers_view_of_each_set(page_clients, hand_set, controller):
    html = page_clients["viewer"].get("/cluster/").content.decode()
    assert 'data-controller="ok"' in html
    assert re.search(r'class="controller-leader">n0 \(' + re.escape(controller) + r"\)<", html), html
    block = _set_block(html, hand_set.name)
    # Known to the controller only: none of these brokers is on the name server.
    assert "only the controller knows this set" in block
    assert 'data-master-epoch="1"' in block and 'data-master-id="1"' in block
    assert f"broker 1 <code>{hand_set.addrs[1]}</code>" in block
    in_sync = block.split('class="in-sync-set"', 1)[1].split("</p>", 1)[0]
    assert re.findall(r'data-replica="(\d+)" data-alive="(\w+)"', in_sync) == [("1", "true"), ("2", "true")]
    assert hand_set.addrs[1] in in_sync and hand_set.addrs[2] in in_sync
    others = block.split('class="not-in-sync"', 1)[1].split("</p>", 1)[0]
    assert re.findall(r'data-replica="(\d+)" data-alive="(\w+)"', others) == [("3", "false")]
    assert hand_set.addrs[3] in others and "not alive" in others
    # The history is the master's epoch cache, as its broker answered it.
    history = block.split('class="epoch-history"', 1)[1]
    assert re.search(r'<tr data-epoch="1" data-start="0">', history), history
    assert "current" in history and f"from {hand_set.addrs[1]}'s epoch cache" in history
    # A viewer is offered no switchover; an admin is, for every replica but the master.
    assert "switchover" not in block
    admin_block = _set_block(page_clients["admin"].get("/cluster/").content.decode(), hand_set.name)
    assert re.findall(r'data-target="(\d+)"', admin_block) == ["2", "3"]
    assert f'href="/cluster/switchover/{hand_set.name}/2/"' in admin_block
    operator_block = _set_block(page_clients["operator"].get("/cluster/").content.decode(), hand_set.name)
    assert "data-target" not in operator_block
    # The section's own refresh carries the controller's view too.
    part = page_clients["viewer"].get("/cluster/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="replication")
    assert 'data-controller="ok"' in part.content.decode() and "<html" not in part.content.decode()


def test_viewers_and_operators_may_not_switch_over(page_clients, hand_set):
    for role in ("viewer", "operator"):
        client = page_clients[role]
        confirm = client.get(f"/cluster/switchover/{hand_set.name}/2/")
        assert confirm.status_code == 403 and "This action needs the admin role" in confirm.content.decode()
        posted = client.post(
            f"/cluster/switchover/{hand_set.name}/", {"broker_id": "2", "master_epoch": "1", "confirm": "yes"}
        )
        assert posted.status_code == 403 and "This action needs the admin role" in posted.content.decode()
    denied = AuditRecord.objects.filter(action="broker.switchover")
    assert [r.result for r in denied] == [AuditRecord.RESULT_DENIED] * 2
    assert hand_set.replicas().master_id == 1  # nothing changed


def test_an_admin_switches_over_after_confirming_and_it_is_audited(live_cluster, settings, hand_set):
    settings.BROKER_NAMESRV = live_cluster.namesrv_addr
    admin = _client("admin", csrf=True)
    confirm = admin.get(f"/cluster/switchover/{hand_set.name}/2/")
    html = confirm.content.decode()
    assert confirm.status_code == 200
    assert f"<strong>broker 2</strong> (<code>{hand_set.addrs[2]}</code>)" in html
    assert f"broker 1 (<code>{hand_set.addrs[1]}</code>, epoch 1)" in html
    assert "switchover-doubts" not in html  # in sync and alive: nothing to warn about
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', html))
    token = fields.pop("csrfmiddlewaretoken")
    assert fields == {"broker_id": "2", "master_epoch": "1", "confirm": "yes"}
    assert hand_set.replicas().master_id == 1  # the confirmation changed nothing

    without_token = admin.post(f"/cluster/switchover/{hand_set.name}/", fields)
    assert without_token.status_code == 403 and hand_set.replicas().master_id == 1

    done = admin.post(f"/cluster/switchover/{hand_set.name}/", {**fields, "csrfmiddlewaretoken": token})
    assert done.status_code == 302 and done["Location"] == "/cluster/"
    after = hand_set.replicas()
    assert (after.master_id, after.master_epoch, after.master_address) == (2, 2, hand_set.addrs[2])
    assert f"Broker 2 ({hand_set.addrs[2]}) is the master of {hand_set.name} at epoch 2" in _flash(done)
    record = AuditRecord.objects.get(action="broker.switchover")
    assert record.result == AuditRecord.RESULT_OK and record.target == hand_set.name
    assert record.username.startswith("admin-")
    assert record.parameters["from"] == f"1 ({hand_set.addrs[1]})"
    assert record.parameters["to"] == f"2 ({hand_set.addrs[2]})"
    assert record.parameters["master_epoch"] == 1
    assert "is the master" in record.detail
    # The controller told the brokers; the page shows the new master.
    wait_until(lambda: any(n.get("masterBrokerId") == "2" for n in hand_set.notified), what="notification")
    block = _set_block(admin.get("/cluster/").content.decode(), hand_set.name)
    assert 'data-master-id="2"' in block and 'data-master-epoch="2"' in block


def _post_switch(client, name: str, broker_id: str, epoch: str = "1", **extra):
    return client.post(
        f"/cluster/switchover/{name}/",
        {"broker_id": broker_id, "master_epoch": epoch, "confirm": "yes", **extra},
    )


def test_the_controllers_refusals_are_shown_and_audited(page_clients, hand_set):
    admin = page_clients["admin"]
    # Not in the in-sync set: the confirmation warns, the controller refuses.
    confirm = admin.get(f"/cluster/switchover/{hand_set.name}/3/").content.decode()
    assert "The controller will most likely refuse" in confirm and "not in the in-sync set" in confirm
    assert "not alive" in confirm
    refused = _post_switch(admin, hand_set.name, "3")
    assert refused.status_code == 302
    message = _flash(refused)
    assert "refused by the controller" in message and "CONTROLLER_ELECT_MASTER_FAILED" in message
    assert "not in the sync state set" in message
    # The master itself: RocketMQ's CONTROLLER_MASTER_STILL_EXIST.
    still = _flash(_post_switch(admin, hand_set.name, "1"))
    assert "CONTROLLER_MASTER_STILL_EXIST" in still
    # In sync but silent: not alive.
    hand_set.beating.discard(2)
    wait_until(
        lambda: not next(r.alive for r in hand_set.replicas().in_sync if r.broker_id == 2),
        timeout=30,
        interval=0.1,
        what="broker 2 no longer alive",
    )
    dead = _flash(_post_switch(admin, hand_set.name, "2"))
    assert "CONTROLLER_BROKER_NOT_ALIVE" in dead and "not alive" in dead
    # The master changed since the confirmation: nothing is asked of the controller.
    stale = _flash(_post_switch(admin, hand_set.name, "2", epoch="7"))
    assert "changed since the confirmation (epoch 7 then, 1 now" in stale
    records = list(AuditRecord.objects.filter(action="broker.switchover").order_by("pk"))
    assert [r.result for r in records] == [AuditRecord.RESULT_FAILED] * 4
    assert "CONTROLLER_ELECT_MASTER_FAILED" in records[0].detail and records[0].parameters["to"].startswith(
        "3 ("
    )
    assert hand_set.replicas().master_id == 1 and hand_set.replicas().master_epoch == 1


def test_bad_input_is_refused_with_a_reason(page_clients, hand_set):
    admin = page_clients["admin"]
    unknown = _post_switch(admin, "no-such-set", "2")
    assert unknown.status_code == 404 and "knows no broker set" in unknown.content.decode()
    no_replica = _post_switch(admin, hand_set.name, "9")
    assert no_replica.status_code == 404 and "has no replica with broker id 9" in no_replica.content.decode()
    for bad in ("two", "-1", "", "99999999999"):
        response = _post_switch(admin, hand_set.name, bad)
        assert response.status_code == 400, bad
        assert "broker_id must be a broker id" in response.content.decode()
    unconfirmed = admin.post(f"/cluster/switchover/{hand_set.name}/", {"broker_id": "2", "master_epoch": "1"})
    assert unconfirmed.status_code == 400 and "must be confirmed" in unconfirmed.content.decode()
    assert admin.get(f"/cluster/switchover/{hand_set.name}/9/").status_code == 404
    assert admin.get(f"/cluster/switchover/{hand_set.name}/x/").status_code == 404
    records = AuditRecord.objects.filter(action="broker.switchover")
    assert records.count() == 7 and {r.result for r in records} == {AuditRecord.RESULT_FAILED}
    assert hand_set.replicas().master_id == 1


def test_a_controller_that_does_not_answer_leaves_the_page_working(page_clients, settings, live_cluster):
    nobody = f"127.0.0.1:{free_port()}"  # nothing listens there
    settings.CONSOLE_CONTROLLER_ADDR = nobody
    response = page_clients["viewer"].get("/cluster/")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-controller="error"' in html and "controller unavailable" in html and nobody in html
    # The rest of the page: the name server's brokers with their own figures.
    for broker in live_cluster.brokers.values():
        assert broker.addr in html
    assert "<h2>Broker TPS</h2>" in html and 'data-broker-id="0"' in html
    confirm = page_clients["admin"].get("/cluster/switchover/any-set/1/")
    assert confirm.status_code == 503 and "Controller unavailable" in confirm.content.decode()


def test_a_frozen_controller_costs_the_page_a_bounded_wait(page_clients, settings, tmp_path):
    group = ControllerGroup(tmp_path, size=1)
    group.start()
    try:
        settings.CONSOLE_CONTROLLER_ADDR = group.listen["n0"]
        wait_until(
            lambda: 'data-controller="ok"' in page_clients["viewer"].get("/cluster/").content.decode(),
            timeout=30,
            what="the controller answering the page",
        )
        group.pause("n0")
        began = time.monotonic()
        html = page_clients["viewer"].get("/cluster/").content.decode()
        waited = time.monotonic() - began
        state = re.search(r"<p class=\"controller-state.*?</p>", html, re.S).group(0)
        # The first request's own timeout (3 s) or the section's limit (4 s), whichever ends first.
        assert 'data-controller="error"' in state and re.search(r"no (answer|response)", state), state
        assert waited < 20, waited
    finally:
        group.stop()
        cluster_access.close_all()


def test_three_controllers_with_one_frozen_still_answer_the_page_and_a_switchover(
    page_clients, settings, tmp_path
):
    """A group of three whose one follower is frozen (SIGSTOP): the page names the leader, shows
    the frozen one as not answering and the set as the leader has it; a switchover goes through."""
    group = ControllerGroup(tmp_path, size=3)
    group.start()
    wire = Wire(group)
    hand = None
    try:
        leader = wait_until(wire.leader, timeout=30, what="a controller leader")
        addresses = [group.listen[pid] for pid in sorted(group.listen)]
        settings.CONSOLE_CONTROLLER_ADDR = ";".join(addresses)
        hand = three_replicas(addresses, f"trio-{next(_names)}")
        follower = next(pid for pid in sorted(group.listen) if pid != leader)
        group.pause(follower)
        began = time.monotonic()
        html = page_clients["admin"].get("/cluster/").content.decode()
        waited = time.monotonic() - began
        state = re.search(r'<p class="controller-state.*?</p>', html, re.S).group(0)
        assert 'data-controller="ok"' in state, state
        assert f'class="controller-leader">{leader} ({group.listen[leader]})<' in state
        assert f'data-address="{group.listen[follower]}" data-answered="false"' in state
        assert f'data-address="{group.listen[leader]}" data-answered="true"' in state
        assert 'data-master-id="1"' in _set_block(html, hand.name)
        assert waited < 20, waited
        done = _post_switch(page_clients["admin"], hand.name, "2")
        assert "is the master of" in _flash(done), _flash(done)
        assert hand.replicas().master_id == 2
    finally:
        if hand is not None:
            hand.stop()
        wire.close()
        group.stop()


# -- real brokers in controller mode ---------------------------------------------------------------


def _rows_of(html: str, name: str) -> dict[str, str]:
    """The set's member rows by controller id."""
    block = _set_block(html, name).split('class="replication"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr data-broker-id=.*?</tr>", block, re.S)
    return {
        re.search(r'data-controller-id="(\d+)"', row).group(1): row
        for row in rows
        if "data-controller-id" in row
    }


def test_real_controller_mode_brokers_shown_and_switched_over(tmp_path, settings):
    """Two brokers with enableControllerMode: the console finds the controller through their
    controllerAddr, shows each broker's controller id, in-sync flag and epoch as the brokers and
    the controller report them, and a switchover from the console makes the other broker master
    (both brokers change role; the history gains the new epoch at the offset the log had)."""
    from tests.integration.test_controller_mode import SET, ControllerCluster

    ctl = ControllerCluster(tmp_path)
    try:
        ctl.add("b1")
        wait_until(lambda: ctl.role("b1") == "SYNC_MASTER", timeout=30, what="b1 master")
        ctl.add("b2")
        wait_until(lambda: ctl.runtime("b1").get("syncStateSet") == "1,2", timeout=30, what="b2 in sync")
        settings.BROKER_NAMESRV = ctl.cluster.namesrv_addr
        settings.CONSOLE_CONTROLLER_ADDR = ""  # found through the brokers' controllerAddr
        admin = _client("admin")

        def page_with_both() -> str | None:
            html = admin.get("/cluster/").content.decode()
            return html if set(_rows_of(html, SET)) == {"1", "2"} else None

        html = wait_until(page_with_both, timeout=30, interval=0.3, what="both brokers on the page")
        both = ", ".join(sorted([ctl.addr("b1"), ctl.addr("b2")]))
        assert f"(from controllerAddr of broker {both})" in html
        assert f'leader <strong class="controller-leader">n0 ({ctl.controller_addr})' in html
        rows = _rows_of(html, SET)
        assert 'data-role="SYNC_MASTER"' in rows["1"] and ctl.addr("b1") in rows["1"]
        assert 'data-role="SLAVE"' in rows["2"] and ctl.addr("b2") in rows["2"]
        for cid in ("1", "2"):
            assert "in sync</span>" in rows[cid] and 'data-epoch="1"' in rows[cid]
        b1_epochs = ctl.epochs("b1")
        assert [e.epoch for e in b1_epochs.epoch_list] == [1]

        confirm = admin.get(f"/cluster/switchover/{SET}/2/").content.decode()
        assert "switchover-doubts" not in confirm
        done = _post_switch(admin, SET, "2")
        assert done.status_code == 302 and "is the master of" in _flash(done), _flash(done)
        wait_until(
            lambda: ctl.role("b2") == "SYNC_MASTER" and ctl.role("b1") == "SLAVE",
            timeout=30,
            what="roles swapped",
        )
        b2_epochs = ctl.epochs("b2")
        assert [e.epoch for e in b2_epochs.epoch_list] == [1, 2]
        takeover = b2_epochs.epoch_list[1].start_offset

        def switched_page() -> str | None:
            html = admin.get("/cluster/").content.decode()
            rows = _rows_of(html, SET)
            ok = 'data-role="SYNC_MASTER"' in rows.get("2", "") and 'data-role="SLAVE"' in rows.get("1", "")
            return html if ok and 'data-epoch="2"' in rows.get("1", "") else None

        html = wait_until(switched_page, timeout=30, interval=0.3, what="the page after the switchover")
        block = _set_block(html, SET)
        assert 'data-master-id="2"' in block and 'data-master-epoch="2"' in block
        history = block.split('class="epoch-history"', 1)[1]
        assert f'<tr data-epoch="2" data-start="{takeover}">' in history
        assert f'<tr data-epoch="1" data-start="0" data-end="{takeover}">' in history
        record = AuditRecord.objects.get(action="broker.switchover")
        assert record.result == AuditRecord.RESULT_OK
        assert (
            record.parameters["from"] == f"1 ({ctl.addr('b1')})"
            and record.parameters["to"] == f"2 ({ctl.addr('b2')})"
        )
    finally:
        cluster_access.close_all()
        ctl.stop()
