"""Webhook notification errors saved before the SSRF fix (issue 31, §5) reduced to a status or a
short error class, as delivery now records them.

Those rows hold the receiver's answer ("RuntimeError: HTTP 500 from the receiver: <body>") or the
raw connect error ("URLError: <urlopen error [Errno 111] Connection refused>"), shown on the event
page. Rewritten once here rather than filtered at each display: the answer of an internal service
(Redis' INFO, a metadata service's credentials) then stays nowhere, not in the table, a backup or
an export. E-mail errors (the mail server's own answer) are kept.
"""

import re

from django.db import migrations

GAVE_UP = re.compile(r"^(gave up after \d+ attempts; last: )(.*)$", re.S)
STATUS = re.compile(r"\bHTTP (?:Error )?([1-5]\d\d)\b")
# The short classes webhook_target.short_error writes, and the words of old raw errors for each.
CLASSES = (
    ("name not resolved", ("name or service not known", "nodename", "getaddrinfo", "name not resolved")),
    ("connection refused", ("connection refused",)),
    ("connection reset", ("connection reset", "reset by peer")),
    ("timed out", ("timed out", "timeout")),
    ("TLS error", ("ssl", "certificate", "tls error")),
    ("no valid HTTP answer", ("remotedisconnected", "badstatusline", "no valid http answer")),
)


def reduced(error: str) -> str:
    """``error`` as a status or short class, keeping a "gave up after …" prefix and refusals."""
    gave_up = GAVE_UP.match(error)
    prefix, rest = (gave_up.group(1), gave_up.group(2)) if gave_up else ("", error)
    if rest.startswith(("refused: ", "could not queue: ")):  # the console's own words
        return error
    status = STATUS.search(rest)
    if status:
        return f"{prefix}HTTP {status.group(1)}"
    lowered = rest.lower()
    short = next((name for name, words in CLASSES if any(w in lowered for w in words)), "connection failed")
    return prefix + short


def reduce_webhook_errors(apps, schema_editor):
    notification = apps.get_model("alerts", "Notification")
    rows = notification.objects.filter(channel="webhook").exclude(last_error="")
    for row in rows.only("pk", "last_error").iterator():
        short = reduced(row.last_error)
        if short != row.last_error:
            notification.objects.filter(pk=row.pk).update(last_error=short)


class Migration(migrations.Migration):
    dependencies = [("alerts", "0002_default_rules")]

    operations = [migrations.RunPython(reduce_webhook_errors, migrations.RunPython.noop)]
