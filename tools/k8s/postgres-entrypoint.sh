#!/bin/sh
# The official postgres image's first-start contract, for tools/k8s/Dockerfile.services (a test
# stand-in): on an empty PGDATA make the cluster with POSTGRES_USER as its superuser (password
# POSTGRES_PASSWORD, scram-sha-256 over TCP) and the database POSTGRES_DB, then run the command.
set -eu
: "${PGDATA:?PGDATA must be set}"
user=${POSTGRES_USER:-postgres}
database=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set on first start}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" --encoding=UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  if [ "$database" != postgres ]; then
    echo "CREATE DATABASE \"$database\"" | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
  echo "docker-entrypoint.sh: made the cluster in $PGDATA (superuser $user, database $database)"
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -D "$PGDATA" "$@"
fi
exec "$@"
