"""The default rules' descriptions said their thresholds, and went stale when one was edited: the
condition is now said from the fields (AlertRule.condition_text), and a default rule still holding
its first description gets the note alerts.defaults gives it instead."""

from django.db import migrations

# (rule name, description as 0002 made it) -> the note of alerts.defaults.
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


def to_notes(apps, schema_editor):
    from alerts.defaults import DEFAULT_RULES

    rule_model = apps.get_model("alerts", "AlertRule")
    notes = {spec["name"]: spec["description"] for spec in DEFAULT_RULES}
    for name, old in STALE.items():
        rule_model.objects.filter(name=name, description=old).update(description=notes[name])


class Migration(migrations.Migration):
    dependencies = [("alerts", "0003_webhook_errors_reduced")]

    operations = [migrations.RunPython(to_notes, migrations.RunPython.noop)]
