"""Every page of the console app, in one namespace (``console``): the cluster pages at the root,
the operations pages (dead letters, replay jobs, delayed messages, transactions, trace, live tail)
under ``ops/``. Mounted at the site's root by ``project.urls``. Every name taken from the
cluster is a ``<name:…>`` parameter (``console.url_names``), so any name a broker holds has a URL."""

from django.urls import path, register_converter

from console.url_names import NameConverter
from console.views import (
    acl,
    audit_log,
    cluster,
    delayed,
    dlq,
    export,
    groups,
    messages,
    metrics,
    overview,
    producers,
    session,
    tail,
    topics,
    trace,
    transactions,
)

app_name = "console"

# Names from the cluster (topics, groups, brokers, message ids) may hold any character: see url_names.
register_converter(NameConverter, "name")

urlpatterns = [
    path("", overview.home, name="home"),
    path("namesrv", session.namesrv_switch, name="namesrv_switch"),
    path("cluster/", cluster.cluster_page, name="cluster"),
    path("cluster/tps.json", cluster.broker_tps_sample, name="cluster_tps"),
    path("cluster/broker/<name:addr>/", cluster.broker_page, name="broker"),
    path("cluster/broker/<name:addr>/config", cluster.broker_config_update, name="broker_config"),
    path(
        "cluster/broker/<name:addr>/damaged/purge", cluster.broker_damaged_purge, name="broker_damaged_purge"
    ),
    path(
        "cluster/switchover/<name:broker_name>/<int:broker_id>/",
        cluster.switchover_confirm,
        name="switchover_confirm",
    ),
    path("cluster/switchover/<name:broker_name>/", cluster.switchover_apply, name="switchover"),
    path("topics/", topics.topic_list, name="topics"),
    path("topics/save", topics.topic_save, name="topic_save"),
    path("topics/<name:topic>/", topics.topic_detail, name="topic"),
    path("topics/<name:topic>/delete", topics.topic_delete, name="topic_delete"),
    path("topics/<name:topic>/send", topics.topic_send, name="topic_send"),
    path("topics/<name:topic>/tps.json", topics.topic_tps_sample, name="topic_tps"),
    path("groups/", groups.group_list, name="groups"),
    path("groups/save", groups.group_save, name="group_save"),
    path("groups/<name:group>/", groups.group_page, name="group"),
    path("groups/<name:group>/delete", groups.group_delete, name="group_delete"),
    path("groups/<name:group>/reset/preview", groups.reset_preview_page, name="group_reset_preview"),
    path("groups/<name:group>/reset/apply", groups.reset_apply, name="group_reset_apply"),
    path("groups/<name:group>/skip-backlog", groups.skip_backlog, name="group_skip"),
    path("producers/", producers.producer_page, name="producers"),
    path("messages/", messages.message_search, name="messages"),
    path("messages/<name:msg_id>/", messages.message_detail, name="message"),
    path("messages/<name:msg_id>/resend", messages.message_resend, name="message_resend"),
    path("audit/", audit_log.audit_page, name="audit"),
    path("acl/", acl.acl_page, name="acl"),
    path("acl/accounts/save", acl.acl_account_save, name="acl_account_save"),
    path("acl/accounts/delete", acl.acl_account_delete, name="acl_account_delete"),
    path("acl/white-list", acl.acl_white_list_update, name="acl_white_list"),
    path("metrics", metrics.metrics, name="metrics"),
    # W17: what teams on Prometheus and Grafana take from the console.
    path("export/", export.export_page, name="export"),
    path("export/grafana-dashboard.json", export.grafana_dashboard, name="export_grafana"),
    path("export/prometheus-rules.yml", export.prometheus_rules, name="export_prometheus_rules"),
    # Operations pages.
    path("ops/dlq/", dlq.dlq_groups, name="dlq"),
    path("ops/dlq/<name:group>/", dlq.dlq_list, name="dlq_list"),
    path("ops/dlq/<name:group>/export.<str:fmt>", dlq.dlq_export, name="dlq_export"),
    path("ops/dlq/<name:group>/message/<name:offset_msg_id>/", dlq.dlq_message, name="dlq_message"),
    path("ops/dlq/<name:group>/make-readable/", dlq.dlq_make_readable, name="dlq_make_readable"),
    path("ops/dlq/<name:group>/preview/", dlq.dlq_preview, name="dlq_preview"),
    path("ops/dlq/<name:group>/replay/", dlq.dlq_replay, name="dlq_replay"),
    path("ops/jobs/", dlq.replay_jobs, name="replay_jobs"),
    path("ops/jobs/<int:job_id>/", dlq.replay_job, name="replay_job"),
    path("ops/delayed/", delayed.delayed_levels, name="delayed"),
    path("ops/delayed/<name:broker_name>/<int:level>/", delayed.delayed_level, name="delayed_level"),
    path(
        "ops/delayed/<name:broker_name>/<int:level>/export.<str:fmt>",
        delayed.delayed_level_export,
        name="delayed_level_export",
    ),
    path("ops/transactions/", transactions.pending_transactions, name="transactions"),
    path(
        "ops/transactions/export.<str:fmt>",
        transactions.pending_transactions_export,
        name="transactions_export",
    ),
    path("ops/transactions/end/", transactions.end_transaction, name="end_transaction"),
    path("ops/trace/", trace.message_trace, name="trace"),
    path("ops/tail/", tail.tail_page, name="tail"),
    path("ops/tail/filters/", tail.save_tail_filter, name="save_tail_filter"),
    path("ops/tail/filters/<int:filter_id>/delete/", tail.delete_tail_filter, name="delete_tail_filter"),
]
