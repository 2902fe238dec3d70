"""Roles and the audit log in one import, for a feature app's views (alerts, analytics): the one
permission table and its view guard, and the one audit log (``core.roles``, ``core.audit``).

Template filters shared by every app's pages are builtins (``core.formatting``).
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
