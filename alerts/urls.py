from django.urls import path

from . import views

app_name = "alerts"

urlpatterns = [
    path("", views.event_list, name="events"),
    path("events/<int:event_id>/", views.event_detail, name="event_detail"),
    path("events/<int:event_id>/acknowledge", views.event_acknowledge, name="event_acknowledge"),
    path("rules/", views.rule_list, name="rules"),
    path("rules/new", views.rule_create, name="rule_create"),
    path("rules/<int:rule_id>/edit", views.rule_edit, name="rule_edit"),
    path("rules/<int:rule_id>/delete", views.rule_delete, name="rule_delete"),
    path("silences/", views.silence_list, name="silences"),
    path("silences/new", views.silence_create, name="silence_create"),
    path("silences/<int:silence_id>/expire", views.silence_expire, name="silence_expire"),
]
