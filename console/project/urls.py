from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path


def healthz(request):
    """Liveness probe for process managers and the test harness."""
    return JsonResponse({"status": "ok"})


# One include() per URL module, so each part of the console adds its own line.
urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("ops/", include("console.ops_urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("analytics/", include("analytics.urls")),
    path("", include("console.web_urls")),
]
