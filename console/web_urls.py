"""URLs of the console's core pages (namespace ``console``)."""

from django.urls import path

from console.views import audit_log, cluster, session

app_name = "console"

urlpatterns = [
    path("", session.home, name="home"),
    path("namesrv", session.namesrv_switch, name="namesrv_switch"),
    path("cluster/", cluster.cluster_page, name="cluster"),
    path("cluster/tps.json", cluster.broker_tps_sample, name="cluster_tps"),
    path("cluster/broker/<str:addr>/", cluster.broker_page, name="broker"),
    path("cluster/broker/<str:addr>/config", cluster.broker_config_update, name="broker_config"),
    path("audit/", audit_log.audit_page, name="audit"),
]
