"""URLs of the console's core pages (namespace ``console``)."""

from django.urls import path

from console.views import audit_log, cluster, groups, messages, metrics, producers, session, topics

app_name = "console"

urlpatterns = [
    path("", session.home, name="home"),
    path("namesrv", session.namesrv_switch, name="namesrv_switch"),
    path("cluster/", cluster.cluster_page, name="cluster"),
    path("cluster/tps.json", cluster.broker_tps_sample, name="cluster_tps"),
    path("cluster/broker/<str:addr>/", cluster.broker_page, name="broker"),
    path("cluster/broker/<str:addr>/config", cluster.broker_config_update, name="broker_config"),
    path("topics/", topics.topic_list, name="topics"),
    path("topics/save", topics.topic_save, name="topic_save"),
    path("topics/<str:topic>/", topics.topic_detail, name="topic"),
    path("topics/<str:topic>/delete", topics.topic_delete, name="topic_delete"),
    path("topics/<str:topic>/send", topics.topic_send, name="topic_send"),
    path("topics/<str:topic>/tps.json", topics.topic_tps_sample, name="topic_tps"),
    path("groups/", groups.group_list, name="groups"),
    path("groups/save", groups.group_save, name="group_save"),
    path("groups/<str:group>/", groups.group_page, name="group"),
    path("groups/<str:group>/delete", groups.group_delete, name="group_delete"),
    path("groups/<str:group>/reset/preview", groups.reset_preview_page, name="group_reset_preview"),
    path("groups/<str:group>/reset/apply", groups.reset_apply, name="group_reset_apply"),
    path("groups/<str:group>/skip-backlog", groups.skip_backlog, name="group_skip"),
    path("producers/", producers.producer_page, name="producers"),
    path("messages/", messages.message_search, name="messages"),
    path("messages/<str:msg_id>/", messages.message_detail, name="message"),
    path("messages/<str:msg_id>/resend", messages.message_resend, name="message_resend"),
    path("audit/", audit_log.audit_page, name="audit"),
    path("metrics", metrics.metrics, name="metrics"),
]
