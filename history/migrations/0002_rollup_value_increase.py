from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("history", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="rollup",
            name="value_increase",
            field=models.FloatField(null=True),
        ),
    ]
