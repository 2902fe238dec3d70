"""Create the first console admin when no user exists yet; print how to log in.

Run by ``make run`` before the processes start. The password comes from ``CONSOLE_ADMIN_PASSWORD`` or
is generated and printed once: there is never a fixed default to forget to change. Either must pass
the project's password validators (``AUTH_PASSWORD_VALIDATORS``); a refused one makes no user. Later runs do
nothing, so a password changed in the console stays changed.
"""

import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from core.roles import ADMIN


def _generated_password(user) -> str:
    """16 random URL-safe characters; drawn again in the (vanishingly rare) case a validator refuses
    them, e.g. all digits, so a generated password always passes."""
    while True:
        password = secrets.token_urlsafe(12)
        try:
            validate_password(password, user)
        except ValidationError:
            continue
        return password


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
        given = os.environ.get("CONSOLE_ADMIN_PASSWORD")
        user = users(username=users.normalize_username(username), email="", is_staff=True, is_superuser=True)
        # The password rules of AUTH_PASSWORD_VALIDATORS hold for the first admin too: a weak
        # CONSOLE_ADMIN_PASSWORD stops here, with no user made, so the next run can try again.
        if given:
            try:
                validate_password(given, user)
            except ValidationError as exc:
                reasons = " ".join(exc.messages)
                raise CommandError(
                    f"CONSOLE_ADMIN_PASSWORD is refused: {reasons} "
                    "Choose another, or unset it to have one generated."
                ) from None
        password = given or _generated_password(user)
        with transaction.atomic():
            user.set_password(password)
            user.save()
            user.groups.add(Group.objects.get_or_create(name=ADMIN)[0])
        if os.environ.get("CONSOLE_ADMIN_PASSWORD"):
            shown = "the value of CONSOLE_ADMIN_PASSWORD"
        else:
            shown = f"{password}   (generated; shown only this once, change it after logging in)"
        self.stdout.write(
            self.style.SUCCESS(
                f"Created console admin.\n  URL:      {url}\n  User:     {username}\n  Password: {shown}"
            )
        )
