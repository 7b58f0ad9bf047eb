#!/usr/bin/env bash
# The dash load on real relay processes: a mesh of RELAYS relays on this machine (relay 0,
# and relays 1..RELAYS-1 each dialing relay 0 as a cluster peer), one node publisher of
# hidden `.stats` broadcasts per relay after the first, and the dash client on relay 0
# following every node's broadcasts across the mesh. Run with Starling relays and with
# moq-relay 0.17.10 relays, alternating (A B A B …), then the ratios.
#
#   scripts/mesh-dash.sh                               # RELAYS=4, PAIRS=2
#   RELAYS=6 PROJECTS=20 TRACKS=16 PAIRS=3 scripts/mesh-dash.sh
#   VERSION=moq-transport-22 scripts/mesh-dash.sh     # the clients on IETF draft 22
#
# Writes target/mesh-dash/<time>/: one JSON summary per run under dash/, the relay logs, and
# report.md (machine, versions, command, table).
set -euo pipefail
cd "$(dirname "$0")/.."

RELAYS=${RELAYS:-4}
PAIRS=${PAIRS:-2}
PORT=${PORT:-15443}
PROJECTS=${PROJECTS:-10}
TRACKS=${TRACKS:-16}
TICKS=${TICKS:-20}
OUT=${OUT:-target/mesh-dash/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/dash"

# shellcheck source=lib/relays.sh
. scripts/lib/relays.sh

# Relay 0, then relays 1.. each dialing relay 0.
start_mesh() {
    PIDS=()
    start_relay "$1" 0
    for index in $(seq 1 $((RELAYS - 1))); do
        start_relay "$1" "$index" "$PORT"
    done
}
trap stop_relays EXIT

dash_args() {
    local args=(dash)
    for index in $(seq 0 $((RELAYS - 1))); do
        args+=(--relay "moqt://localhost:$((PORT + index))/")
    done
    args+=(--projects "$PROJECTS" --tracks "$TRACKS" --ticks "$TICKS" --tick-ms 1000)
    # The node publishers' and the dash client's protocol (the relays' links stay theirs).
    if [ -n "${VERSION:-}" ]; then
        args+=(--version "$VERSION")
    fi
    echo "${args[@]}"
}

for pair in $(seq 1 "$PAIRS"); do
    for kind in starling moq-relay; do
        start_mesh "$kind"
        pid_args=()
        for pid in "${PIDS[@]}"; do
            pid_args+=(--relay-pid "$pid")
        done
        # shellcheck disable=SC2046
        "$LOAD" $(dash_args) --tls-disable-verify --no-progress "${pid_args[@]}" \
            --json "$OUT/dash/$kind-$pair.json" >"$OUT/dash/$kind-$pair.txt"
        stop_relays
        echo "dash pair $pair: $kind mesh done"
    done
done
trap - EXIT

{
    echo "### Dash on a $RELAYS-relay mesh, side by side, $(date -u +%Y-%m-%d)"
    echo
    echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)),"
    echo "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)."
    echo "Starling $(git rev-parse --short HEAD) (release), moq-relay 0.17.10 (release, cargo install)."
    echo "$PAIRS pairs, alternating a Starling mesh then a moq-relay mesh; relays 1..$((RELAYS - 1))"
    echo "dial relay 0; ratios are Starling/moq-relay (below 1: Starling used less or was faster)."
    echo
    echo "Load: \`starling-load $(dash_args)\` ($((RELAYS - 1)) nodes x $PROJECTS projects x $TRACKS tracks)."
    echo
    "$LOAD" compare --runs "$OUT" --a starling --b moq-relay
} >"$OUT/report.md"
cat "$OUT/report.md"
echo "written: $OUT/report.md"
