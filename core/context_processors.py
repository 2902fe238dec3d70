"""Template context every console page needs: navigation, name server, the user's role and what
it may do (``may``, see ``core.roles.Permissions``)."""

from __future__ import annotations

from core.cluster_access import current_namesrv, namesrv_choices
from core.navigation import nav_links
from core.roles import Permissions, user_role


def console(request) -> dict[str, object]:
    user = getattr(request, "user", None)
    authenticated = bool(user and user.is_authenticated)
    role = user_role(user) if authenticated else None
    return {
        # A user without a role may open no page, so none is offered.
        "nav_links": nav_links(request.path, role, bool(getattr(user, "is_staff", False))) if role else [],
        "namesrv_current": current_namesrv(request) if hasattr(request, "session") else "",
        "namesrv_choices": namesrv_choices(),
        "user_role": role,
        "may": Permissions(user if authenticated else None),
    }
