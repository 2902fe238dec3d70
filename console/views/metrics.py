"""W10: ``/metrics`` in Prometheus text format, for a scraper holding the token or a console user.

A scraper sends ``Authorization: Bearer <CONSOLE_METRICS_TOKEN>`` (Prometheus' ``authorization:
credentials:``, or ``bearer_token`` in older versions). Without the token — or with it unset, the
default — a logged-in user with a console role may read the figures in the browser. Anything else
is answered 401 with ``WWW-Authenticate: Bearer`` (403 for a logged-in user without a role): the
figures name every topic, group and broker address of the cluster.

``?namesrv=`` picks another configured name server; by default the first of ``BROKER_NAMESRV``.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from console.queries import topology
from core.roles import VIEWER, has_role, mark_access, refusal

REALM = 'Bearer realm="pyrocket console metrics"'


def _bearer_token(request) -> str | None:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


def _token_matches(presented: str | None) -> bool:
    expected = settings.CONSOLE_METRICS_TOKEN
    if not expected or presented is None:
        return False
    # Constant time: the comparison must not tell a prober how many leading characters were right.
    return hmac.compare_digest(presented.encode(), expected.encode())


def _unauthorized(reason: str) -> HttpResponse:
    response = HttpResponse(reason + "\n", status=401, content_type="text/plain")
    response["WWW-Authenticate"] = REALM
    return response


@require_GET
def metrics(request):
    presented = _bearer_token(request)
    if not _token_matches(presented):
        if presented is not None:  # a wrong token is refused even for a logged-in browser
            return _unauthorized("invalid bearer token")
        if not request.user.is_authenticated:
            how = "Authorization: Bearer <CONSOLE_METRICS_TOKEN>" if settings.CONSOLE_METRICS_TOKEN else None
            return _unauthorized(
                f"send {how}, or log in to the console"
                if how
                else "log in to the console (set CONSOLE_METRICS_TOKEN to let a scraper in with a token)"
            )
        if not has_role(request.user, VIEWER):
            raise PermissionDenied(refusal(request.user, VIEWER))
    choices = topology.configured_namesrvs()
    namesrv = request.GET.get("namesrv") or (choices[0] if choices else "")
    if namesrv not in choices:
        return HttpResponse(
            f"unknown name server {namesrv!r}; configured: {', '.join(choices)}\n",
            status=400,
            content_type="text/plain",
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(topology.metrics_collector(namesrv))
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


# The URL walk test (tests/console/test_security_urls.py) reads what a view needs from this mark.
mark_access(metrics, VIEWER, None)
