"""Alerts (W15): rules over the metric history with a scope, evaluated after each sample; events
pending → firing → resolved, acknowledged and silenced by operators; webhook and e-mail
notifications; everything audited."""

import logging

from django.apps import AppConfig

log = logging.getLogger(__name__)


def evaluate_after_sample(sender, taken_at, cluster, **kwargs) -> None:
    """Rules are evaluated on each cycle's own timestamp, right after its points are stored."""
    from .evaluation import evaluate

    try:
        report = evaluate(taken_at, cluster)
    except Exception:  # the samples are stored already; the next cycle evaluates again
        log.exception("alert evaluation failed for %s at %s", cluster, taken_at)
        return
    log.debug("alerts evaluated: %s", report)


class AlertsConfig(AppConfig):
    name = "alerts"
    verbose_name = "Alerts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import exports, overview
        from core.signals import sample_stored

        from . import commands  # noqa: F401  (registers the alert commands with core.boundary)
        from .overview import firing_alerts
        from .prometheus_rules import rules_yaml

        sample_stored.connect(evaluate_after_sample, dispatch_uid="alerts.evaluate_after_sample")
        overview.register("alerts", firing_alerts)
        exports.register(exports.PROMETHEUS_RULES, rules_yaml)
