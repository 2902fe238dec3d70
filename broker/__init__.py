"""The broker engine: name server, broker, store, client SDK and CLI.

Pure Python; never imports Django, so it runs on its own (``python -m broker.server``) and inside
the Django project's management commands alike.
"""

__version__ = "0.1.0"
