"""A resolved event records the figure that resolved it; one resolved for lack of data records none."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0004_descriptions_are_notes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="alertevent",
            name="value",
            field=models.FloatField(default=0, null=True),
        ),
    ]
