"""What the project's other apps (analytics) may use of the console app: the one permission table
and its view guard, and the one audit log. Everything else of the console is its own business;
an app that needs more asks for it here rather than importing the console's modules.

Template filters shared by every app's pages are the project's (``core.formatting``).
"""

from core.audit import audit_record
from core.models import AuditRecord
from core.roles import ACTIONS, OPERATOR, VIEWER, has_role, may, require_role

__all__ = [
    "ACTIONS",
    "OPERATOR",
    "VIEWER",
    "AuditRecord",
    "audit_record",
    "has_role",
    "may",
    "require_role",
]
