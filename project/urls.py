"""The project's URLs: Django's admin, a health probe, login, the analytics, history and alerts
apps, the console app (at the root), and the error handlers every page shares
(``core.errors``)."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpResponse, JsonResponse
from django.urls import include, path


def healthz(request):
    """Liveness probe for process managers and the test harness."""
    return JsonResponse({"status": "ok"})


def favicon(request):
    """No icon, said without a 404: the console's pages name an empty one, but Django admin's pages
    leave the browser to ask for /favicon.ico, and a 404 there is an error in the browser's console."""
    return HttpResponse(status=204)


urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon, name="favicon"),
    # Of django.contrib.auth's pages only these: the console sends no mail, so there is no
    # password reset by e-mail (an admin sets a forgotten password: manage.py changepassword).
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "accounts/password_change/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("analytics/", include("analytics.urls")),
    path("history/", include("history.urls")),
    path("alerts/", include("alerts.urls")),
    path("", include("console.urls")),
]

handler400 = "core.errors.bad_request"
handler403 = "core.errors.permission_denied"
handler404 = "core.errors.page_not_found"
handler500 = "core.errors.server_error"
