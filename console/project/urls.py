"""The project's URLs: Django's admin, a health probe, login, the analytics app and the console app
(at the root), and the error handlers every page shares (``console.errors``)."""

from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path


def healthz(request):
    """Liveness probe for process managers and the test harness."""
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("analytics/", include("analytics.urls")),
    path("", include("console.urls")),
]

handler400 = "console.errors.bad_request"
handler403 = "console.errors.permission_denied"
handler404 = "console.errors.page_not_found"
handler500 = "console.errors.server_error"
