import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from rest_framework.authtoken.models import Token

DEMO_USERNAME = "admin"
DEMO_PASSWORD = "lakeui-admin"  # the default of make run; set LAKEUI_ADMIN_PASSWORD anywhere else


class Command(BaseCommand):
    help = "Create the demo admin user (idempotent) and print how to sign in."

    def handle(self, *args, **options):
        user, created = get_user_model().objects.get_or_create(
            username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True, "email": "admin@example.com"}
        )
        password = os.environ.get("LAKEUI_ADMIN_PASSWORD") or DEMO_PASSWORD
        if created:
            user.set_password(password)
            user.save()
        token, _ = Token.objects.get_or_create(user=user)
        shown = password if created else "as set when it was created"
        self.stdout.write(
            self.style.SUCCESS(
                "\nLakeUI demo login\n"
                f"  browser:  http://127.0.0.1:8000/  (user {DEMO_USERNAME}, password {shown})\n"
                f"  API:      curl -H 'Authorization: Token {token.key}' http://127.0.0.1:8000/api/v1/jobs\n"
                "  API docs: http://127.0.0.1:8000/api/docs\n"
            )
        )
