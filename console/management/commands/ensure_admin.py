"""Create the first console admin when no user exists yet; print how to log in.

Run by ``make run`` before the processes start. The password comes from ``CONSOLE_ADMIN_PASSWORD`` or
is generated and printed once: there is never a fixed default to forget to change. Later runs do
nothing, so a password changed in the console stays changed.
"""

import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from console.roles import ADMIN


class Command(BaseCommand):
    help = "Create the console's first admin user (only when there is no user at all); print how to log in."

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("CONSOLE_ADMIN_USER", "admin"))
        parser.add_argument("--url", default=f"http://127.0.0.1:{os.environ.get('CONSOLE_PORT', '8000')}/")

    def handle(self, *args, username: str, url: str, **options):
        users = get_user_model()
        if users.objects.exists():
            self.stdout.write(
                f"Console users exist already; log in at {url} (forgot a password? "
                "python manage.py changepassword NAME)"
            )
            return
        password = os.environ.get("CONSOLE_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        user = users.objects.create_superuser(username=username, email="", password=password)
        group, _ = Group.objects.get_or_create(name=ADMIN)
        user.groups.add(group)
        if os.environ.get("CONSOLE_ADMIN_PASSWORD"):
            shown = "the value of CONSOLE_ADMIN_PASSWORD"
        else:
            shown = f"{password}   (generated; shown only this once, change it after logging in)"
        self.stdout.write(
            self.style.SUCCESS(
                f"Created console admin.\n  URL:      {url}\n  User:     {username}\n  Password: {shown}"
            )
        )
