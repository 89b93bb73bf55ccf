#!/bin/bash
# slowlink.sh - compression on a slow link: two network namespaces joined by
# a veth pair, the sender's side rate-limited with tc tbf, and weir --adapt
# held against weir -z (LZ4), against the best pipeline a user could build
# (zstd -T2 --adapt | weir -O), and with random data against no compression.
#
#   bench/slowlink.sh                      512 MiB, 3 runs, 25 100 400 MB/s
#   SIZE=1G RUNS=5 RATES="100" bench/slowlink.sh
#
# The mixed data is a tar of /usr/lib and /usr/share.  Each pair of commands
# runs alternately (A B A B ...), each run with a fresh receiver in the other
# namespace that decodes what it gets; the sender's wall time is the
# transfer's (a weir sender ends when its receiver has answered).  Reported:
# the median MB/s of each, and their ratio (the first / the second; above 1
# the first is faster).  Needs root.
set -u
cd "$(dirname "$0")/.."
SIZE=${SIZE:-512M}
RUNS=${RUNS:-3}
RATES=${RATES:-"25 100 400"}
[ "$(id -u)" -eq 0 ] || { echo "slowlink.sh: needs root (network namespaces, tc)" >&2; exit 1; }
bash scripts/deps.sh || exit 1
if [ ! -f build-bench/build.ninja ]; then
    meson setup build-bench -Dbuildtype=release >/dev/null || exit 1
fi
ninja -C build-bench >/dev/null || exit 1
W=$PWD/build-bench/weir
bytes=$(numfmt --from=iec "$SIZE")
D=$PWD/bench/data
mkdir -p "$D"
MIX=$D/usr-$SIZE.tar
RND=$D/random-$SIZE.bin
[ -f "$MIX" ] || { tar cf - /usr/lib /usr/share 2>/dev/null | head -c "$bytes" >"$MIX"; }
[ -f "$RND" ] || head -c "$bytes" /dev/urandom >"$RND"
cat "$MIX" "$RND" >/dev/null   # into the page cache

A=slowA$$ B=slowB$$ VA=sa$$ VB=sb$$
T=$(mktemp -d)
trap 'ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; rm -rf "$T"' EXIT
ip netns add "$A" && ip netns add "$B" || exit 1
ip link add "$VA" netns "$A" type veth peer name "$VB" netns "$B" || exit 1
ip -n "$A" addr add 10.79.0.1/24 dev "$VA" && ip -n "$A" link set "$VA" up &&
    ip -n "$A" link set lo up || exit 1
ip -n "$B" addr add 10.79.0.2/24 dev "$VB" && ip -n "$B" link set "$VB" up &&
    ip -n "$B" link set lo up || exit 1

# limit RATE: tbf on the sender's side, RATE MB/s ("none": no qdisc)
limit() {
    ip netns exec "$A" tc qdisc del dev "$VA" root 2>/dev/null
    [ "$1" = none ] && return 0
    local burst=$(($1 * 1024 * 1024 / 100))   # 10 ms of the rate
    [ "$burst" -lt 65536 ] && burst=65536
    ip netns exec "$A" tc qdisc add dev "$VA" root tbf rate "$1mbps" burst "$burst" \
        latency 100ms || exit 1
}

# run RECEIVER SENDER: start RECEIVER (a shell command with $PORT) in B,
# then time SENDER (with $HOST and $PORT) in A; prints the seconds
run() {
    local port=$((20000 + RANDOM % 20000))
    ip netns exec "$B" env PORT=$port bash -c "$1" >/dev/null 2>"$T/recv.err" &
    local rpid=$!
    until ip netns exec "$B" ss -ltn "sport = :$port" | grep -q LISTEN; do sleep 0.02; done
    local t0 t1
    t0=$(date +%s.%N)
    ip netns exec "$A" env HOST=10.79.0.2 PORT=$port bash -c "$2" >/dev/null 2>"$T/send.err" ||
        { cat "$T/send.err" "$T/recv.err" >&2; echo "slowlink.sh: sender failed: $2" >&2; exit 1; }
    t1=$(date +%s.%N)
    wait "$rpid" || { cat "$T/recv.err" >&2; echo "slowlink.sh: receiver failed: $1" >&2; exit 1; }
    echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# pair LABEL RATE RECV1 SEND1 RECV2 SEND2: alternate, print a table row
pair() {
    local label=$1 rate=$2 i a b
    : >"$T/a"
    : >"$T/b"
    for i in $(seq "$RUNS"); do
        run "$3" "$4" >>"$T/a"
        run "$5" "$6" >>"$T/b"
    done
    a=$(median <"$T/a")
    b=$(median <"$T/b")
    printf '| %s | %s | %.0f | %.0f | %.2f |\n' "$label" "$rate" \
        "$(echo "$bytes / $a / 1000000" | bc -l)" "$(echo "$bytes / $b / 1000000" | bc -l)" \
        "$(echo "$b / $a" | bc -l)"
}

WRECV="$W -q -I \$PORT -o /dev/null"
ADAPT="$W -q --adapt -O \$HOST:\$PORT -i $MIX"
echo "# $SIZE of mixed data ($(basename "$MIX")) and of random data, $RUNS runs each, medians"
echo
echo "| case | link MB/s | first MB/s | second MB/s | first / second |"
echo "|---|---|---|---|---|"
for rate in $RATES; do
    limit "$rate"
    pair "weir --adapt / weir -z (mixed)" "$rate" "$WRECV" "$ADAPT" \
        "$WRECV" "$W -q -z -O \$HOST:\$PORT -i $MIX"
    pair "weir --adapt / zstd -T2 --adapt \\| weir -O (mixed)" "$rate" "$WRECV" "$ADAPT" \
        "$W -q -I \$PORT | zstd -q -d -c >/dev/null" \
        "zstd -q -T2 --adapt -c $MIX | $W -q -O \$HOST:\$PORT"
    pair "weir --adapt / weir (random)" "$rate" "$WRECV" "$W -q --adapt -O \$HOST:\$PORT -i $RND" \
        "$WRECV" "$W -q -O \$HOST:\$PORT -i $RND"
done
limit none
pair "weir --adapt / weir -z (mixed, no limit)" none "$WRECV" "$ADAPT" \
    "$WRECV" "$W -q -z -O \$HOST:\$PORT -i $MIX"
