#!/usr/bin/env bash
# Sourced by .ci/run: install and start PostgreSQL and Redis from Debian packages (as root) and
# export DATABASE_URL and CELERY_BROKER_URL so the suite runs against the production stack.
set -euo pipefail

need=()
command -v pg_ctlcluster >/dev/null && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
command -v bwrap >/dev/null || need+=(bubblewrap)  # the local engine's job sandbox
command -v slirp4netns >/dev/null || need+=(slirp4netns)  # local jobs' egress (jobs/engines/local/network.py)
command -v nft >/dev/null || need+=(nftables)  # the rules that keep that egress off the host's networks
command -v chromium >/dev/null || need+=(chromium)  # the browser tests (tests/browser)
command -v buildah >/dev/null || need+=(buildah)  # paddlectl build's real build tests (tests/cli/test_build.py)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

pg_version=$(ls /usr/lib/postgresql | sort -V | tail -1)
if ! pg_lsclusters -h | grep -q "^$pg_version main"; then
  pg_createcluster "$pg_version" main >/dev/null
fi
pg_ctlcluster "$pg_version" main start 2>/dev/null || true
for _ in $(seq 1 60); do pg_isready -q -h 127.0.0.1 && break; sleep 0.5; done
su postgres -c "psql -q -v ON_ERROR_STOP=1" <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'paddlecloud') THEN
    CREATE ROLE paddlecloud LOGIN CREATEDB PASSWORD 'paddlecloud';
  END IF;
END $$;
SQL
su postgres -c "psql -tAc \"SELECT 1 FROM pg_database WHERE datname='paddlecloud'\"" | grep -q 1 \
  || su postgres -c "createdb -O paddlecloud paddlecloud"

if ! redis-cli -p 6379 ping >/dev/null 2>&1; then
  redis-server --daemonize yes --port 6379 --bind 127.0.0.1 --save "" --appendonly no >/dev/null
  for _ in $(seq 1 40); do redis-cli -p 6379 ping >/dev/null 2>&1 && break; sleep 0.25; done
fi

export DATABASE_URL="postgresql://paddlecloud:paddlecloud@127.0.0.1:5432/paddlecloud"
export CELERY_BROKER_URL="redis://127.0.0.1:6379/0"
echo "CI services: PostgreSQL $pg_version and Redis $(redis-server --version | awk '{print $3}') are up"
