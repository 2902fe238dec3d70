"""Building audit records: every operator action gets its one record from the command boundary
(``core.boundary.execute``); work done outside a request (a Celery job) builds its own with
``audit_record``."""

from core.models import AuditRecord


def audit_record(
    user,
    action: str,
    target: str = "",
    parameters: dict | None = None,
    result: str = AuditRecord.RESULT_OK,
    detail: str = "",
    *,
    nobody: str = "celery",
    remote_addr: str | None = None,
) -> AuditRecord:
    """An unsaved record on behalf of ``user``; with no user, in the name ``nobody``."""
    return AuditRecord(
        user=user,
        username=user.get_username() if user else nobody,
        action=action,
        target=target[:512],
        parameters=parameters or {},
        result=result,
        detail=detail,
        remote_addr=remote_addr or None,
    )
