"""Websocket URL routes of the console (mounted by ``project.asgi``)."""

from django.urls import re_path

from .consumer import TailConsumer

websocket_urlpatterns = [
    # Topic names may hold '%' and '|' (retry and DLQ topics); the browser percent-encodes them.
    re_path(r"^ws/tail/(?P<topic>[^/]+)/$", TailConsumer.as_asgi()),
]
