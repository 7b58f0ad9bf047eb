#!/usr/bin/env bash
# Installs what the browser suite (tests/browser/) needs, once per machine:
#  - Debian's `chromium` and `chromium-driver` (apt-get; skipped when /usr/bin/chromium exists).
#    Playwright's own browser download is not used: the tests drive /usr/bin/chromium through
#    playwright-core.
#  - the suite's npm packages (@moq/net, playwright-core, esbuild) with `npm ci` against the
#    committed tests/browser/package-lock.json. npm's own cache keeps the tarballs; the install
#    is skipped while tests/browser/node_modules still matches the lockfile (a stamp records the
#    lockfile's SHA-256 and the node version).
# Then: cargo build -p starling && node --test tests/browser/
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/chromium ]; then
    echo "install-browser: installing chromium and chromium-driver from Debian"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver
else
    echo "install-browser: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) already installed"
fi

cd tests/browser
stamp="node_modules/.starling-install-stamp"
want="$(sha256sum package-lock.json | cut -d' ' -f1) node-$(node --version)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "install-browser: tests/browser/node_modules matches package-lock.json"
else
    echo "install-browser: npm ci in tests/browser"
    # --ignore-scripts: esbuild needs no postinstall (its binary comes in @esbuild/<platform>).
    npm ci --no-audit --no-fund --prefer-offline --ignore-scripts
    echo "$want" >"$stamp"
fi
