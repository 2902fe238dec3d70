"""ASGI entry point: Django over HTTP, Channels for websockets."""

import os

from channels.routing import ProtocolTypeRouter
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

# Static files (the console's CSS/JS and static/vendor/) are served by the ASGI app itself: the console
# runs as one daphne process with no web server in front, and needs no collectstatic step.
application = ProtocolTypeRouter({"http": ASGIStaticFilesHandler(get_asgi_application())})
