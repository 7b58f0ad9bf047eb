# Sourced by the benchmark scripts that run relay processes (mesh-dash.sh, hop-latency.sh,
# community.sh): the peers and binaries, and starting and stopping Starling and moq-relay
# 0.17.10 relays on loopback as cluster peers (community.sh starts its own kind and uses
# stop_relays). The caller sets OUT (logs go there) and PORT.
# shellcheck source=relay-ready.sh
. scripts/lib/relay-ready.sh

# shellcheck source=peers.sh
. scripts/lib/peers.sh

PIDS=()

# start_relay KIND INDEX [DIAL_PORT]: relay INDEX of KIND (starling or moq-relay) on UDP and
# TCP port PORT+INDEX with cluster id 100+INDEX, dialing the relay on DIAL_PORT as a cluster
# peer when one is given. Certificates are self-signed and dials do not check them (loopback
# only). Its pid joins PIDS once it serves.
start_relay() {
    local kind=$1 index=$2 port=$((PORT + $2)) log="$OUT/$1-$2.log"
    local dial=()
    if [ -n "${3:-}" ]; then
        dial=(--cluster-connect "moqt://localhost:$3/" --connect-tls-insecure)
    fi
    case $kind in
        starling)
            "$STARLING" relay --bind "127.0.0.1:$port" --tls-generate localhost \
                --internal-listen off --log warn --cluster-id $((100 + index)) \
                "${dial[@]}" >>"$log" 2>&1 &
            ;;
        moq-relay)
            "$MOQ_RELAY" --listen "127.0.0.1:$port" --listen-tls-generate localhost \
                --web-http-listen "127.0.0.1:$port" --auth-public '**' \
                --cluster-id $((100 + index)) "${dial[@]}" \
                --log-level warn >>"$log" 2>&1 &
            ;;
    esac
    local pid=$!
    PIDS+=("$pid")
    wait_ready "$kind relay $index" "$port" "$pid" "$log"
}

# stop_relays: stop every relay in PIDS and wait for each to exit.
stop_relays() {
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    PIDS=()
}
