from django.urls import path

from history import views

app_name = "history"

urlpatterns = [
    path("", views.history_page, name="index"),
    path("daily.json", views.daily_json, name="daily"),
    path("charts/<slug:page>/<slug:chart>.json", views.chart_json, name="chart"),
]
