#!/usr/bin/env bash
# `make install`: create .venv and install the hashed lock into it with uv, then the client (editable).
#
# uv is the Python packaging tool of Astral (a pip-compatible installer and resolver written in Rust, with one
# global cache it links files from): it installs this lock in a tenth of pip's time. It is itself a package of the
# lock, installed first by pip from the lock's own hashed line. Where uv cannot be installed (no wheel for this
# platform, an index that lacks it) the install goes on with pip, slower, and says so.
#
# Env: PYTHON (default python3), VENV (.venv), LOCK (requirements-lock.txt), PADDLECLOUD_NO_UV=1 (pip only).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3} venv=${VENV:-.venv} lock=${LOCK:-requirements-lock.txt}
py=$venv/bin/python

uv=""
find_uv() {  # the venv's uv; else the lock's, kept per user by its hashed lines (pip puts it there once)
  [ "${PADDLECLOUD_NO_UV:-}" = "1" ] && return 1
  if [ -x "$venv/bin/uv" ]; then uv=$venv/bin/uv; return 0; fi
  local lines key boot
  lines=$(awk '/^uv==/ {on=1} on {print} on && !/\\$/ {exit}' "$lock")
  [ -n "$lines" ] || { echo "make install: $lock has no uv line" >&2; return 1; }
  key=$(printf '%s\n' "$lines" | sha256sum | cut -c1-16)
  boot=${XDG_CACHE_HOME:-$HOME/.cache}/paddlecloud/uv-$key
  if [ ! -x "$boot/bin/uv" ]; then
    rm -rf "$boot.tmp" && mkdir -p "$boot.tmp" && printf '%s\n' "$lines" > "$boot.tmp/uv.txt"
    "$python" -m pip install -q --disable-pip-version-check --root-user-action=ignore --require-hashes --no-deps \
      --target "$boot.tmp" -r "$boot.tmp/uv.txt" || return 1
    rm -rf "$boot" && mv "$boot.tmp" "$boot"
  fi
  uv=$boot/bin/uv
}

if find_uv; then
  # uv makes the venv too (python -m venv spends 5-15 s installing pip from its own wheel); the lock then puts
  # uv in the venv, for the next install and `make lock`.
  [ -x "$py" ] || "$uv" venv -q --seed --python "$python" "$venv"
  "$uv" pip install -q --python "$py" --require-hashes --no-deps -r "$lock"
  "$uv" pip install -q --python "$py" --no-deps --no-build-isolation -e ./client
  "$uv" pip check -q --python "$py"
else
  echo "make install: uv could not be installed here (see above), so pip installs the lock instead (about 10x slower)" >&2
  [ -x "$py" ] || "$python" -m venv "$venv"
  # The lock without uv's own lines, which pip just refused.
  without_uv=$(mktemp) && trap 'rm -f "$without_uv"' EXIT
  awk '/^uv==/ {skip=1; next} skip && /^ / {next} {skip=0; print}' "$lock" > "$without_uv"
  "$py" -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r "$without_uv"
  "$py" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e ./client
  "$py" -m pip check
fi
