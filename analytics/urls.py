from django.urls import path

from . import views

app_name = "analytics"

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/new", views.run_start, name="run_start"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/status", views.run_status, name="run_status"),
    path("runs/<int:run_id>/charts/<slug:name>.png", views.run_chart, name="run_chart"),
    path("runs/<int:run_id>/download/<slug:section>.<slug:fmt>", views.run_download, name="run_download"),
    path("schedules/", views.schedule_list, name="schedule_list"),
    path("schedules/new", views.schedule_create, name="schedule_create"),
    path("schedules/<int:schedule_id>/edit", views.schedule_edit, name="schedule_edit"),
    path("schedules/<int:schedule_id>/toggle", views.schedule_toggle, name="schedule_toggle"),
    path("schedules/<int:schedule_id>/delete", views.schedule_delete, name="schedule_delete"),
]
