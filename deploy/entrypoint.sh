#!/bin/sh
# The image's entry: a secret key kept in the volume (SECRET_KEY_FILE, which settings read) when
# no SECRET_KEY is given, then `manage.py serve` (migrations once, the first admin, the server
# processes), or the command the container was given instead.
set -eu

SECRET_KEY_FILE=${SECRET_KEY_FILE:-/data/secret_key}
export SECRET_KEY_FILE
if [ -z "${SECRET_KEY:-}" ] && [ ! -s "$SECRET_KEY_FILE" ]; then
  # Written whole under another name, then linked: of containers starting together on one
  # volume, exactly one key wins and nobody reads half of it.
  # (mktemp, not $$: every container's entrypoint is process 1.)
  tmp=$(mktemp "$SECRET_KEY_FILE.XXXXXX")
  python -c 'import secrets; print(secrets.token_urlsafe(50))' >"$tmp"
  ln "$tmp" "$SECRET_KEY_FILE" 2>/dev/null || true
  rm -f "$tmp"
fi

# A command given to the container (`podman compose … run --rm app1 python manage.py migrate`)
# runs in place of the server, with the same key; options (`--no-server`) are serve's own.
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  exec "$@"
fi
exec python /app/manage.py serve "$@"
