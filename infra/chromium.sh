#!/usr/bin/env bash
# The browser of the console's browser tests (tests/browser): the system's
# Chromium from Debian's packages, driven by Playwright for Python through
# its executable path (Playwright's own browser downloads are never used).
#
#   infra/chromium.sh ensure   install Debian's `chromium` unless
#                              /usr/bin/chromium (or $CHROMIUM) is there;
#                              print the browser's path
#
# Installing needs root and apt-get; without them it fails saying what to
# install by hand.
set -euo pipefail

CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

die() { echo "chromium: $*" >&2; exit 1; }

ensure() {
    if [[ -x "$CHROMIUM" ]]; then
        echo "$CHROMIUM"
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 \
        || die "no browser at $CHROMIUM and no apt-get to install one: install Chromium and set CHROMIUM=<its path>"
    [[ "$(id -u)" -eq 0 ]] \
        || die "no browser at $CHROMIUM: install it as root (apt-get install chromium) or set CHROMIUM=<its path>"
    echo "chromium: installing Debian's chromium (not found at $CHROMIUM)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 \
        || die "apt-get update failed: cannot install chromium"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2 \
        || die "apt-get install chromium failed"
    [[ -x "$CHROMIUM" ]] || die "chromium installed but not at $CHROMIUM: set CHROMIUM=<its path>"
    echo "$CHROMIUM"
}

case "${1:-}" in
    ensure) ensure ;;
    *) echo "usage: $0 ensure" >&2; exit 2 ;;
esac
