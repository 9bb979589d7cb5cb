#!/bin/sh
# The image's entry: a secret key kept in the volume when none is given, then `manage.py serve`
# (migrations once, the first admin, the server processes).
set -eu

if [ -z "${SECRET_KEY:-}" ]; then
  key=/data/secret_key
  if [ ! -s "$key" ]; then
    # Written whole under another name, then linked: of containers starting together on one
    # volume, exactly one key wins and nobody reads half of it.
    tmp="$key.$$"
    (umask 077 && python -c 'import secrets; print(secrets.token_urlsafe(50))' >"$tmp")
    ln "$tmp" "$key" 2>/dev/null || true
    rm -f "$tmp"
  fi
  SECRET_KEY=$(cat "$key")
  export SECRET_KEY
fi

exec python /app/manage.py serve "$@"
