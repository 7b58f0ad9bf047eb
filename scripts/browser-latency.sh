#!/usr/bin/env bash
# Capture-to-render latency through one and two relays, Starling beside moq-relay 0.17.10,
# in headless Chromium with @moq/publish and @moq/watch (tests/browser/latency.mjs).
#
#   scripts/browser-latency.sh                 # ROUNDS=5 FRAMES=200, WebTransport and WebSocket
#   ROUNDS=2 TRANSPORTS=webtransport scripts/browser-latency.sh
#
# Builds the release relay (scripts/lib/peers.sh), installs Chromium, the npm packages and
# moq-relay when missing, and writes target/browser-latency/<time>/{report.md,latency.json}
# (or $REPORT_DIR/).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${REPORT_DIR:-target/browser-latency/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

scripts/install-browser.sh
# shellcheck source=lib/peers.sh
. scripts/lib/peers.sh

STARLING_BIN="$PWD/target/release/starling" STARLING_MOQ_RELAY="$MOQ_RELAY" OUT="$PWD/$OUT/latency.json" \
    node tests/browser/latency.mjs | tee "$OUT/report.md"
echo "browser-latency: wrote $OUT/report.md"
