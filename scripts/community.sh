#!/usr/bin/env bash
# The community scenario side by side (issue 14): a relay started fresh, a warm publisher of
# OPEN open channels and MEMBER members-only channels, then MEMBERS members (WebSocket or
# QUIC) and AGENTS HTTP agents bursting in within BURST seconds, REMOVE of the members removed
# mid-run. Starling and moq-relay 0.17.10 alternate (A B A B ...), PAIRS times, then the
# ratios.
#
#   scripts/community.sh                                  # 10 000 WebSocket members, 1 000 agents
#   TRANSPORT=quic scripts/community.sh                   # the members over raw QUIC
#   MEMBERS=2000 AGENTS=200 PAIRS=1 scripts/community.sh  # a quick run
#   AUTH=url scripts/community.sh                         # Starling asks `moq auth serve` too
#   PIN=1 scripts/community.sh                            # relay on CPU 0, load generator on CPU 1
#   RELAY_ARGS="--max-lag-ms 0" scripts/community.sh      # extra flags for Starling's relay
#   KINDS=starling scripts/community.sh                   # Starling alone (no ratios)
#
# Access: every token is verified against a key directory the load generator writes. moq-relay
# 0.17 only decides through an auth server, so it runs with --auth-url pointed at
# `moq auth serve --key-dir DIR --revalidate 1s --expires 1h` (moq-cli 0.14.10), which also
# makes it re-check grants each second as Starling does. Starling verifies the tokens itself
# (--auth-key-dir DIR, AUTH=local, the default) or asks the same auth server (AUTH=url).
#
# Writes target/community/<time>/: one JSON summary per run under community/, the logs, and
# report.md (machine, versions, command, table).
set -euo pipefail
cd "$(dirname "$0")/.."

MEMBERS=${MEMBERS:-10000}
AGENTS=${AGENTS:-1000}
OPEN=${OPEN:-2000}
MEMBER=${MEMBER:-2000}
TRANSPORT=${TRANSPORT:-ws}
AUTH=${AUTH:-local}
REMOVE=${REMOVE:-100}
BURST=${BURST:-2}
LIVE=${LIVE:-10}
PAIRS=${PAIRS:-1}
PORT=${PORT:-16443}
AUTH_PORT=${AUTH_PORT:-16440}
OUT=${OUT:-target/community/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/community"

# shellcheck source=lib/relays.sh
. scripts/lib/relays.sh
MOQ="${STARLING_MOQ_CLI:-$CACHE/moq-cli-0.14.10/bin/moq}"

# PIN=1: the relay (and its auth server) on CPU 0, the load generator on CPU 1, so each side
# has a core of its own and the relay's figures are per core.
RELAY_CPU=()
LOAD_CPU=()
if [ "${PIN:-0}" = 1 ]; then
    RELAY_CPU=(taskset -c 0)
    LOAD_CPU=(taskset -c 1)
fi

# Every member and agent holds a socket on each side, and so does the relay.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# Key directories live outside OUT, whose subdirectories are scenarios to compare.
KEYS_ROOT=$(mktemp -d)
trap 'stop_relays; rm -rf "$KEYS_ROOT"' EXIT

# shellcheck source=lib/auth-server.sh
. scripts/lib/auth-server.sh

# start_community_relay KIND KEYS: a fresh relay of KIND deciding access from KEYS (not
# relays.sh's cluster member); sets RELAY_PID.
start_community_relay() {
    local kind=$1 keys=$2 log="$OUT/$1-$pair.log"
    local auth_url="http://127.0.0.1:$AUTH_PORT/"
    case $kind in
        starling)
            local auth=(--auth-key-dir "$keys")
            if [ "$AUTH" = url ]; then
                start_auth_server "$keys" "$OUT/auth-$kind-$pair.log"
                auth=(--auth-url "$auth_url")
            fi
            # Every member dials from 127.0.0.1, which the relay exempts from its admission
            # by default (local sidecars and publishers). --limit-loopback treats them as
            # remote clients; the per-address bounds are raised so that they do not bind, as
            # if each member had an address of its own.
            # RELAY_ARGS is split into flags on purpose.
            # shellcheck disable=SC2086
            ${RELAY_CPU[@]+"${RELAY_CPU[@]}"} "$STARLING" relay --bind "127.0.0.1:$PORT" --tls-generate localhost \
                --internal-listen "127.0.0.1:$((PORT + 1))" --log warn "${auth[@]}" \
                --limit-loopback --max-sessions-per-ip 1000000 --max-handshakes-per-ip 1000000 \
                ${RELAY_ARGS:-} >>"$log" 2>&1 &
            ;;
        moq-relay)
            start_auth_server "$keys" "$OUT/auth-$kind-$pair.log"
            ${RELAY_CPU[@]+"${RELAY_CPU[@]}"} "$MOQ_RELAY" --listen "127.0.0.1:$PORT" --listen-tls-generate localhost \
                --web-http-listen "127.0.0.1:$PORT" --auth-url "$auth_url" \
                --log-level warn >>"$log" 2>&1 &
            ;;
    esac
    RELAY_PID=$!
    PIDS+=("$RELAY_PID")
    wait_ready "$kind relay" "$PORT" "$RELAY_PID" "$log"
}

load_args() {
    local args=(community --url "moqt://localhost:$PORT/" --tls-disable-verify
        --members "$MEMBERS" --agents "$AGENTS" --open-channels "$OPEN"
        --member-channels "$MEMBER" --burst-secs "$BURST" --live-secs "$LIVE"
        --remove-members "$REMOVE")
    case $TRANSPORT in
        ws) args+=(--ws-weight 1 --quic-weight 0) ;;
        quic) args+=(--ws-weight 0 --quic-weight 1) ;;
        mix) args+=(--ws-weight 1 --quic-weight 1) ;;
        *) echo "TRANSPORT is ws, quic or mix" >&2; exit 1 ;;
    esac
    echo "${args[@]}"
}

for pair in $(seq 1 "$PAIRS"); do
    for kind in ${KINDS:-starling moq-relay}; do
        keys="$KEYS_ROOT/$kind-$pair"
        mkdir -p "$keys"
        start_community_relay "$kind" "$keys"
        metrics=()
        if [ "$kind" = starling ]; then
            metrics=(--metrics-url "http://127.0.0.1:$((PORT + 1))/metrics")
        fi
        # shellcheck disable=SC2046
        ${LOAD_CPU[@]+"${LOAD_CPU[@]}"} "$LOAD" $(load_args) --key-dir "$keys" --no-progress --relay-pid "$RELAY_PID" \
            "${metrics[@]}" --json "$OUT/community/$kind-$pair.json" \
            >"$OUT/community/$kind-$pair.txt"
        stop_relays
        echo "community pair $pair: $kind done"
    done
done
trap - EXIT
rm -rf "$KEYS_ROOT"

{
    echo "### Community, side by side, $(date -u +%Y-%m-%d)"
    echo
    echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)),"
    echo "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)."
    echo "Starling $(git rev-parse --short HEAD) (release), moq-relay 0.17.10 (release, cargo install)."
    echo "$PAIRS pairs, alternating; Starling access: $AUTH; ratios are Starling/moq-relay."
    if [ -n "${RELAY_ARGS:-}" ]; then
        echo "Starling's relay also ran with: $RELAY_ARGS"
    fi
    if [ "${PIN:-0}" = 1 ]; then
        echo "Pinned: the relay (and its auth server) on CPU 0, the load generator on CPU 1."
    fi
    echo
    echo "Load: \`starling-load $(load_args)\` (members over $TRANSPORT)."
    echo
    if [ "${KINDS:-starling moq-relay}" = "starling moq-relay" ]; then
        "$LOAD" compare --runs "$OUT" --a starling --b moq-relay
    else
        for summary in "$OUT"/community/*.txt; do
            echo "#### $(basename "$summary" .txt)"
            echo
            cat "$summary"
            echo
        done
    fi
} >"$OUT/report.md"
cat "$OUT/report.md"
echo "written: $OUT/report.md"
