#!/bin/bash
# serve.sh - eight keyed transfers at once through one weir --serve, against
# eight separate keyed weir -I receivers, on loopback.
#
#     bench/serve.sh                  # 8 x 1 GiB, 3 runs a side
#     SIZE=256M RUNS=5 bench/serve.sh
#
# Each run starts its receivers (one service with eight targets, or eight
# weir -I), then eight senders at once from the same file (in the page
# cache), and times from the senders' start to the last one's exit; the
# aggregate is 8 x SIZE over that time. The two sides run alternately
# (A B A B ...) and the figures are medians; the ratio is the service's
# aggregate over the separate receivers', the median of the ratios of each
# pair of runs. Every byte goes to /dev/null on
# the receiving side; every transfer must exit 0.
set -eu
cd "$(dirname "$0")/.."
SIZE=${SIZE:-1G}
RUNS=${RUNS:-3}
N=8
bash scripts/deps.sh
[ -d build-bench ] || meson setup build-bench -Dbuildtype=release >/dev/null
ninja -C build-bench >/dev/null
W=$PWD/build-bench/weir
D=$(mktemp -d /tmp/weir-bench-serve.XXXXXX)
trap 'pkill -P $$ 2>/dev/null; rm -rf "$D"' EXIT
head -c "$SIZE" /dev/urandom >"$D/in"
bytes=$(stat -c %s "$D/in")
for i in $(seq 1 $N); do
    "$W" -q --genkey "$D/c$i.key" --key-id "c$i" 2>/dev/null
    cat "$D/c$i.key" >>"$D/clients.key"
done
chmod 600 "$D/clients.key"
{
    echo "listen 127.0.0.1:0"
    echo "key-file $D/clients.key"
    echo "max-transfers $N"
    for i in $(seq 1 $N); do echo "client c$i target null -o /dev/null"; done
} >"$D/serve.conf"

port_of() {   # port_of LOG: the port a "listening on" line names
    local i=0
    until grep -q 'listening on' "$1" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 200 ] && { echo "no listening line in $1" >&2; exit 1; }
        sleep 0.05
    done
    grep -o 'listening on .*' "$1" | head -n1 | sed -E 's/^listening on (.*):([0-9]+).*/\2/'
}

# senders PORT...: eight senders at once (one port each, or one for all);
# prints the seconds from their start to the last exit
senders() {
    local ports=("$@") pids=() t0 t1 i p
    t0=$(date +%s.%N)
    for i in $(seq 1 $N); do
        p=${ports[$(( (i - 1) % ${#ports[@]} ))]}
        "$W" -q --key-file "$D/c$i.key" -O "127.0.0.1:$p" -i "$D/in" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { echo "a sender failed" >&2; exit 1; }; done
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}

run_serve() {
    "$W" --serve "$D/serve.conf" 2>"$D/slog" &
    local spid=$!
    senders "$(port_of "$D/slog")"
    kill -TERM "$spid"
    wait "$spid"
}

run_separate() {
    local pids=() ports=() i
    for i in $(seq 1 $N); do
        "$W" -q -I 0 --key-file "$D/clients.key" -o /dev/null 2>"$D/l$i" &
        pids+=($!)
    done
    for i in $(seq 1 $N); do ports+=("$(port_of "$D/l$i")"); done
    senders "${ports[@]}"
    for i in "${pids[@]}"; do wait "$i" || { echo "a receiver failed" >&2; exit 1; }; done
}

median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

: >"$D/a"
: >"$D/b"
for r in $(seq 1 "$RUNS"); do
    run_serve >>"$D/a"
    run_separate >>"$D/b"
done
a=$(median <"$D/a")
b=$(median <"$D/b")
# the ratio pair by pair (each service run against the separate run after
# it), so that drift in the machine's speed hits both sides of a pair
ratio=$(paste "$D/b" "$D/a" | awk '{print $1 / $2}' | median)
rate() { echo "$N * $bytes / $1 / 1048576" | bc -l | xargs printf '%.0f'; }
echo "| case | seconds (median of $RUNS) | aggregate MiB/s | service / separate (median of pairs) |"
echo "|---|---|---|---|"
printf '| %d x %s through one weir --serve | %.2f | %s | %.2f |\n' "$N" "$SIZE" "$a" \
    "$(rate "$a")" "$ratio"
printf '| %d x %s to %d weir -I | %.2f | %s | 1 |\n' "$N" "$SIZE" "$N" "$b" "$(rate "$b")"
echo
echo "runs (seconds), service: $(tr '\n' ' ' <"$D/a")"
echo "runs (seconds), separate: $(tr '\n' ' ' <"$D/b")"
