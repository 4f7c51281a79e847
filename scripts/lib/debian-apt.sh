# shellcheck shell=bash
# Private apt for the install scripts: download Debian packages without touching the
# machine's apt state (its lists, its sources, its installed packages).
#
# The mirror is the machine's own: the first Debian archive entry of its apt
# configuration (deb822 files /etc/apt/sources.list.d/*.sources, then one-line
# /etc/apt/sources.list and sources.list.d/*.list). This repository names no package host.
#
#   source scripts/lib/debian-apt.sh
#   debian_mirror                      # prints e.g. the URI and the keyring, tab-separated
#   private_apt_init DIR SUITE...      # private sources + lists in DIR, `apt-get update`d
#   private_apt get download PKG...    # apt-get with the private options (in the cwd)
#   private_apt cache policy PKG       # apt-cache with the private options

# The Debian archive of this machine: "URI<TAB>KEYRING" (KEYRING may be empty).
# $DEBIAN_APT_ROOT (default: none) is prefixed to /etc, for tests of this function.
# An entry counts when it carries the release's own suite (VERSION_CODENAME of
# /etc/os-release, e.g. bookworm) and the main component; -security is not the archive.
debian_mirror() {
    local codename
    local etc="${DEBIAN_APT_ROOT:-}/etc"
    codename=$(. "$etc/os-release" 2>/dev/null && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || { echo "debian-apt: no VERSION_CODENAME in $etc/os-release" >&2; return 1; }
    local files=()
    shopt -s nullglob
    files=("$etc"/apt/sources.list.d/*.sources)
    local lists=("$etc/apt/sources.list" "$etc"/apt/sources.list.d/*.list)
    shopt -u nullglob
    # deb822 stanzas: Types, URIs, Suites, Components, Signed-By (blank line between stanzas)
    if [ ${#files[@]} -gt 0 ]; then
        awk -v want="$codename" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") \
                    && (" " comps " ") ~ / main / && enabled != "no" && uris != "") {
                    split(uris, u, " "); printf "%s\t%s\n", u[1], keyring; found = 1; exit
                }
                types = uris = suites = comps = keyring = enabled = ""
            }
            FNR == 1 && NR > 1 { flush() }   # a new file ends the last stanza of the one before
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            {
                key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
                if (key == "types") types = $0
                else if (key == "uris") uris = $0
                else if (key == "suites") suites = $0
                else if (key == "components") comps = $0
                else if (key == "signed-by") keyring = $0
                else if (key == "enabled") enabled = tolower($0)
            }
            END { if (!found) flush() }
        ' "${files[@]}" | head -n1 | grep . && return 0
    fi
    # one-line format: deb [options] URI SUITE COMPONENT...
    local f
    for f in "${lists[@]}"; do
        [ -f "$f" ] || continue
        awk -v want="$codename" '
            $1 == "deb" {
                keyring = ""; i = 2
                if ($2 ~ /^\[/) {
                    while (i <= NF) {
                        if ($i ~ /signed-by=/) { keyring = $i; sub(/.*signed-by=/, "", keyring); sub(/\]$/, "", keyring) }
                        if ($i ~ /\]$/) { i++; break }
                        i++
                    }
                }
                uri = $i; suite = $(i + 1); comps = ""
                for (j = i + 2; j <= NF; j++) comps = comps " " $j
                if (suite == want && (comps " ") ~ / main /) { printf "%s\t%s\n", uri, keyring; exit }
            }
        ' "$f" | head -n1 | grep . && return 0
    done
    echo "debian-apt: no Debian archive for $codename in $etc/apt/sources.list{,.d/*}" >&2
    return 1
}

PRIVATE_APT_OPTS=()

# private_apt_init DIR SUITE... : sources for SUITEs (main) on this machine's mirror,
# lists and package cache under DIR, then `apt-get update` on them.
private_apt_init() {
    local dir=$1
    shift
    local mirror uri keyring
    mirror=$(debian_mirror) || return 1
    uri=${mirror%%$'\t'*}
    keyring=${mirror#*$'\t'}
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    # An empty dpkg status: the candidate is the lists' newest, whatever is installed.
    : >"$dir/status"
    : >"$dir/sources.list"
    local suite option=""
    if [ -n "$keyring" ]; then option="[signed-by=$keyring] "; fi
    for suite in "$@"; do
        echo "deb ${option}${uri} ${suite} main" >>"$dir/sources.list"
    done
    PRIVATE_APT_OPTS=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
        -o "Dir::State::status=$dir/status" -o APT::Sandbox::User=root)
    apt-get "${PRIVATE_APT_OPTS[@]}" update -qq
}

# private_apt get|cache ARGS... : apt-get or apt-cache on the private lists.
private_apt() {
    local tool=$1
    shift
    "apt-$tool" "${PRIVATE_APT_OPTS[@]}" "$@"
}
