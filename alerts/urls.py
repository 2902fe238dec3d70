from django.urls import path  # noqa: F401  (routes are added with the alert pages)

app_name = "alerts"

urlpatterns: list = []
