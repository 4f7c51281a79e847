#!/usr/bin/env bash
# Install Debian's PostgreSQL server packages (idempotent) for the anarchon-sql tests.
# The test fixture starts its own throw-away server from these binaries (as the
# `postgres` user, on 127.0.0.1 and a free port); no cluster service is needed.
set -euo pipefail

have_server() {
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null 2>&1 \
        && compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null 2>&1 \
        && id postgres >/dev/null 2>&1
}

if have_server; then
    echo "postgresql: already installed ($(ls /usr/lib/postgresql | tr '\n' ' '))"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# postgresql-common would create and start a "main" cluster; the tests do not use it.
$SUDO mkdir -p /etc/postgresql-common
if [ ! -f /etc/postgresql-common/createcluster.conf ] \
    || ! grep -q '^create_main_cluster' /etc/postgresql-common/createcluster.conf; then
    echo "create_main_cluster = false" | $SUDO tee -a /etc/postgresql-common/createcluster.conf >/dev/null
fi
$SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null

have_server || { echo "postgresql: installation did not provide initdb/pg_ctl" >&2; exit 1; }
echo "postgresql: installed ($(ls /usr/lib/postgresql | tr '\n' ' '))"
