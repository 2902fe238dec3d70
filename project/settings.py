"""Django settings of the project (the console and analytics apps), read from the environment.

Embedded defaults need no server at all: SQLite in ``var/``, the in-memory channel layer and a
Celery transport on the local filesystem. ``DATABASE_URL`` switches to PostgreSQL (psycopg 3),
``REDIS_URL`` moves Channels and Celery to Redis, ``BROKER_NAMESRV`` points at the name servers.
"""

import ipaddress
import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parents[1]
VAR_DIR = Path(os.environ.get("CONSOLE_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _non_negative_seconds(name: str, default: str) -> float:
    """A duration in seconds from the environment; a bad value stops start-up saying which."""
    text = os.environ.get(name, default)
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ImproperlyConfigured(f"{name}={text!r}: expected a number of seconds, 0 or more")
    return value


def _secret_key() -> str:
    """An env-provided key, else one generated once per installation and kept in var/.

    Never a fixed default: a key committed to the repository would sign every session cookie
    of every deployment the same way.
    """
    if key := os.environ.get("DJANGO_SECRET_KEY"):
        return key
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = _env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [
    host for host in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if host
]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "axes",
    "csp",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "core",
    "console",
    "django_celery_beat",
    "analytics",
    "history",
    "alerts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "core.errors.MethodNotAllowedMiddleware",
    "core.errors.ClusterErrorMiddleware",
    "core.request_guard.RefuseNulCharacters",
    # Last, as django-axes asks: turns a locked-out login into its lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "project.urls"
CSRF_FAILURE_VIEW = "core.errors.csrf_failure"  # the console's 403 page, with what to do
WSGI_APPLICATION = None
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "core.context_processors.console",
                "alerts.context_processors.alerts_badge",
            ],
            "builtins": ["core.formatting"],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        env="DATABASE_URL",
        default=f"sqlite:///{VAR_DIR / 'console.sqlite3'}",
        conn_max_age=60,
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Tests start worker processes (Celery) that must open the test database: a file, not memory.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_console.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Celery: Redis when configured, otherwise a filesystem transport that needs no server.
CELERY_DATA_DIR = VAR_DIR / "celery"
CELERY_BROKER_URL = REDIS_URL or "filesystem://"
CELERY_RESULT_BACKEND = REDIS_URL or f"file://{CELERY_DATA_DIR / 'results'}"
if not REDIS_URL:
    for _folder in ("queue", "processed", "results", "control"):
        (CELERY_DATA_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_DATA_DIR / "queue"),
        "data_folder_out": str(CELERY_DATA_DIR / "queue"),
        "processed_folder": str(CELERY_DATA_DIR / "processed"),
        "store_processed": False,
        # Exchange tables of broadcasts (worker control): under var/, not the working directory.
        "control_folder": str(CELERY_DATA_DIR / "control"),
    }
CELERY_TASK_TRACK_STARTED = True
# A worker takes a task only when it has a free slot: a report runs for minutes, and a replay or an
# alert check prefetched behind it would wait for it while another worker sat idle. (Celery's
# default reserves four tasks per slot.) Holding none ahead is only possible on Redis; the
# filesystem transport of the embedded default runs one worker, so one ahead costs nothing there.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
if REDIS_URL:
    CELERY_WORKER_DISABLE_PREFETCH = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = os.environ.get("TZ", "UTC")

SPARK_MASTER = os.environ.get("SPARK_MASTER", "local[*]")
# Analytics: where the store archives sealed segments (any URI Spark reads) and where reports go.
ANALYTICS_ARCHIVE_URI = os.environ.get("ANALYTICS_ARCHIVE_URI", str(VAR_DIR / "archive"))
ANALYTICS_REPORTS_DIR = Path(os.environ.get("ANALYTICS_REPORTS_DIR", VAR_DIR / "reports"))
ANALYTICS_SHUFFLE_PARTITIONS = int(os.environ.get("ANALYTICS_SHUFFLE_PARTITIONS", "8"))
# A running report's worker proves it is alive this often; a run silent for ANALYTICS_ABANDONED_AFTER
# seconds is shown as failed (its worker stopped) instead of "running" forever.
ANALYTICS_HEARTBEAT_SECONDS = float(os.environ.get("ANALYTICS_HEARTBEAT_SECONDS", "30"))
ANALYTICS_ABANDONED_AFTER = float(os.environ.get("ANALYTICS_ABANDONED_AFTER", "120"))
# A worker stops its Spark session (its ~800 MB JVM, and on a cluster the cores its application
# holds) once no report has run for this many seconds; the next report starts a new one.
ANALYTICS_SPARK_IDLE_SECONDS = _non_negative_seconds("ANALYTICS_SPARK_IDLE_SECONDS", "300")
# The shortest interval a report schedule may have (each run is a Spark job).
ANALYTICS_MIN_INTERVAL_SECONDS = int(os.environ.get("ANALYTICS_MIN_INTERVAL_SECONDS", "60"))
# Alerts (W15): receivers every rule notifies besides its own (comma separated), and how webhooks
# are delivered: each POST waits at most TIMEOUT seconds; a failed one is retried after BACKOFF
# seconds, doubling up to BACKOFF_MAX, and given up after MAX_ATTEMPTS attempts in all. E-mail goes
# through Django's mail settings (EMAIL_HOST, EMAIL_PORT, ... read below). ALERT_CONSOLE_URL (say
# https://console.example.com) makes notifications link to the event's page.
ALERT_WEBHOOK_URLS = [u.strip() for u in os.environ.get("ALERT_WEBHOOK_URLS", "").split(",") if u.strip()]


# Webhooks may go only to public addresses (alerts/webhook_target.py) but for these networks or
# addresses (comma separated, e.g. "10.0.5.0/24,127.0.0.1"): a receiver inside the network.
def _networks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    try:
        return [
            ipaddress.ip_network(n.strip(), strict=False)
            for n in os.environ.get(name, "").split(",")
            if n.strip()
        ]
    except ValueError as exc:  # the console does not start on a list it cannot read
        raise ImproperlyConfigured(f"{name}: {exc}") from None


ALERT_WEBHOOK_ALLOWED_NETWORKS = _networks("ALERT_WEBHOOK_ALLOWED_NETWORKS")
ALERT_EMAIL_TO = [a.strip() for a in os.environ.get("ALERT_EMAIL_TO", "").split(",") if a.strip()]
ALERT_EMAIL_FROM = os.environ.get("ALERT_EMAIL_FROM", "pyrocket-alerts@localhost")
ALERT_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("ALERT_WEBHOOK_TIMEOUT_SECONDS", "5"))
ALERT_WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("ALERT_WEBHOOK_MAX_ATTEMPTS", "6"))
ALERT_WEBHOOK_BACKOFF_SECONDS = float(os.environ.get("ALERT_WEBHOOK_BACKOFF_SECONDS", "10"))
ALERT_WEBHOOK_BACKOFF_MAX_SECONDS = float(os.environ.get("ALERT_WEBHOOK_BACKOFF_MAX_SECONDS", "600"))
ALERT_CONSOLE_URL = os.environ.get("ALERT_CONSOLE_URL", "").rstrip("/")
# Resolved events are kept this long for the events page, then deleted by the evaluator.
ALERT_RESOLVED_RETENTION_DAYS = int(os.environ.get("ALERT_RESOLVED_RETENTION_DAYS", "30"))
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = _env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = float(os.environ.get("EMAIL_TIMEOUT", "10"))
# Name servers the console offers, comma separated; each entry may be a "host:port;host:port" list.
BROKER_NAMESRV = os.environ.get("BROKER_NAMESRV", "127.0.0.1:9876")
# RocketMQ 5's controllers (controller mode, issue 22), "host:port;host:port": the cluster page
# shows their view of each broker set and offers switchover. Unset: the controllerAddr of the
# brokers running with enableControllerMode=true; neither: failover is not configured.
CONSOLE_CONTROLLER_ADDR = os.environ.get("CONSOLE_CONTROLLER_ADDR", "")
# How long /metrics reuses figures collected from the cluster (scrapes stay cheap for the brokers).
CONSOLE_METRICS_CACHE_SECONDS = float(os.environ.get("CONSOLE_METRICS_CACHE_SECONDS", "10"))
# Metric history (W16): the beat task "history-sample" samples every configured cluster this often
# (the interval is set when the schedule is first created; change it later on the schedules page or
# in /admin/ like any beat entry). Raw points are kept HISTORY_RAW_DAYS, 5-minute rollups
# HISTORY_ROLLUP_DAYS.
HISTORY_SAMPLE_SECONDS = int(os.environ.get("HISTORY_SAMPLE_SECONDS", "30"))
HISTORY_RAW_DAYS = float(os.environ.get("HISTORY_RAW_DAYS", "2"))
HISTORY_ROLLUP_DAYS = float(os.environ.get("HISTORY_ROLLUP_DAYS", "30"))
# ACL (brokers with aclEnable=true): the account every client of the console signs with — its
# pages, /metrics, the live tail and the Celery tasks (DLQ replays). Both or neither; the same
# variables mqadmin reads. The console changes topics, groups and ACL accounts: give it an admin
# account of plain_acl.yml.
ROCKETMQ_ACCESS_KEY = os.environ.get("ROCKETMQ_ACCESS_KEY", "")
ROCKETMQ_SECRET_KEY = os.environ.get("ROCKETMQ_SECRET_KEY", "")
# TLS to name servers and brokers whose tls.server.mode is permissive or enforcing: the variables
# the SDK and mqadmin read too. The servers' certificates must chain to ROCKETMQ_TLS_TRUST_CERT (a
# PEM file; the system's CAs when empty) and name the address connected to, unless
# ROCKETMQ_TLS_TEST_MODE_ENABLE (encrypt without checking). The client certificate is for
# servers with tls.server.need.client.auth.
ROCKETMQ_TLS_ENABLE = _env_bool("ROCKETMQ_TLS_ENABLE", False)
ROCKETMQ_TLS_TRUST_CERT = os.environ.get("ROCKETMQ_TLS_TRUST_CERT", "")
ROCKETMQ_TLS_TEST_MODE_ENABLE = _env_bool("ROCKETMQ_TLS_TEST_MODE_ENABLE", False)
ROCKETMQ_TLS_CLIENT_CERT = os.environ.get("ROCKETMQ_TLS_CLIENT_CERT", "")
ROCKETMQ_TLS_CLIENT_KEY = os.environ.get("ROCKETMQ_TLS_CLIENT_KEY", "")
ROCKETMQ_TLS_CLIENT_KEY_PASSWORD = os.environ.get("ROCKETMQ_TLS_CLIENT_KEY_PASSWORD", "")

# Every password the console sets goes through these: the admin pages, ensure_admin (also for
# CONSOLE_ADMIN_PASSWORD and the generated one), changepassword and createsuperuser.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": int(os.environ.get("CONSOLE_PASSWORD_MIN_LENGTH", "10"))},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Login throttling (django-axes): after CONSOLE_LOGIN_FAILURE_LIMIT failed logins of one user name
# from one address, that pair is refused (HTTP 429, registration/locked_out.html) for
# CONSOLE_LOGIN_COOLOFF_MINUTES; each failure during the lockout starts the cool-off again. An admin
# unlocks at once with `manage.py axes_reset_username NAME` (or axes_reset_ip / axes_reset), or by
# deleting the attempt under /admin/axes/.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("CONSOLE_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("CONSOLE_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Behind a reverse proxy every login would come from the proxy's address: name how many proxies
# append to X-Forwarded-For so the client's own address is the one counted (core.client_address).
CONSOLE_TRUSTED_PROXY_COUNT = int(os.environ.get("CONSOLE_TRUSTED_PROXY_COUNT", "0"))
AXES_CLIENT_IP_CALLABLE = "core.client_address.client_address"

# /metrics: a scraper presents this bearer token (Prometheus' authorization.credentials); unset, only
# a logged-in console user may read it.
CONSOLE_METRICS_TOKEN = os.environ.get("CONSOLE_METRICS_TOKEN", "")

# Security headers. The policy allows the console's own scripts, styles and sockets only: no inline
# script or style (htmx's indicator styles are in console.css, see htmx-config in base.html).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],  # data: for the empty favicon of base.html
        "connect-src": ["'self'"],  # 'self' covers the live tail's ws:/wss: to the same host
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Production over HTTPS (see the README's Security section; `manage.py check --deploy` is clean with
# them on). Off by default: `make run` serves plain http on loopback, where secure cookies would
# never be sent back and a redirect to https would find nothing.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _env_bool("CONSOLE_SECURE_COOKIES", False)
SECURE_SSL_REDIRECT = _env_bool("CONSOLE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = int(os.environ.get("CONSOLE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("CONSOLE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = _env_bool("CONSOLE_HSTS_PRELOAD", True)
if _env_bool("CONSOLE_PROXY_SSL_HEADER", False):  # a TLS-terminating proxy sets X-Forwarded-Proto
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TZ", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"
