"""W17 (acceptance 3): the Prometheus rule file generated from the console's alert rules parses as
YAML and passes Prometheus' rule-file schema (and ``promtool check rules`` when Prometheus' tools
are installed); the Grafana dashboard JSON is a dashboard model; every metric either names exists in
a real scrape of ``/metrics`` (a real cluster, the console's test client); the README documents
every family of that scrape."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from alerts.models import AlertRule
from alerts.prometheus_rules import glob_regex, prometheus_rules, rules_yaml
from console.export.grafana_dashboard import dashboard, panel_exprs

pytestmark = pytest.mark.django_db

README = Path(__file__).resolve().parents[2] / "README.md"
METRIC_NAME = re.compile(r"\brocketmq_[a-z_]+\b")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# Prometheus' duration syntax (model.ParseDuration): units largest first, each at most once.
DURATION = re.compile(r"^(?!$)(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
GROUP_KEYS = {"name", "interval", "limit", "query_offset", "rules"}
RULE_KEYS = {"record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations"}


def scrape_names(client) -> tuple[set[str], set[str]]:
    """(families, the names a PromQL selector can use) of one real scrape: a counter family
    ``x`` is selected as ``x_total``."""
    response = client.get("/metrics")
    assert response.status_code == 200
    families, selectable = set(), set()
    for family in text_string_to_metric_families(response.content.decode()):
        families.add(family.name)
        selectable.add(family.name + "_total" if family.type == "counter" else family.name)
    assert "rocketmq_broker_up" in families
    return families, selectable


def rule_file_problems(document) -> list[str]:
    """Prometheus' rule-file schema (rulefmt): groups with a unique name and rules; each rule an
    alert or a record with an expression, a duration for ``for``, string labels and annotations
    under valid label names."""
    problems: list[str] = []
    if (
        not isinstance(document, dict)
        or set(document) != {"groups"}
        or not isinstance(document["groups"], list)
    ):
        return ["the file must be a mapping with one key, groups (a list)"]
    names = set()
    for group in document["groups"]:
        if not isinstance(group, dict) or set(group) - GROUP_KEYS:
            problems.append(f"group {group!r}: unknown keys")
            continue
        name = group.get("name")
        if not isinstance(name, str) or not name or name in names:
            problems.append(f"group name {name!r} missing or repeated")
        names.add(name)
        if "interval" in group and not DURATION.match(str(group["interval"])):
            problems.append(f"group {name}: interval {group['interval']!r}")
        for rule in group.get("rules") or []:
            problems.extend(f"group {name}: {p}" for p in _rule_problems(rule))
    return problems


def _rule_problems(rule) -> list[str]:
    if not isinstance(rule, dict) or set(rule) - RULE_KEYS:
        return [f"rule {rule!r}: not a mapping of {sorted(RULE_KEYS)}"]
    problems = []
    if ("alert" in rule) == ("record" in rule):
        problems.append(f"{rule}: exactly one of alert and record")
    title = rule.get("alert") or rule.get("record")
    if not isinstance(title, str) or not title:
        problems.append(f"{rule}: empty alert/record name")
    if "record" in rule and ("for" in rule or "annotations" in rule):
        problems.append(f"{title}: a recording rule has no for or annotations")
    if not isinstance(rule.get("expr"), str) or not rule["expr"].strip():
        problems.append(f"{title}: expr must be a non-empty string")
    for key in ("for", "keep_firing_for"):
        if key in rule and not (isinstance(rule[key], str) and DURATION.match(rule[key])):
            problems.append(f"{title}: {key} {rule[key]!r} is not a duration")
    for key in ("labels", "annotations"):
        for name, value in (rule.get(key) or {}).items():
            if not isinstance(name, str) or not LABEL_NAME.match(name) or name == "__name__":
                problems.append(f"{title}: {key} name {name!r}")
            if not isinstance(value, str):
                problems.append(f"{title}: {key} {name} value {value!r} is not a string")
    return problems


def _promtool_check(tmp_path: Path, text: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:  # Debian's prometheus package; the schema check above still ran
        return
    path = tmp_path / "rules.yml"
    path.write_text(text)
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_the_validator_refuses_what_prometheus_refuses():
    assert (
        rule_file_problems({"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up", "for": "5m"}]}]})
        == []
    )
    bad = [
        {"group": []},
        {"groups": [{"name": "g", "rules": [{"alert": "A", "record": "b", "expr": "up"}]}]},
        {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": ""}]}]},
        {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up", "for": "5 minutes"}]}]},
        {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up", "labels": {"bad-name": "x"}}]}]},
        {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up", "labels": {"n": 5}}]}]},
        {"groups": [{"name": "g", "rules": []}, {"name": "g", "rules": []}]},
    ]
    for document in bad:
        assert rule_file_problems(document), document


def test_the_default_rules_become_a_valid_prometheus_rule_file(viewer_client, live_cluster, tmp_path):
    from alerts.models import AlertRule

    response = viewer_client.get("/export/prometheus-rules.yml")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="pyrocket-alert-rules.yml"'
    text = response.content.decode()
    document = yaml.safe_load(text)
    assert rule_file_problems(document) == []
    [group] = document["groups"]
    by_rule = {r["labels"]["console_rule"]: r for r in group["rules"]}
    # Every default rule (the data migration's) has a Prometheus equivalent.
    assert set(by_rule) == set(AlertRule.objects.values_list("name", flat=True)) and len(by_rule) == 10
    assert by_rule["Broker down"]["expr"] == "rocketmq_broker_up == 0"
    assert by_rule["Broker down"]["for"] == "1m"  # not heard from for 60 s, then firing at once
    assert by_rule["Consumer group lag"] == {
        "alert": "PyrocketConsumerGroupLag",
        "expr": "rocketmq_group_lag > 10000",
        "for": "5m",
        "labels": {"severity": "warning", "console_rule": "Consumer group lag", "kind": "group_lag"},
        "annotations": {
            "summary": "Consumer group lag: group {{ $labels.group }} at {{ $value }}",
            "description": "Consumer group lag above 10,000 (messages behind), for 5 min. "
            "Consumers do not keep up with the producers.",
            "scope": "everything",
        },
    }
    # Measured as the console does (tests/alerts/test_change_alert_window.py says why).
    assert by_rule["Dead letters arriving"]["expr"].startswith("sum_over_time(clamp_min(last_over_time(")
    assert by_rule["Disk almost full"]["labels"]["severity"] == "critical"
    _, selectable = scrape_names(viewer_client)
    for rule in group["rules"]:
        named = set(METRIC_NAME.findall(rule["expr"]))
        assert named and named <= selectable, (rule["alert"], named - selectable)
    _promtool_check(tmp_path, text)


def test_scopes_become_label_matchers_and_what_cannot_be_said_is_a_comment(live_cluster, tmp_path):
    from alerts.models import AlertRule

    AlertRule.objects.all().delete()
    make = AlertRule.objects.create
    make(name="Orders lag!", kind="group_lag", threshold=5, for_minutes=2, group_pattern="orders-*")
    make(name="dotted", kind="consume_stalled", threshold=0, group_pattern="a.b|c?")
    make(name="one member", kind="disk_ratio", threshold=0.5, broker_pattern="broker-a:0")
    make(name="names only", kind="request_wait", threshold=50, broker_pattern="broker-*")
    make(name="half of a", kind="half_messages", threshold=10, broker_pattern="broker-a:*", for_minutes=0)
    make(name="other cluster", kind="group_lag", threshold=1, cluster_pattern="10.9.9.9:*")
    make(name="this cluster", kind="group_lag", threshold=1, cluster_pattern="*")
    make(name="switched off", kind="group_lag", threshold=1, enabled=False)
    make(name="topic on a group rule", kind="group_lag", threshold=1, topic_pattern="T*")
    make(name="slave half", kind="half_messages", threshold=1, broker_pattern="broker-a:1")
    outcome = prometheus_rules(AlertRule.objects.order_by("name"))
    exprs = {r["labels"]["console_rule"]: (r["alert"], r["expr"], r["for"]) for r in outcome.rules}
    assert exprs == {
        "Orders lag!": ("PyrocketOrdersLag", 'rocketmq_group_lag{group=~"orders-.*"} > 5', "2m"),
        "dotted": (
            "PyrocketDotted",
            'rocketmq_group_lag{group=~"a\\\\.b\\\\|c."} > 0 and on(group) '
            'rocketmq_group_consume_tps{group=~"a\\\\.b\\\\|c."} <= 0',
            "5m",
        ),
        "one member": (
            "PyrocketOneMember",
            'rocketmq_broker_commitlog_disk_ratio{broker=~"broker-a", broker_id=~"0"} > 0.5',
            "5m",
        ),
        "names only": (
            "PyrocketNamesOnly",
            'rocketmq_broker_request_wait_ms{broker=~"broker-.*"} > 50',
            "5m",
        ),
        "half of a": ("PyrocketHalfOfA", 'rocketmq_broker_half_messages{broker=~"broker-a"} > 10', "0m"),
        "this cluster": ("PyrocketThisCluster", "rocketmq_group_lag > 1", "5m"),
    }
    skipped = dict(outcome.skipped)
    assert set(skipped) == {"other cluster", "switched off", "topic on a group rule", "slave half"}
    assert "no name-server label" in skipped["other cluster"]
    assert skipped["switched off"] == "disabled in the console"
    assert "never fires in the console either" in skipped["topic on a group rule"]
    assert "only masters" in skipped["slave half"]
    text = rules_yaml()
    assert rule_file_problems(yaml.safe_load(text)) == []
    assert "#   other cluster: its cluster pattern '10.9.9.9:*' picks name servers" in text
    _promtool_check(tmp_path, text)


def test_a_scope_glob_is_a_literal_regex_but_for_its_wildcards():
    assert glob_regex("%DLQ%a.b|c-d:*?") == "%DLQ%a\\.b\\|c-d:.*."
    assert re.fullmatch(glob_regex("a.b*"), "a.bcd") and not re.fullmatch(glob_regex("a.b*"), "axbcd")


def test_the_grafana_dashboard_is_a_dashboard_model_over_real_metrics(viewer_client, live_cluster):
    response = viewer_client.get("/export/grafana-dashboard.json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "attachment" in response["Content-Disposition"]
    model = json.loads(response.content)
    assert model["title"] and model["uid"] == "pyrocket-console"
    assert isinstance(model["schemaVersion"], int) and model["schemaVersion"] >= 36
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert set(variables) == {"datasource", "cluster", "broker", "topic", "group"}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    ids, cells = set(), set()
    for panel in model["panels"]:
        assert isinstance(panel["id"], int) and panel["id"] not in ids
        ids.add(panel["id"])
        assert panel["type"] in {"row", "stat", "timeseries", "gauge"} and panel["title"]
        pos = panel["gridPos"]
        assert {"h", "w", "x", "y"} <= set(pos) and pos["x"] + pos["w"] <= 24
        covered = {(pos["x"] + dx, pos["y"] + dy) for dx in range(pos["w"]) for dy in range(pos["h"])}
        assert not covered & cells, f"panel {panel['title']} overlaps another"
        cells |= covered
        if panel["type"] != "row":
            assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}"
            assert all(t["refId"] and t["expr"] for t in panel["targets"])
    _, selectable = scrape_names(viewer_client)
    used = {name for _, expr in panel_exprs(model) for name in METRIC_NAME.findall(expr)}
    used |= {
        n for v in variables.values() if v["type"] == "query" for n in METRIC_NAME.findall(v["definition"])
    }
    assert used and used <= selectable, used - selectable
    for family in ("rocketmq_group_lag", "rocketmq_broker_put_tps", "rocketmq_topic_messages_total"):
        assert family in used  # the dashboard covers brokers, topics and groups


def test_the_readme_documents_every_family_of_a_real_scrape(viewer_client, live_cluster):
    families, _ = scrape_names(viewer_client)
    readme = README.read_text()
    section = readme.split("### Metrics at `/metrics`")[1].split("\n## ")[0].split("\n### ")[0]
    assert not [f for f in families if f"`{f}`" not in section], "families missing from the README's table"


def test_the_downloads_need_a_console_role(client, viewer_client, live_cluster):
    html = viewer_client.get("/export/").content.decode()
    assert 'href="/export/grafana-dashboard.json"' in html and 'href="/export/prometheus-rules.yml"' in html
    for path in ("/export/", "/export/grafana-dashboard.json", "/export/prometheus-rules.yml"):
        assert client.get(path)["Location"].startswith("/accounts/login/")


def test_the_dashboards_dead_letters_panel_counts_arrivals_as_the_alert_rule_does(settings):
    """The DLQ topic's written count is born with the topic, at the first dead letter, so
    ``increase`` of it misses that first batch. The panel reads the group's dead-letter gauge
    (scraped from the group's first scrape on, 0 before any dead letter) and adds its rises step
    by step at the sampling interval over the hour, as "Dead letters arriving" does over its
    window (``core.promql.change_over``): the first batch counts, a fall (retention
    deleting dead letters) hides no arrival, a missed scrape delays a rise to the next one."""
    settings.HISTORY_SAMPLE_SECONDS = 30
    model = json.loads(json.dumps(dashboard()))  # what the download holds
    [panel] = [p for p in model["panels"] if p["title"] == "Dead letters per hour"]
    [target] = panel["targets"]
    gauge = 'rocketmq_group_dlq_messages{group=~"$group"}'
    assert target["expr"] == (
        f"sum_over_time(clamp_min(last_over_time({gauge}[1h])"
        f" - last_over_time({gauge}[1h] offset 30s), 0)[1h:30s])"
    )
    assert target["legendFormat"] == "{{group}}"
    # The alert rule says its window the same way: one expression, two windows.
    rule = AlertRule.objects.get(kind="dlq_receiving")
    [exported] = prometheus_rules([rule]).rules
    assert exported["expr"] == target["expr"].replace('{group=~"$group"}', "").replace("1h", "5m") + " > 0"
