#!/usr/bin/env bash
# Latency per relay hop: a chain of 1 to HOPS relays on this machine (relay i dials relay
# i-1 as a cluster peer), the publisher on relay 0 and the subscribers on the last one, the
# same light stream through each chain, Starling chains and moq-relay 0.17.10 chains in
# alternation. What one more relay in the chain adds to the delivery p50 is what a relay
# adds between a publisher and a subscriber: one relay's work and one more loopback hop.
#
#   scripts/hop-latency.sh                    # HOPS=3, PAIRS=2
#   HOPS=4 PAIRS=3 SUBSCRIBERS=4 scripts/hop-latency.sh
#
# Writes target/hop-latency/<time>/: a JSON summary per run and report.md (p50 and p99 per
# chain length, and the added p50 per hop).
set -euo pipefail
cd "$(dirname "$0")/.."

HOPS=${HOPS:-3}
PAIRS=${PAIRS:-2}
PORT=${PORT:-16443}
SUBSCRIBERS=${SUBSCRIBERS:-2}
DURATION=${DURATION:-15}
OUT=${OUT:-target/hop-latency/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

# shellcheck source=lib/relays.sh
. scripts/lib/relays.sh
trap stop_relays EXIT

for pair in $(seq 1 "$PAIRS"); do
    for hops in $(seq 1 "$HOPS"); do
        for kind in starling moq-relay; do
            # Relay 0, then each next one dialing the one before it.
            start_relay "$kind" 0
            for index in $(seq 1 $((hops - 1))); do
                start_relay "$kind" "$index" $((PORT + index - 1))
            done
            "$LOAD" fanout --url "moqt://localhost:$PORT/" \
                --subscriber-url "moqt://localhost:$((PORT + hops - 1))/" \
                --subscribers "$SUBSCRIBERS" --tracks 1 --fps 30 --frame-size 1000 \
                --group-frames 30 --duration-secs "$DURATION" --tls-disable-verify --no-progress \
                --json "$OUT/$kind-$hops-$pair.json" >"$OUT/$kind-$hops-$pair.txt"
            stop_relays
            echo "pair $pair: $kind chain of $hops done"
        done
    done
done
trap - EXIT

# The median over pairs of each chain's delivery p50 and p99, and the p50 added per hop.
python3 - "$OUT" "$HOPS" "$PAIRS" >"$OUT/report.md" <<'EOF'
import json, statistics, sys
out, hops, pairs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def figure(kind, n, key):
    values = []
    for pair in range(1, pairs + 1):
        with open(f"{out}/{kind}-{n}-{pair}.json") as f:
            values.append(json.load(f)["latency"]["delivery"][key])
    return statistics.median(values)
print("| relays in the chain | Starling p50 (ms) | p99 | moq-relay p50 (ms) | p99 |")
print("|---:|---:|---:|---:|---:|")
for n in range(1, hops + 1):
    cells = [f"{figure(k, n, q):.3f}" for k in ("starling", "moq-relay") for q in ("p50_ms", "p99_ms")]
    print(f"| {n} | " + " | ".join(cells) + " |")
print()
for kind in ("starling", "moq-relay"):
    first, last = figure(kind, 1, "p50_ms"), figure(kind, hops, "p50_ms")
    if hops > 1:
        print(f"* {kind}: p50 added per relay {(last - first) / (hops - 1):.3f} ms "
              f"(from 1 to {hops} relays)")
EOF
cat "$OUT/report.md"
echo "written: $OUT/report.md"
