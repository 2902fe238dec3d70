"""The default alert rules of a new installation (alerts.defaults), editable afterwards."""

from django.db import migrations


def create_defaults(apps, schema_editor):
    from alerts.defaults import create_default_rules

    create_default_rules(apps.get_model("alerts", "AlertRule"))


class Migration(migrations.Migration):
    dependencies = [("alerts", "0001_initial")]

    operations = [migrations.RunPython(create_defaults, migrations.RunPython.noop)]
