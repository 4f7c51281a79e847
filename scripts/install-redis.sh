#!/usr/bin/env bash
# Install Debian's own Redis (7.0 on Debian 12) privately into $REDIS_HOME, for the
# anarchon-redis tests and benchmark, without touching the machine's packages:
#
#   $REDIS_HOME/bin/redis-server, redis-cli   wrappers that run the unpacked binaries
#                                             with their unpacked libraries
#
# The packages come from this machine's Debian mirror, read from its apt configuration
# (scripts/lib/debian-apt.sh); the lists go to a private folder. No service is started.
# The test fixtures call this script when their cache lacks the server (see
# packages/anarchon-testservers/src/anarchon_testservers/cache.py); Redis >= 8.6 is scripts/install-redis86.sh.
# Idempotent. Usage: REDIS_HOME=DIR bash scripts/install-redis.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/debian-apt.sh
source "$here/lib/debian-apt.sh"

REDIS_HOME="${REDIS_HOME:?set REDIS_HOME to the folder to install into}"
wrapper="$REDIS_HOME/bin/redis-server"

if [ -x "$wrapper" ] && "$wrapper" --version >/dev/null 2>&1; then
    echo "redis-server: already installed in $REDIS_HOME ($("$wrapper" --version | cut -d' ' -f3))"
    exit 0
fi

codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
private_apt_init "$tmp/apt" "$codename"
mkdir -p "$tmp/debs" "$tmp/root"
# redis-server holds the redis-server link, redis-tools the binary (redis-check-rdb) and
# redis-cli; the libraries are those Debian's base system may lack.
(cd "$tmp/debs" && private_apt get download -qq redis-server redis-tools libjemalloc2 liblzf1 \
    libatomic1 >/dev/null)
for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$tmp/root"; done
[ -f "$tmp/root/usr/bin/redis-check-rdb" ] || { echo "redis: no redis-check-rdb in the packages" >&2; exit 1; }

mkdir -p "$REDIS_HOME/bin"
rm -rf "$REDIS_HOME/root"
cp -a "$tmp/root" "$REDIS_HOME/root"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")
lib="$REDIS_HOME/root/usr/lib/$multiarch:$REDIS_HOME/root/lib/$multiarch"
for tool in redis-server redis-cli; do
    cat >"$REDIS_HOME/bin/$tool" <<WRAP
#!/bin/sh
# Debian's $tool, unpacked privately by scripts/install-redis.sh.
LD_LIBRARY_PATH="$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$REDIS_HOME/root/usr/bin/$tool" "\$@"
WRAP
    chmod 0755 "$REDIS_HOME/bin/$tool"
done

"$wrapper" --version >/dev/null 2>&1 || { echo "redis-server: the wrapper does not run:" >&2; "$wrapper" --version >&2 || true; exit 1; }
echo "redis-server: installed to $REDIS_HOME ($("$wrapper" --version | cut -d' ' -f3))"
