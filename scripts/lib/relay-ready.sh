# Sourced by the benchmark scripts: wait_ready NAME PORT PID LOG waits until the relay serving
# HTTP on 127.0.0.1:PORT answers with its certificate fingerprint (both Starling and
# moq-relay serve /certificate.sha256), and exits the script if the process died or did not
# become ready within 20 s.
wait_ready() {
    local name=$1 port=$2 pid=$3 log=$4
    for _ in $(seq 1 400); do
        if curl -sf "http://127.0.0.1:$port/certificate.sha256" >/dev/null; then
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
