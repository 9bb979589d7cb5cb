#!/bin/sh
# As the official image's entrypoint, as far as deploy/compose.yaml uses it: on an empty
# $PGDATA, a UTF-8 cluster whose superuser is POSTGRES_USER with POSTGRES_PASSWORD, the
# database POSTGRES_DB, and password (scram-sha-256) authentication from other hosts (trust on
# the local socket, for pg_isready and this script); then `postgres` as user postgres,
# listening on every address.
set -eu
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?the database needs POSTGRES_PASSWORD}"
  password_file=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$password_file"
  initdb --username="$POSTGRES_USER" --pwfile="$password_file" --encoding=UTF8 \
    --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA"
  rm -f "$password_file"
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    # On the socket only, until the database exists.
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
    createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
    pg_ctl -D "$PGDATA" -m fast -w stop
  fi
fi

if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
