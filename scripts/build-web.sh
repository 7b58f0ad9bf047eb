#!/usr/bin/env bash
# Bundles the status page's player (web/player.js: moq-dev's @moq/watch 0.4.6 web component and
# its controls) with esbuild into crates/relay/assets/player.js, which the relay embeds and
# serves at /assets/player.js (no CDN). The npm packages come from web/package-lock.json.
#
#   scripts/build-web.sh            # rebuild the committed bundle
#   scripts/build-web.sh --check    # fail when the committed bundle differs from a fresh build
#
# The browser suite runs --check, so the committed file cannot drift from the lockfile.
set -euo pipefail
cd "$(dirname "$0")/.."

out=crates/relay/assets/player.js
cd web
stamp="node_modules/.starling-install-stamp"
want="$(sha256sum package-lock.json | cut -d' ' -f1) node-$(node --version)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    npm ci --no-audit --no-fund --prefer-offline --ignore-scripts
    echo "$want" >"$stamp"
fi
version=$(node -p 'require("./node_modules/@moq/watch/package.json").version')
banner="/* The Starling status page's player, bundled by scripts/build-web.sh from web/player.js: @moq/watch ${version} and its dependencies (github.com/moq-dev/moq, MIT OR Apache-2.0). Generated: do not edit. */"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
npx --no-install esbuild player.js --bundle --format=esm --minify --target=chrome120 \
    --legal-comments=none --log-level=warning "--banner:js=$banner" --outfile="$tmp"
cd ..
if [ "${1:-}" = "--check" ]; then
    if ! cmp -s "$tmp" "$out"; then
        echo "build-web: $out differs from a fresh build of web/ (run scripts/build-web.sh)" >&2
        exit 1
    fi
    echo "build-web: $out matches a fresh build"
else
    mkdir -p "$(dirname "$out")"
    cp "$tmp" "$out"
    echo "build-web: wrote $out ($(wc -c <"$out") bytes)"
fi
