#!/usr/bin/env bash
# Two Starling builds interleaved on the community load (issue 14): A B A B ..., PAIRS times,
# each run a fresh relay with locally verified tokens. Per run: the relay's CPU in the steady
# state (read from /proc between FROM and TO seconds after the load starts), its whole-run
# mean, the generator's steady CPU, errors, and the removal and burst p99s. This is how a
# change to the relay is measured against the build before it on this noisy machine.
#
#   git worktree add /tmp/before <rev> && cargo build --release -p starling --manifest-path /tmp/before/Cargo.toml
#   A=/tmp/before/target/release/starling B=target/release/starling scripts/community-ab.sh
#   PIN=1 MEMBERS=2000 AGENTS=200 LIVE=10 FROM=4 TO=10 A=... B=... scripts/community-ab.sh
#
# RELAY_ARGS="--limit-loopback --max-sessions-per-ip 1000000 --max-handshakes-per-ip 1000000"
# puts the members under the relay's admission as remote clients (loopback is exempt from it
# by default). PIN=1 puts the relay on CPU 0 and the load generator on CPU 1. AUTH=url has both builds
# ask `moq auth serve --revalidate 1s` (moq-cli 0.14.10, installed by install-peers.sh)
# instead of verifying tokens themselves. TRANSPORT=quic (or mix) puts the members on raw
# QUIC instead of WebSocket. Writes nothing but stdout and the logs under OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

A=${A:?A is the first relay binary}
B=${B:?B is the second relay binary}
MEMBERS=${MEMBERS:-3000}
AGENTS=${AGENTS:-300}
LIVE=${LIVE:-25}
FROM=${FROM:-12}
TO=${TO:-27}
PAIRS=${PAIRS:-2}
PORT=${PORT:-17443}
AUTH=${AUTH:-local}
TRANSPORT=${TRANSPORT:-ws}
AUTH_PORT=${AUTH_PORT:-17440}
OUT=${OUT:-target/community-ab/$(date -u +%Y%m%dT%H%M%SZ)}
LOAD=target/release/starling-load
mkdir -p "$OUT"
ulimit -n 20000

if [ ! -x "$LOAD" ]; then
    cargo build --release --locked -p starling-loadgen
fi
case $TRANSPORT in
    ws) WEIGHTS=(--ws-weight 1 --quic-weight 0) ;;
    quic) WEIGHTS=(--ws-weight 0 --quic-weight 1) ;;
    mix) WEIGHTS=(--ws-weight 1 --quic-weight 1) ;;
    *) echo "TRANSPORT is ws, quic or mix" >&2; exit 1 ;;
esac
if [ "$AUTH" = url ]; then
    scripts/install-peers.sh
    MOQ="${STARLING_MOQ_CLI:-${STARLING_CACHE:-$HOME/.cache/starling}/moq-cli-0.14.10/bin/moq}"
fi
RELAY_CPU=()
LOAD_CPU=()
if [ "${PIN:-0}" = 1 ]; then
    RELAY_CPU=(taskset -c 0)
    LOAD_CPU=(taskset -c 1)
fi

# shellcheck source=lib/relay-ready.sh
. scripts/lib/relay-ready.sh
# shellcheck source=lib/auth-server.sh
. scripts/lib/auth-server.sh

# cpu_ticks PID: user + system time so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

run() {
    local label=$1 bin=$2 n=$3
    local keys="$OUT/keys-$label-$n" log="$OUT/$label-$n"
    rm -rf "$keys"
    mkdir -p "$keys"
    local auth=(--auth-key-dir "$keys")
    PIDS=()
    if [ "$AUTH" = url ]; then
        start_auth_server "$keys" "$log.auth.log"
        auth=(--auth-url "http://127.0.0.1:$AUTH_PORT/")
    fi
    # RELAY_ARGS (split into flags on purpose) goes to both builds; `scripts/community.sh`
    # explains the loopback flags that measure members as remote clients.
    # shellcheck disable=SC2086
    ${RELAY_CPU[@]+"${RELAY_CPU[@]}"} "$bin" relay --bind "127.0.0.1:$PORT" --tls-generate localhost \
        "${auth[@]}" --log warn ${RELAY_ARGS:-} >"$log.relay.log" 2>&1 &
    local relay=$!
    PIDS+=("$relay")
    wait_ready "relay $label" "$PORT" "$relay" "$log.relay.log"
    ${LOAD_CPU[@]+"${LOAD_CPU[@]}"} "$LOAD" community --url "moqt://localhost:$PORT/" \
        --tls-disable-verify --no-progress --members "$MEMBERS" --agents "$AGENTS" \
        --live-secs "$LIVE" --key-dir "$keys" --relay-pid "$relay" \
        --remove-members $((MEMBERS / 100)) "${WEIGHTS[@]}" >"$log.txt" 2>&1 &
    local load=$!
    sleep "$FROM"
    local r1 l1 r2 l2
    r1=$(cpu_ticks "$relay"); l1=$(cpu_ticks "$load")
    sleep $((TO - FROM))
    r2=$(cpu_ticks "$relay"); l2=$(cpu_ticks "$load")
    wait "$load" || true
    kill "${PIDS[@]}" 2>/dev/null || true
    wait "${PIDS[@]}" 2>/dev/null || true
    local p99s
    p99s=$(awk '/^  (connect|first_frame|history|removal) / {printf "%s=%s ", $1, $4}' "$log.txt")
    printf '%s run %s: steady relay %.3f cores, load %.3f; %s; %s; p99 ms %s\n' "$label" "$n" \
        "$(echo "($r2 - $r1) / $HZ / ($TO - $FROM)" | bc -l)" \
        "$(echo "($l2 - $l1) / $HZ / ($TO - $FROM)" | bc -l)" \
        "$(grep -E '^errors' "$log.txt" | head -1 | tr -s ' ')" \
        "$(grep -E '^relay cores' "$log.txt" | tr -s ' ')" "$p99s"
}

echo "A=$A"
echo "B=$B"
echo "$MEMBERS members, $AGENTS agents, live $LIVE s, steady window $FROM-$TO s, PIN=${PIN:-0}, AUTH=$AUTH, TRANSPORT=$TRANSPORT"
for n in $(seq 1 "$PAIRS"); do
    run A "$A" "$n"
    run B "$B" "$n"
done
