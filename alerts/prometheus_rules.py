"""W17: the console's alert rules as a Prometheus rule file, for teams that alert with Prometheus.

Each rule becomes one alerting rule whose ``expr`` reads the families the console exports at
``/metrics`` (``console.metrics``), with ``for:`` its duration and its severity, name and kind as
labels. The console measures on its sampled history and Prometheus on its scrapes, so the two agree
on what a rule means, not to the sample: a change over a window is measured the way the console
measures it (``change_over``), not with ``delta``.

A rule Prometheus cannot express is written as a comment saying why, never dropped silently: a scope
over something the families carry no label for (the console's "cluster" is the name server a rule
watches; a scrape names no name server), a broker pattern that cannot be split into name and id, or
a disabled rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import yaml
from django.conf import settings
from django.utils import timezone

from core.promql import change_over

from .kinds import BROKER, KINDS
from .models import AlertRule
from .patterns import matches

GROUP_NAME = "pyrocket-console"
_NOT_A_NAME_CHAR = re.compile(r"[^A-Za-z0-9]+")


class Unexpressible(Exception):
    """The rule has no Prometheus equivalent; the message says why."""


def glob_regex(pattern: str) -> str:
    """A scope glob (``alerts.patterns``: ``*`` any run, ``?`` one character) as the RE2 regex of a
    PromQL ``=~`` matcher (anchored by Prometheus itself)."""
    out = []
    for char in pattern:
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char.isalnum() or char in "_%:-":
            out.append(char)
        else:  # "." and "|" (the other characters a pattern allows) are regex syntax
            out.append("\\" + char)
    return "".join(out)


def _quoted(regex: str) -> str:
    # PromQL strings use Go's escapes: a regex backslash is written twice.
    return '"' + regex.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _configured_namesrvs() -> list[str]:
    raw = getattr(settings, "BROKER_NAMESRV", "") or ""
    return [entry.strip() for entry in raw.split(",") if entry.strip()]


def _check_cluster_scope(rule: AlertRule) -> None:
    """The console's cluster is a name server (a ``BROKER_NAMESRV`` entry): a pattern that covers
    every configured one restricts nothing; any other has no label to match in a scrape."""
    pattern = rule.cluster_pattern
    if pattern and not all(matches(pattern, entry) for entry in _configured_namesrvs()):
        raise Unexpressible(
            f"its cluster pattern {pattern!r} picks name servers, and /metrics carries no name-server "
            "label (scrape each name server as its own job, ?namesrv=, and add the rule per job)"
        )


def _check_unused_scopes(rule: AlertRule, used: Iterable[str]) -> None:
    for field in ("broker", "topic", "group"):
        pattern = getattr(rule, f"{field}_pattern")
        if field not in used and pattern and not matches(pattern, ""):
            raise Unexpressible(
                f"its {field} pattern {pattern!r} never matches a {KINDS[rule.kind].subject} "
                "subject, so it never fires in the console either"
            )


def _group_selector(rule: AlertRule) -> str:
    return f"group=~{_quoted(glob_regex(rule.group_pattern))}" if rule.group_pattern else ""


def _broker_selector(rule: AlertRule, masters_only: bool = False) -> str:
    """The console names a broker member ``brokerName:brokerId`` (``history.catalogue.broker_key``);
    /metrics has the two as the labels ``broker`` and ``broker_id`` (a family of masters only, such
    as half messages, has no ``broker_id``)."""
    pattern = rule.broker_pattern
    if not pattern:
        return ""
    name, colon, member = pattern.partition(":")
    if colon and ":" not in member:
        parts = [f"broker=~{_quoted(glob_regex(name))}"]
        if masters_only and not matches(member, "0"):
            raise Unexpressible(
                f"its broker pattern {pattern!r} names no master, and only masters have this figure"
            )
        if member not in ("", "*") and not masters_only:
            parts.append(f"broker_id=~{_quoted(glob_regex(member))}")
        return ", ".join(parts)
    if not colon and pattern.endswith("*") and "?" not in pattern:
        # "name*" covers every member id of the names it matches: the star takes ":id" too.
        return f"broker=~{_quoted(glob_regex(pattern))}"
    raise Unexpressible(f"its broker pattern {pattern!r} cannot be split into broker name and id")


def _sel(*parts: str) -> str:
    inner = ", ".join(p for p in parts if p)
    return "{" + inner + "}" if inner else ""


def _number(value: float) -> str:
    return repr(int(value)) if float(value).is_integer() else repr(float(value))


def _expr(rule: AlertRule) -> str:
    threshold, window = _number(rule.threshold), f"{rule.window_minutes}m"
    kind = rule.kind
    if KINDS[kind].subject == BROKER:
        _check_unused_scopes(rule, ("broker",))
        sel = _sel(_broker_selector(rule))
        family = {
            "disk_ratio": "rocketmq_broker_commitlog_disk_ratio",
            "replication_bytes": "rocketmq_broker_replication_lag_bytes",
            "replication_seconds": "rocketmq_broker_replication_lag_seconds",
            "request_wait": "rocketmq_broker_request_wait_ms",
        }.get(kind)
        if family:
            return f"{family}{sel} > {threshold}"
        if kind == "broker_down":
            return f"rocketmq_broker_up{sel} == 0"
        if kind == "half_messages":
            masters = _sel(_broker_selector(rule, masters_only=True))
            return f"rocketmq_broker_half_messages{masters} > {threshold}"
    else:
        _check_unused_scopes(rule, ("group",))
        group = _group_selector(rule)
        sel = _sel(group)
        if kind == "group_lag":
            return f"rocketmq_group_lag{sel} > {threshold}"
        if kind == "lag_growing":
            return f"{change_over(f'rocketmq_group_lag{sel}', window)} > {threshold}"
        if kind == "consume_stalled":
            return f"rocketmq_group_lag{sel} > {threshold} and on(group) rocketmq_group_consume_tps{sel} <= 0"
        if kind == "dlq_receiving":
            arrived = change_over(f"rocketmq_group_dlq_messages{sel}", window, rises_only=True)
            return f"{arrived} > {threshold}"
    raise Unexpressible(f"the kind {kind!r} has no Prometheus expression")


def _for(rule: AlertRule) -> str:
    seconds = rule.for_minutes * 60
    if rule.kind == "broker_down":
        # The console's threshold is "not heard from for N seconds" before pending starts.
        seconds += int(rule.threshold)
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


def _subject_label(rule: AlertRule) -> str:
    if KINDS[rule.kind].subject == BROKER:
        return "{{ $labels.broker }} {{ $labels.broker_id }} ({{ $labels.addr }})"
    return "group {{ $labels.group }}"


def alert_name(rule_name: str) -> str:
    """A rule name as a Prometheus alert name (a metric-name-like identifier)."""
    words = [w for w in _NOT_A_NAME_CHAR.split(rule_name) if w]
    return "Pyrocket" + "".join(w[:1].upper() + w[1:] for w in words)


@dataclass
class Outcome:
    rules: list[dict]
    skipped: list[tuple[str, str]]  # (rule name, why)


def prometheus_rules(rules: Iterable[AlertRule]) -> Outcome:
    out, skipped, names = [], [], set()
    for rule in rules:
        if not rule.enabled:
            skipped.append((rule.name, "disabled in the console"))
            continue
        try:
            _check_cluster_scope(rule)
            expr = _expr(rule)
        except Unexpressible as why:
            skipped.append((rule.name, str(why)))
            continue
        name = alert_name(rule.name)
        while name in names:  # two names that differ only in punctuation
            name += "_"
        names.add(name)
        out.append(
            {
                "alert": name,
                "expr": expr,
                "for": _for(rule),
                "labels": {"severity": rule.severity, "console_rule": rule.name, "kind": rule.kind},
                "annotations": {
                    "summary": f"{rule.name}: {_subject_label(rule)} at {{{{ $value }}}}",
                    "description": rule.description_text,
                    "scope": rule.scope_text,
                },
            }
        )
    return Outcome(out, skipped)


def rules_yaml(rules: Iterable[AlertRule] | None = None) -> str:
    """The rule file: a header, the rules (one group), then the rules left out with the reason."""
    outcome = prometheus_rules(AlertRule.objects.order_by("name") if rules is None else rules)
    stamp = timezone.now().strftime("%Y-%m-%d %H:%M:%S %Z")
    header = [
        f"# Prometheus alerting rules generated by the pyrocket console from its alert rules ({stamp}).",
        "# Expressions read the families the console exports at /metrics;",
        "# load the file with rule_files: in prometheus.yml.",
    ]
    body = yaml.safe_dump(
        {"groups": [{"name": GROUP_NAME, "rules": outcome.rules}]},
        sort_keys=False,
        allow_unicode=True,
        width=120,
    )
    lines = [*header, body.rstrip("\n")]
    if outcome.skipped:
        lines.append("# Rules of the console with no Prometheus equivalent:")
        lines.extend(f"#   {name}: {why}" for name, why in outcome.skipped)
    return "\n".join(lines) + "\n"
