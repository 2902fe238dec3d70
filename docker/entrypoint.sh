#!/bin/sh
# The one entry point of the pyrocket image: its first argument names the process to run.
# compose.yaml's services differ only in that argument and their environment. The same script
# runs on a host (tests/docker/ starts every compose service with it): APP_DIR and the
# variables below are all it reads.
#
#   namesrv | controller | broker | web | worker | beat | spark-master | spark-worker
#   bootstrap      migrate the console's database, then create the first admin (prints how to log in)
#   healthcheck …  the probes of compose.yaml's health checks (docker/healthcheck.py)
#   anything else  run as given (e.g. `mqadmin clusterList -n namesrv-1:9876`, `bash`)
set -eu

APP_DIR=${APP_DIR:-/opt/pyrocket/app}
VAR_DIR=${CONSOLE_VAR_DIR:-/var/lib/pyrocket}
BIND_HOST=${BIND_HOST:-0.0.0.0}
export CONSOLE_VAR_DIR="$VAR_DIR"
# Processes keep their working files (Spark's among them) under the var dir, not the read-only
# source tree.
if [ -d "$VAR_DIR" ]; then cd "$VAR_DIR"; fi

# A conf file mounted read-only (a template) becomes the process's own file under the var
# dir on first start; ${NAME} in it is replaced by that environment variable. An existing
# file is never rewritten: settings the console changed (it writes broker.conf) stay.
own_conf() {  # own_conf TEMPLATE NAME -> prints the path of the file to run with
    target="$VAR_DIR/$2"
    if [ ! -e "$target" ]; then
        python - "$1" "$target" <<'PY'
import os, string, sys
from pathlib import Path

template, target = Path(sys.argv[1]), Path(sys.argv[2])
text = string.Template(template.read_text()).substitute(os.environ)  # a missing variable stops here
target.parent.mkdir(parents=True, exist_ok=True)
tmp = target.with_name(f".{target.name}.tmp")
tmp.write_text(text)
os.replace(tmp, target)
PY
        echo "config: $target (created from $1)" >&2
    fi
    echo "$target"
}

# The console's processes wait for the bootstrap service's migrations: not every compose engine
# honours `condition: service_completed_successfully` (podman 4.3 with podman-compose ignores it).
wait_for_migrations() {
    deadline=$(( $(date +%s) + ${WAIT_FOR_MIGRATIONS_S:-300} ))
    until python "$APP_DIR/manage.py" migrate --check >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "the database is not migrated after ${WAIT_FOR_MIGRATIONS_S:-300} s (run: bootstrap)" >&2
            exit 1
        fi
        echo "waiting for the database's migrations (the bootstrap service)" >&2
        sleep 3
    done
}

command=${1:-help}
[ $# -gt 0 ] && shift
case "$command" in
    namesrv)
        exec python -m broker.namesrv --host "$BIND_HOST" -p "${NAMESRV_PORT:-9876}" "$@" ;;
    controller)
        conf=$(own_conf "${CONTROLLER_CONF_TEMPLATE:-/etc/pyrocket/controller.conf}" controller.conf)
        exec python -m broker.controller -c "$conf" "$@" ;;
    broker)
        conf=$(own_conf "${BROKER_CONF_TEMPLATE:-/etc/pyrocket/broker.conf}" broker.conf)
        exec python -m broker.server -c "$conf" "$@" ;;
    web)
        wait_for_migrations
        exec python -m daphne -b "$BIND_HOST" -p "${CONSOLE_PORT:-8000}" --proxy-headers \
            project.asgi:application "$@" ;;
    worker)
        wait_for_migrations
        exec celery -A project worker -l "${LOG_LEVEL:-info}" \
            --concurrency "${CELERY_CONCURRENCY:-2}" -n "${CELERY_WORKER_NAME:-worker@%h}" "$@" ;;
    beat)
        wait_for_migrations
        # The schedule is in the database (django-celery-beat); the pid file lets the probe
        # see the process.
        exec celery -A project beat -l "${LOG_LEVEL:-info}" \
            --pidfile "$VAR_DIR/celerybeat.pid" "$@" ;;
    spark-master)
        exec spark-class org.apache.spark.deploy.master.Master --host "${SPARK_HOST:-$(hostname)}" \
            --port "${SPARK_MASTER_PORT:-7077}" --webui-port "${SPARK_MASTER_WEBUI_PORT:-8080}" "$@" ;;
    spark-worker)
        mkdir -p "$VAR_DIR/spark-work"
        exec spark-class org.apache.spark.deploy.worker.Worker --host "${SPARK_HOST:-$(hostname)}" \
            --webui-port "${SPARK_WORKER_WEBUI_PORT:-8081}" --cores "${SPARK_WORKER_CORES:-2}" \
            --memory "${SPARK_WORKER_MEMORY:-2g}" --work-dir "$VAR_DIR/spark-work" \
            "${SPARK_MASTER:?SPARK_MASTER=spark://host:7077}" "$@" ;;
    bootstrap)
        python "$APP_DIR/manage.py" migrate --noinput
        exec python "$APP_DIR/manage.py" ensure_admin --url "${CONSOLE_URL:-http://127.0.0.1:8000/}" ;;
    healthcheck)
        exec python "$(dirname "$0")/healthcheck.py" "$@" ;;
    help|--help|-h)
        sed -n '2,12p' "$0" ;;
    *)
        exec "$command" "$@" ;;
esac
