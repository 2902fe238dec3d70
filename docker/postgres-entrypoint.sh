#!/bin/sh
# PostgreSQL from Debian's packages for compose.yaml's `postgres` service: on first start
# create the cluster in $PGDATA with the user and database named by POSTGRES_USER / POSTGRES_DB
# (password POSTGRES_PASSWORD, required), reachable from the compose network with a password.
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
POSTGRES_USER=${POSTGRES_USER:-pyrocket}
POSTGRES_DB=${POSTGRES_DB:-pyrocket}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8
    rm -f "$pwfile"
    echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    echo "host all all ::/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl --pgdata="$PGDATA" -o "-c listen_addresses=''" -w start
    [ "$POSTGRES_DB" = postgres ] || createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
    pg_ctl --pgdata="$PGDATA" -m fast -w stop
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
