from django.db import migrations

ROLES = ("viewer", "operator", "admin")


def create_role_groups(apps, schema_editor):
    group_model = apps.get_model("auth", "Group")
    for name in ROLES:
        group_model.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [("console", "0001_audit_record"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_role_groups, migrations.RunPython.noop)]
