# Sourced by the benchmark scripts: wait_ready NAME PORT PID LOG [HOST] waits until the relay
# serving HTTP on HOST:PORT (127.0.0.1 by default) answers with its certificate fingerprint
# (both Starling and moq-relay serve /certificate.sha256), and exits the script if the process
# died or did not become ready within 20 s. A caller whose relay runs in a network namespace
# sets the array IN_NS to the command prefix that enters it (`ip netns exec NAME`).
wait_ready() {
    local name=$1 port=$2 pid=$3 log=$4 host=${5:-127.0.0.1}
    for _ in $(seq 1 400); do
        if ${IN_NS[@]+"${IN_NS[@]}"} curl -sf "http://$host:$port/certificate.sha256" >/dev/null; then
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "$name exited before it was ready; see $log" >&2
            exit 1
        fi
        sleep 0.05
    done
    echo "$name did not become ready; see $log" >&2
    exit 1
}
