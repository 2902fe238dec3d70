"""Console roles: viewer < operator < admin, kept as Django auth groups of those names.

Superusers count as admin. Every mutating view is wrapped in ``require_role("operator")`` (or
"admin"), which also refuses anonymous users, so a permission check can never be forgotten by
omission of a separate login check.
"""

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponseForbidden

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLE_ORDER = (VIEWER, OPERATOR, ADMIN)


def user_role(user) -> str | None:
    """The highest console role the user holds, or None for a user without any."""
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    names = set(user.groups.values_list("name", flat=True))
    for role in reversed(ROLE_ORDER):
        if role in names:
            return role
    return None


def has_role(user, minimum: str) -> bool:
    role = user_role(user)
    return role is not None and ROLE_ORDER.index(role) >= ROLE_ORDER.index(minimum)


def require_role(minimum: str, action: str | None = None):
    """View decorator: anonymous users go to the login page, others without the role get a 403.

    A refused POST is audited as "denied" under ``action`` (the name the view audits its own
    result with, so one filter on the audit page shows both), else under the view's name.
    """
    if minimum not in ROLE_ORDER:
        raise ValueError(f"unknown role {minimum!r}")

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, minimum):
                if request.method == "POST":
                    _audit_denied(request, action or view.__name__, minimum)
                return HttpResponseForbidden(
                    f"This action needs the {minimum} role; ask an admin to grant it.",
                    content_type="text/plain",
                )
            return view(request, *args, **kwargs)

        return wrapped

    return decorate


def _audit_denied(request, view_name: str, minimum: str) -> None:
    # Imported here: roles is imported by models' neighbours at start-up, audit needs the app registry.
    from console.audit import audit
    from console.models import AuditRecord

    audit(request, view_name, request.path, {}, AuditRecord.RESULT_DENIED, f"needs the {minimum} role")
