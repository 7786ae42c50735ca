# integration/packages.sh: install Debian packages that are missing, and only those.
# Sourced by integration/setup.sh and integration/kernel/setup.sh (each defines `say`).
#
#   install_missing <package>...   apt-get runs only when a package is not installed, so a
#                                   rerun on a prepared machine touches nothing.

install_missing() {
    local p st missing=()
    for p in "$@"; do
        st="$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)"
        [ "$st" = installed ] || missing+=("$p")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        say "packages: all $# already installed, no apt-get run"
        return 0
    fi
    say "packages: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get -q -o APT::Sandbox::User=root update
    DEBIAN_FRONTEND=noninteractive apt-get -q -o APT::Sandbox::User=root \
        install -y --no-install-recommends "${missing[@]}"
}
