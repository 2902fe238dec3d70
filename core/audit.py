"""Writing audit records: every mutating console action calls ``audit`` once it knows its result;
work done outside a request (a Celery job) builds its records with ``audit_record``.

``audit`` also notes on the request that its action has a record, so that
``console.views.common.audited`` does not add a second (failed) one for the same request."""

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


def audit(
    request,
    action: str,
    target: str = "",
    parameters: dict | None = None,
    result: str = AuditRecord.RESULT_OK,
    detail: str = "",
) -> AuditRecord:
    user = request.user if request.user.is_authenticated else None
    remote_addr = request.META.get("REMOTE_ADDR")
    record = audit_record(
        user, action, target, parameters, result, detail, nobody="anonymous", remote_addr=remote_addr
    )
    record.save()
    request.console_audited = True
    return record
