#!/bin/sh
# As the official image's entrypoint, as far as deploy/compose.yaml uses it: `redis-server` with
# the arguments given, as user redis, with protected mode off (the official image is built so:
# the container's network is what decides who reaches it).
set -eu
if [ "${1#-}" != "$1" ]; then
  set -- redis-server "$@"
fi
if [ "$1" = redis-server ]; then
  set -- "$@" --protected-mode no
  if [ "$(id -u)" = 0 ]; then
    exec setpriv --reuid=redis --regid=redis --init-groups "$@"
  fi
fi
exec "$@"
