"""Writing audit records: every mutating console action calls ``audit`` once it knows its result."""

from console.models import AuditRecord


def audit(
    request,
    action: str,
    target: str = "",
    parameters: dict | None = None,
    result: str = AuditRecord.RESULT_OK,
    detail: str = "",
) -> AuditRecord:
    user = request.user if request.user.is_authenticated else None
    return AuditRecord.objects.create(
        user=user,
        username=user.get_username() if user else "anonymous",
        action=action,
        target=target[:512],
        parameters=parameters or {},
        result=result,
        detail=detail,
        remote_addr=request.META.get("REMOTE_ADDR") or None,
    )
