#!/usr/bin/env bash
# Starling against moq-relay 0.17.10, side by side: the same loads from `starling-load`,
# run against each relay in alternation (A B A B …) within one run, then the ratios per
# figure with their min/median/max over the pairs.
#
#   scripts/side-by-side.sh                 # PAIRS=3, every scenario
#   PAIRS=5 SCENARIOS="fanout200 fanout200-ietf22 idle1000" scripts/side-by-side.sh
#   PAIRS=1 SCENARIOS=fanout1000 scripts/side-by-side.sh   # 1 -> 1000, not in the default set
#
# Writes target/side-by-side/<time>/: one JSON summary per run under <scenario>/, the relay
# logs, and report.md (machine, versions, commands and the tables).
#
# With PERF=1 (root: the kernel's tracepoints), each fanout run also counts the relay's UDP
# send system calls and the packets it hands to the network device, per delivered frame.
# They are recorded machine-wide, every event, and counted for the relay's pid (this VM's
# perf cannot attach to a process); on loopback a segmentation-offload batch is one packet
# there. Recording every send costs the sender time in the kernel, so take the CPU figures
# from runs without it.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/relay-ready.sh
. scripts/lib/relay-ready.sh

PAIRS=${PAIRS:-3}
PORT=${PORT:-14443}
SCENARIOS=${SCENARIOS:-"fanout200 fanout200-ietf22 burst2000 burstmix idle1000"}
OUT=${OUT:-target/side-by-side/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

# shellcheck source=lib/peers.sh
. scripts/lib/peers.sh

# Both relays: raw QUIC and WebTransport on UDP $PORT, HTTP and WebSocket on TCP $PORT,
# a self-signed certificate for localhost, anonymous access, quiet logs.
start_relay() {
    local name=$1 log="$OUT/$1.log"
    case $name in
        starling)
            "$STARLING" relay --bind "127.0.0.1:$PORT" --tls-generate localhost \
                --internal-listen off --log warn >>"$log" 2>&1 &
            ;;
        moq-relay)
            "$MOQ_RELAY" --listen "127.0.0.1:$PORT" --listen-tls-generate localhost \
                --web-http-listen "127.0.0.1:$PORT" --auth-public '**' \
                --log-level warn >>"$log" 2>&1 &
            ;;
    esac
    RELAY_PID=$!
    wait_ready "$name" "$PORT" "$RELAY_PID" "$log"
}

stop_relay() {
    kill -TERM "$RELAY_PID" 2>/dev/null || true
    wait "$RELAY_PID" 2>/dev/null || true
}
trap stop_relay EXIT

URL="moqt://localhost:$PORT/"
COMMON=(--tls-disable-verify --no-progress)

# The load of each scenario (the relay's pid is appended).
scenario_args() {
    case $1 in
        # 1 -> 200 subscribers, 30 fps x 1000-byte frames, 20 s (raw QUIC).
        fanout200) echo fanout --url "$URL" --subscribers 200 --tracks 1 --fps 30 \
            --frame-size 1000 --group-frames 30 --duration-secs 20 ;;
        # 1 -> 1000 subscribers, the same stream (not in the default set: run it by name).
        fanout1000) echo fanout --url "$URL" --subscribers 1000 --tracks 1 --fps 30 \
            --frame-size 1000 --group-frames 30 --duration-secs 20 --connect-concurrency 64 ;;
        # The same on the IETF draft 22 (both relays serve it by default).
        fanout200-ietf22) echo fanout --url "$URL" --version moq-transport-22 --subscribers 200 \
            --tracks 1 --fps 30 --frame-size 1000 --group-frames 30 --duration-secs 20 ;;
        # 2000 QUIC clients, 64 connecting at once, each waiting for its first frame.
        burst2000) echo burst --url "$URL" --clients 2000 --concurrency 64 \
            --quic-weight 1 --ws-weight 0 --http-weight 0 ;;
        # 600 clients, 2 QUIC : 1 WebSocket : 1 HTTP /fetch.
        burstmix) echo burst --url "$URL" --clients 600 --concurrency 64 \
            --quic-weight 2 --ws-weight 1 --http-weight 1 ;;
        # 1000 connected, subscribed, idle sessions: resident memory per session.
        idle1000) echo fanout --url "$URL" --subscribers 1000 --tracks 1 \
            --duration-secs 0 --idle-secs 5 --connect-concurrency 64 ;;
        *) echo "unknown scenario $1" >&2; exit 1 ;;
    esac
}

# The relay's sends, counted by the kernel while a load runs (see above).
SENDS="syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendmmsg,syscalls:sys_enter_sendto"
PERF=${PERF:-0}
if [ "$PERF" = 1 ] && ! perf record -q -a -c 1 -e "$SENDS,net:net_dev_xmit" \
    -o /dev/null -- true >/dev/null 2>&1; then
    echo "side-by-side: perf cannot read the send tracepoints here; no packet counts" >&2
    PERF=0
fi
count_sends() {
    perf record -q -a -c 1 -e "$SENDS,net:net_dev_xmit" -o "$1" >/dev/null 2>&1 &
    PERF_PID=$!
}
# Stop the recording and add the relay's counts to the run's summary as `relay_sends`.
record_sends() {
    kill -INT "$PERF_PID" 2>/dev/null || true
    wait "$PERF_PID" 2>/dev/null || true
    perf script -i "$1" -F pid,event 2>/dev/null | python3 -c '
import json, sys
pid, summary = sys.argv[1], sys.argv[2]
sends = {"syscalls": 0, "packets": 0}
for line in sys.stdin:
    fields = line.split()
    if len(fields) >= 2 and fields[0] == pid:
        sends["packets" if fields[1].startswith("net:") else "syscalls"] += 1
with open(summary) as f:
    data = json.load(f)
data["relay_sends"] = sends
with open(summary, "w") as f:
    json.dump(data, f, indent=2)
' "$RELAY_PID" "$2"
    rm -f "$1"
}

for scenario in $SCENARIOS; do
    mkdir -p "$OUT/$scenario"
    for pair in $(seq 1 "$PAIRS"); do
        for relay in starling moq-relay; do
            start_relay "$relay"
            run="$OUT/$scenario/$relay-$pair"
            counted=0
            if [ "$PERF" = 1 ] && [[ $scenario == fanout* ]]; then
                count_sends "$run.perf.data"
                counted=1
            fi
            # shellcheck disable=SC2046
            "$LOAD" $(scenario_args "$scenario") "${COMMON[@]}" --relay-pid "$RELAY_PID" \
                --json "$run.json" >"$run.txt"
            [ "$counted" = 0 ] || record_sends "$run.perf.data" "$run.json"
            stop_relay
            echo "$scenario pair $pair: $relay done"
        done
    done
done
trap - EXIT

{
    echo "### Side by side, $(date -u +%Y-%m-%d)"
    echo
    echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)),"
    echo "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)."
    echo "Starling $(git rev-parse --short HEAD) (release), moq-relay 0.17.10 (release, cargo install)."
    echo "$PAIRS pairs per scenario, alternating Starling then moq-relay; ratios are Starling/moq-relay"
    echo "(below 1: Starling used less or was faster)."
    echo
    echo "Loads (\`starling-load\`, raw QUIC to 127.0.0.1:$PORT):"
    echo
    for scenario in $SCENARIOS; do
        echo "* \`$scenario\`: \`starling-load $(scenario_args "$scenario")\`"
    done
    echo
    "$LOAD" compare --runs "$OUT" --a starling --b moq-relay
} >"$OUT/report.md"
cat "$OUT/report.md"
echo "written: $OUT/report.md"
