# Sourced by the community benchmarks (community.sh, community-ab.sh): start_auth_server
# KEYS LOG runs `moq auth serve` (moq-cli 0.14.10, MOQ) on AUTH_PORT deciding from the key
# directory KEYS, with a 1 s revalidate cadence, under RELAY_CPU if set; it appends the
# server's pid to PIDS and returns once the server accepts, or exits the script.
start_auth_server() {
    ${RELAY_CPU[@]+"${RELAY_CPU[@]}"} "$MOQ" auth serve --listen "127.0.0.1:$AUTH_PORT" --key-dir "$1" --revalidate 1s \
        --expires 1h >>"$2" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$AUTH_PORT") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "moq auth serve did not start; see $2" >&2
    exit 1
}
