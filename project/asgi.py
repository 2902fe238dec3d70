"""ASGI entry point: Django over HTTP, Channels for websockets (live tail, login required)."""

import os

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

# Django must be set up before the consumers (and the models they import) are loaded.
django_asgi_app = get_asgi_application()

from console.tail.routing import websocket_urlpatterns  # noqa: E402

# Static files (the console's CSS/JS and static/vendor/) are served by the ASGI app itself: the console
# runs as one daphne process with no web server in front, and needs no collectstatic step.
application = ProtocolTypeRouter(
    {
        "http": ASGIStaticFilesHandler(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
