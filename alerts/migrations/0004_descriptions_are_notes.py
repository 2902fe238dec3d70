"""The default rules' descriptions said their thresholds, and went stale when one was edited: the
condition is now said from the fields (AlertRule.condition_text), and a default rule still holding
its first description gets its note instead (the text alerts.defaults gave it then)."""

from django.db import migrations

# (rule name) -> its description as 0002 made it.
STALE = {
    "Consumer group lag": "A group is more than 10,000 messages behind for 5 minutes.",
    "Consumer group lag growing": "A group's lag grew by over 1,000 in 10 minutes, for 5 minutes.",
    "Dead letters arriving": "New messages in a group's dead-letter queue within 5 minutes.",
    "Consumer not consuming": "A group has lag but consumed nothing for 5 minutes (consumers stopped or stuck).",
    "Broker down": "A broker did not answer the sampler for over a minute.",
    "Disk almost full": "The store disk is over 85% used; the broker refuses writes at 90%.",
    "Replication lag (bytes)": "A slave is over 256 MiB behind its master (out of the in-sync set).",
    "Replication lag (seconds)": "The oldest message a slave lacks is over 30 s old.",
    "Requests waiting": "Requests wait over 100 ms in the broker's queue; sends are refused at 200 ms.",
    "Transaction half messages piling up": "Over 1,000 undecided transaction half messages for 10 minutes.",
}


# (rule name) -> its note, as alerts.defaults gave it when this migration was written (a migration
# keeps its own copy: later edits of the defaults must not change what it does).
NOTES = {
    "Consumer group lag": "Consumers do not keep up with the producers.",
    "Consumer group lag growing": "The group falls further behind: consumers slower than producers.",
    "Dead letters arriving": "Messages used up their retries: the group's dead-letter queue.",
    "Consumer not consuming": "Consumers stopped or stuck.",
    "Broker down": "The broker does not answer the sampler.",
    "Disk almost full": "The broker refuses writes above diskSpaceWarningLevelRatio (90% by default).",
    "Replication lag (bytes)": "A slave behind by over haMaxGapNotInSync leaves the in-sync set.",
    "Replication lag (seconds)": "Measured as the age of the oldest message the slave lacks.",
    "Requests waiting": "Sends are refused after waitTimeMillsInSendQueue (200 ms by default).",
    "Transaction half messages piling up": "Transactions left undecided: a check listener may be failing.",
}


def to_notes(apps, schema_editor):
    rule_model = apps.get_model("alerts", "AlertRule")
    for name, old in STALE.items():
        rule_model.objects.filter(name=name, description=old).update(description=NOTES[name])


class Migration(migrations.Migration):
    dependencies = [("alerts", "0003_webhook_errors_reduced")]

    operations = [migrations.RunPython(to_notes, migrations.RunPython.noop)]
