from django.apps import AppConfig


class HooksAppConfig(AppConfig):
    name = "hooks_app"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        # Listens to every domain event (lakeui/events.py), in web and worker processes alike.
        from hooks_app.services.deliveries import webhook_event_record
        from lakeui.events import event_listener

        event_listener(webhook_event_record)
