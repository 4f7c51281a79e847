#!/usr/bin/env bash
# Install a private Redis >= 8.6 (for the `idmp` strategy's tests) into $REDIS86_HOME,
# without touching the machine's apt sources, lists or libraries.
#
# Debian 12 ships Redis 7.0. Debian experimental carries redis-server 8.6+, built against
# a newer glibc: it runs here through Debian sid's loader and libraries, unpacked next to
# it. The packages come from this machine's Debian mirror, read from its apt
# configuration (scripts/lib/debian-apt.sh); the apt lists go to a private folder, and
# `apt-cache policy` on them picks the newest redis-server >= 8.6 of experimental or sid.
#
# Result: $REDIS86_HOME/bin/redis-server and redis-cli, wrapper scripts that run the
# unpacked binaries through the private loader. The test fixtures call this script when
# their cache lacks the server (ANARCHON_REDIS86_SERVER overrides the path). Idempotent.
# Usage: REDIS86_HOME=DIR bash scripts/install-redis86.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/debian-apt.sh
source "$here/lib/debian-apt.sh"

REDIS86_HOME="${REDIS86_HOME:?set REDIS86_HOME to the folder to install into}"

wrapper="$REDIS86_HOME/bin/redis-server"
works() {
    [ -x "$wrapper" ] || return 1
    local v
    v=$("$wrapper" --version 2>/dev/null | sed -n 's/.*v=\([0-9][0-9.]*\).*/\1/p')
    [ -n "$v" ] || return 1
    # accept >= 8.6
    python3 - "$v" <<'PY'
import sys
v = tuple(int(p) for p in sys.argv[1].split(".")[:2])
sys.exit(0 if v >= (8, 6) else 1)
PY
}

if works; then
    echo "redis-server 8.6+: already installed ($("$wrapper" --version | cut -d' ' -f3))"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debs" "$tmp/root"
private_apt_init "$tmp/apt" experimental sid

# The newest redis-server version >= 8.6 among the private lists' candidates.
version=$(private_apt cache policy redis-server | awk '
    /Version table:/ {table = 1; next}
    table {v = $1; if (v == "***") v = $2; if (v ~ /^[0-9]+:?[0-9]+\.[0-9]/) print v}' \
    | while read -r v; do
        up=${v#*:}; up=${up%%-*}
        major=${up%%.*}; rest=${up#*.}; minor=${rest%%.*}
        if [ "$major" -gt 8 ] || { [ "$major" -eq 8 ] && [ "$minor" -ge 6 ]; }; then echo "$v"; fi
    done | sort -V | tail -n1)
if [ -z "$version" ]; then
    echo "redis-server >= 8.6: not found in Debian experimental or sid" >&2
    private_apt cache policy redis-server >&2 || true
    exit 1
fi
echo "redis-server >= 8.6: using Debian's $version"

(cd "$tmp/debs" && private_apt get download "redis-server=$version" "redis-tools=$version" \
    libc6 libstdc++6 libgcc-s1 libatomic1 liblzf1 libjemalloc2 >/dev/null)
for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$tmp/root"; done

mkdir -p "$REDIS86_HOME/bin"
rm -rf "$REDIS86_HOME/root"
cp -a "$tmp/root" "$REDIS86_HOME/root"
lib="$REDIS86_HOME/root/usr/lib/x86_64-linux-gnu"
for tool in redis-server redis-cli; do
    tee "$REDIS86_HOME/bin/$tool" >/dev/null <<WRAP
#!/bin/sh
# Debian experimental's $tool $version through Debian sid's private loader and libraries.
exec "$REDIS86_HOME/root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$lib:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "$REDIS86_HOME/root/usr/bin/$tool" "\$@"
WRAP
    chmod 0755 "$REDIS86_HOME/bin/$tool"
done

if ! works; then
    echo "redis-server >= 8.6: the installed wrapper does not run:" >&2
    "$wrapper" --version >&2 || true
    exit 1
fi
echo "redis-server >= 8.6: installed to $REDIS86_HOME ($("$wrapper" --version | cut -d' ' -f3))"
