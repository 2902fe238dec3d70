"""URLs of the operations pages, included from ``console.urls`` under ``ops/``."""

from django.urls import path

from console.views_ops import delayed_views, dlq_views, tail_views, trace_views, transaction_views

app_name = "console_ops"

urlpatterns = [
    path("dlq/", dlq_views.dlq_groups, name="dlq"),
    path("dlq/<str:group>/", dlq_views.dlq_list, name="dlq_list"),
    path("dlq/<str:group>/export.<str:fmt>", dlq_views.dlq_export, name="dlq_export"),
    path("dlq/<str:group>/message/<str:offset_msg_id>/", dlq_views.dlq_message, name="dlq_message"),
    path("dlq/<str:group>/make-readable/", dlq_views.dlq_make_readable, name="dlq_make_readable"),
    path("dlq/<str:group>/preview/", dlq_views.dlq_preview, name="dlq_preview"),
    path("dlq/<str:group>/replay/", dlq_views.dlq_replay, name="dlq_replay"),
    path("jobs/", dlq_views.replay_jobs, name="replay_jobs"),
    path("jobs/<int:job_id>/", dlq_views.replay_job, name="replay_job"),
    path("delayed/", delayed_views.delayed_levels, name="delayed"),
    path("delayed/<str:broker_name>/<int:level>/", delayed_views.delayed_level, name="delayed_level"),
    path(
        "delayed/<str:broker_name>/<int:level>/export.<str:fmt>",
        delayed_views.delayed_level_export,
        name="delayed_level_export",
    ),
    path("transactions/", transaction_views.pending_transactions, name="transactions"),
    path(
        "transactions/export.<str:fmt>",
        transaction_views.pending_transactions_export,
        name="transactions_export",
    ),
    path("transactions/end/", transaction_views.end_transaction, name="end_transaction"),
    path("trace/", trace_views.message_trace, name="trace"),
    path("tail/", tail_views.tail_page, name="tail"),
    path("tail/filters/", tail_views.save_tail_filter, name="save_tail_filter"),
    path("tail/filters/<int:filter_id>/delete/", tail_views.delete_tail_filter, name="delete_tail_filter"),
]
