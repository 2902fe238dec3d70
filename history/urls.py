from django.urls import path  # noqa: F401  (routes are added with the history pages)

app_name = "history"

urlpatterns: list = []
