from django.conf import settings
from django.db import models


class AuditRecord(models.Model):
    """One mutating console action: who did what to which target, with which parameters and result."""

    RESULT_OK = "ok"
    RESULT_FAILED = "failed"
    RESULT_DENIED = "denied"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    username = models.CharField(max_length=150)
    action = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=512, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    result = models.CharField(max_length=16)
    detail = models.TextField(blank=True)
    remote_addr = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # The table it had as a console model: databases from before the platform app keep their rows.
        db_table = "console_auditrecord"

    def __str__(self) -> str:
        when = f"{self.created_at:%Y-%m-%d %H:%M:%S}"
        return f"{when} {self.username} {self.action} {self.target} {self.result}"
