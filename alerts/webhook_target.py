"""Where an alert webhook may go, and the POST itself: no way into the console's own network.

An operator names the URL and the Celery worker, inside the network, POSTs to it and retries: left
open, a rule could reach Redis on 127.0.0.1:6379, a cloud's metadata service on 169.254.169.254 or
any private address, and read the answers (or a port scan's connect errors) on the event page. So:

- every address the URL's host resolves to must be public (``is_global``): loopback, link-local
  (metadata services included), private, shared (100.64/10), unspecified, multicast and reserved
  addresses are refused, unless ``ALERT_WEBHOOK_ALLOWED_NETWORKS`` (networks or addresses,
  comma separated) names them. IPv4-mapped IPv6 addresses are judged as the IPv4 address;
- the connection goes to an address that was checked, not to a second lookup of the name, which a
  rebinding DNS could answer with 127.0.0.1 the second time;
- no redirect is followed (http.client follows none): a 3xx is a failed attempt;
- what a failure records is an HTTP status or a short error class ("connection refused"), never
  the receiver's body or the raw error text.

Checked when a rule is saved (a form error) and again at each send: the allow-list may have
changed, and a name may resolve differently since.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import urllib.parse

from django.conf import settings

ALLOWED_SETTING = "ALERT_WEBHOOK_ALLOWED_NETWORKS"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookRefused(Exception):
    """The URL's address is not one a webhook may go to: permanent, never retried."""


class WebhookFailed(Exception):
    """A POST that did not succeed; its text is a status or a short error class, safe to show."""


def refusal(address: IPAddress) -> str | None:
    """Why a webhook may not go to ``address``; None when it may."""
    judged = (
        address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped else address
    )
    allowed = settings.ALERT_WEBHOOK_ALLOWED_NETWORKS
    if any(judged in network or address in network for network in allowed):
        return None
    if judged.is_loopback:
        kind = "a loopback"
    elif judged.is_link_local:
        kind = "a link-local (metadata service)"
    elif judged.is_unspecified:
        kind = "an unspecified"
    elif judged.is_multicast:
        kind = "a multicast"
    elif judged.is_private:
        kind = "a private"
    elif not judged.is_global:
        kind = "a non-public"
    else:
        return None
    return f"{judged} is {kind} address: name it in {ALLOWED_SETTING} to send webhooks there"


def checked_addresses(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, each allowed; raises WebhookRefused for the first that is
    not, or OSError (socket.gaierror) when the name does not resolve."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    for address in addresses:
        reason = refusal(ipaddress.ip_address(address.split("%", 1)[0]))  # a scope id is not the address
        if reason:
            raise WebhookRefused(reason)
    return addresses


def split_url(url: str) -> tuple[bool, str, int, str]:
    """(https, host, port, path with query) of an http(s) URL; ValueError for anything else."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL with a host")
    https = parts.scheme.lower() == "https"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return https, parts.hostname, parts.port or (443 if https else 80), path


def post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> None:
    """POST ``body`` to ``url`` at a checked address; WebhookRefused or WebhookFailed unless 2xx."""
    try:
        https, host, port, path = split_url(url)
    except ValueError:
        raise WebhookRefused(f"not an http(s) URL: {url}") from None
    try:
        addresses = checked_addresses(host, port)
    except OSError as exc:
        raise WebhookFailed(short_error(exc)) from None  # DNS may answer on the next try
    connection_class = http.client.HTTPSConnection if https else http.client.HTTPConnection
    connection = connection_class(host, port, timeout=timeout)  # Host header and TLS name: the host

    def to_checked_address(_address, timeout, _source_address=None) -> socket.socket:
        return _connect(addresses, port, timeout)

    # http.client opens its socket through this attribute: pointed at the checked addresses, the
    # name is not looked up again (TLS still verifies the certificate against the host's name).
    connection._create_connection = to_checked_address  # type: ignore[attr-defined]
    try:
        connection.request("POST", path, body, headers)
        status = connection.getresponse().status
    except (OSError, http.client.HTTPException) as exc:
        raise WebhookFailed(short_error(exc)) from None
    finally:
        connection.close()
    if not 200 <= status < 300:
        raise WebhookFailed(f"HTTP {status}")


def _connect(addresses: list[str], port: int, timeout: float) -> socket.socket:
    last: OSError | None = None
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout)
        except OSError as exc:
            last = exc
    raise last or OSError("no address")


def short_error(exc: BaseException) -> str:
    """A failure's class in a few words: what the event page may show of it."""
    kinds: list[tuple[type[BaseException], str]] = [
        (socket.gaierror, "name not resolved"),
        (ConnectionRefusedError, "connection refused"),
        (ConnectionResetError, "connection reset"),
        (TimeoutError, "timed out"),
        (ssl.SSLError, "TLS error"),
        (http.client.HTTPException, "no valid HTTP answer"),
        (OSError, "connection failed"),
    ]
    return next((text for kind, text in kinds if isinstance(exc, kind)), type(exc).__name__)
