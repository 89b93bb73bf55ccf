#!/bin/bash
# longpath.sh - weir over a long path, against mbuffer and iperf3 on the
# same path, side by side in one run (root: namespaces, tc).
#
#   bench/longpath.sh                         round trips of 50 and 100 ms, 1 Gbit/s
#   RTTS="100" LOSS=0.5 bench/longpath.sh     with 0.5% of packets dropped
#   SIZE=512M RUNS=3 RATE=500mbit bench/longpath.sh
#   STREAMS=16 bench/longpath.sh              the spread column with 16 connections
#   CC=cubic bench/longpath.sh                both namespaces with that congestion control
#
# The path: two network namespaces joined by a userspace delay line
# (bench/delayline.c: TUN devices, each packet held for half the round
# trip, LOSS percent of them dropped at random each way), with tbf at RATE
# on the sending side.  The namespaces keep the kernel's defaults for TCP's
# buffers (net.ipv4.tcp_wmem and tcp_rmem are per namespace), as a host
# whose owner tuned nothing has.
#
# Each run sends SIZE of random bytes from the page cache; weir's and
# mbuffer's figures are SIZE over the sender's wall time (a weir sender
# exits once its receiver confirmed every byte; mbuffer once its data is
# in the socket, which favours it slightly), iperf3's its receiver's rate
# for TSECS seconds.  The sides alternate run by run; the table gives each
# one's median in MiB/s: weir with its default options, weir --streams 1,
# weir --streams STREAMS (default 8), mbuffer, iperf3 with one connection
# and with 8; then weir's ratios (by default, and with --streams STREAMS)
# to mbuffer and to iperf3 -P 8.  iperf3's own figure leaves out its
# setup (the control connection and its 8 connections are made before its
# clock starts), which weir's wall time holds; so the last two columns
# time iperf3 -P 8 as weir is timed: SIZE over its client's wall time
# (iperf3 -n SIZE), and weir's ratio to that.
set -u
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "longpath.sh: needs root (network namespaces, tc)" >&2; exit 1; }
RTTS=${RTTS:-"50 100"}
RATE=${RATE:-1gbit}
LOSS=${LOSS:-0}
SIZE=${SIZE:-1G}
RUNS=${RUNS:-3}
TSECS=${TSECS:-10}
STREAMS=${STREAMS:-8}
CC=${CC:-}
bash scripts/deps.sh || exit 1
if [ ! -f build-bench/build.ninja ]; then
    meson setup build-bench -Dbuildtype=release >/dev/null || exit 1
fi
ninja -C build-bench >/dev/null || exit 1
W=$PWD/build-bench/weir
TT=$PWD/build-bench/tests/testtool
T=$(mktemp -d)
A=wlpA$$
B=wlpB$$
cleanup() {
    [ -n "${DL:-}" ] && kill "$DL" 2>/dev/null && wait "$DL" 2>/dev/null
    ip netns pids "$A" 2>/dev/null | xargs -r kill 2>/dev/null
    ip netns pids "$B" 2>/dev/null | xargs -r kill 2>/dev/null
    ip netns del "$A" 2>/dev/null
    ip netns del "$B" 2>/dev/null
    rm -rf "$T"
    [ -n "${ALLOWED:-}" ] && sysctl -qw net.ipv4.tcp_allowed_congestion_control="$ALLOWED"
}
trap cleanup EXIT
cc -O2 -Wall -Wextra -Werror -std=gnu11 -o "$T/delayline" bench/delayline.c || exit 1
bytes=$(numfmt --from=iec "$SIZE")
D=$PWD/bench/data
mkdir -p "$D"
RND=$D/random-$SIZE.bin
[ -f "$RND" ] || head -c "$bytes" /dev/urandom >"$RND"
cat "$RND" >/dev/null
ip netns add "$A" || exit 1
ip netns add "$B" || exit 1
inA() { ip netns exec "$A" "$@"; }
inB() { ip netns exec "$B" "$@"; }
if [ -n "$CC" ]; then   # a namespace's own, since Linux 4.15
    # a namespace may choose only what the host allows: allowed for the run
    ALLOWED=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
    case " $ALLOWED " in
    *" $CC "*) ALLOWED= ;;
    *) sysctl -qw net.ipv4.tcp_allowed_congestion_control="$ALLOWED $CC" || exit 1 ;;
    esac
    inA sysctl -qw net.ipv4.tcp_congestion_control="$CC" &&
        inB sysctl -qw net.ipv4.tcp_congestion_control="$CC" || exit 1
fi

# path RTT_MS: the delay line for that round trip, the addresses, tbf
path() {
    [ -n "${DL:-}" ] && { kill "$DL"; wait "$DL" 2>/dev/null; DL=; }
    # the last round trip's devices go with their delay line, not at once
    for _ in $(seq 100); do
        ip -n "$A" link show dlA >/dev/null 2>&1 || ip -n "$B" link show dlB >/dev/null 2>&1 ||
            break
        sleep 0.05
    done
    "$T/delayline" "$A" dlA "$B" dlB "$(echo "$1 / 2" | bc -l)" "$LOSS" >"$T/dl.out" \
        2>>"$T/dl.err" &
    DL=$!
    for _ in $(seq 100); do grep -q ready "$T/dl.out" 2>/dev/null && break; sleep 0.05; done
    grep -q ready "$T/dl.out" || { echo "longpath.sh: the delay line did not start" >&2; exit 1; }
    ip -n "$A" link set lo up
    ip -n "$B" link set lo up
    ip -n "$A" addr add 10.77.0.1 peer 10.77.0.2 dev dlA
    ip -n "$B" addr add 10.77.0.2 peer 10.77.0.1 dev dlB
    ip -n "$A" link set dlA up txqueuelen 10000
    ip -n "$B" link set dlB up txqueuelen 10000
    tc -n "$A" qdisc add dev dlA root tbf rate "$RATE" burst 1mb latency 50ms
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mibs() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.1f\n", b / s / 1048576 }' </dev/null; }
secs() {   # secs COMMAND...: its wall time; fails as it does
    local s e rc
    s=$(date +%s%N); "$@"; rc=$?; e=$(date +%s%N)
    awk -v d=$((e - s)) 'BEGIN { print d / 1e9 }' </dev/null
    return $rc
}

run_weir() {   # run_weir SENDER-OPTIONS...
    inB "$W" -q -I 9090 -o /dev/null 2>"$T/wr.err" &
    local r=$!
    inB "$TT" waitlisten 9090 10
    local t
    if ! t=$(secs inA "$W" -v "$@" -i "$RND" -O 10.77.0.2:9090 2>"$T/ws.err"); then
        kill "$r" 2>/dev/null; wait "$r" 2>/dev/null
        echo "# weir sender failed: $(cat "$T/ws.err")" >&2
        return
    fi
    wait "$r" || { echo "# weir receiver failed: $(cat "$T/wr.err")" >&2; return; }
    # how many connections carried it (auto: how far it grew, and why it stopped)
    echo "# weir $*: $(grep -o 'over [0-9]* connections\|going on over [0-9]*\|did not raise the total ([^)]*)\|leaves* the transfer: it needs [0-9]*\|needs all [0-9]*' "$T/ws.err" | tr '\n' ' ')" >&2
    mibs "$t"
}
run_mbuffer() {
    inB mbuffer -q -I 9091 -o /dev/null 2>/dev/null &
    local r=$!
    inB "$TT" waitlisten 9091 10
    local t
    t=$(secs inA mbuffer -q -i "$RND" -O 10.77.0.2:9091 2>/dev/null)
    wait "$r"
    mibs "$t"
}
run_iperf() {   # run_iperf STREAMS
    inB iperf3 -s -1 -p 9092 >/dev/null 2>&1 &
    local r=$!
    inB "$TT" waitlisten 9092 10
    inA iperf3 -c 10.77.0.2 -p 9092 -P "$1" -t "$TSECS" -f k 2>/dev/null \
        | awk -v p="$1" '/receiver/ && (p == 1 || /SUM/) {
              for (i = 1; i <= NF; i++) if ($i ~ /Kbits/) printf "%.1f\n", $(i-1) * 1000 / 8 / 1048576 }'
    wait "$r"
}

run_iperf_size() {   # iperf3 -P 8 sending SIZE, timed as weir is: its client's wall time
    inB iperf3 -s -1 -p 9092 >/dev/null 2>&1 &
    local r=$!
    inB "$TT" waitlisten 9092 10
    local t
    t=$(secs inA iperf3 -c 10.77.0.2 -p 9092 -P 8 -n "$bytes" --logfile /dev/null)
    wait "$r"
    mibs "$t"
}

echo "| round trip, loss | weir | weir --streams 1 | weir --streams $STREAMS | mbuffer | iperf3, 1 connection | iperf3 -P 8 | weir / mbuffer | weir / iperf3 -P 8 | --streams $STREAMS / mbuffer | --streams $STREAMS / iperf3 -P 8 | iperf3 -P 8, $SIZE by wall time | weir / that |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
# the figures depend on it (BBR passes the send buffer's ceiling in its
# start; CUBIC's HyStart may end a slow start sooner): the namespaces
# inherit the host's unless CC says
echo "# congestion control: $(inA sysctl -n net.ipv4.tcp_congestion_control)" >&2
for rtt in $RTTS; do
    path "$rtt"
    for f in w w1 wn m i1 i8 in; do : >"$T/$f"; done
    for _ in $(seq "$RUNS"); do
        run_weir >>"$T/w"
        run_weir --streams 1 >>"$T/w1"
        run_weir --streams "$STREAMS" >>"$T/wn"
        run_mbuffer >>"$T/m"
        run_iperf 1 >>"$T/i1"
        run_iperf 8 >>"$T/i8"
        run_iperf_size >>"$T/in"
    done
    for f in w w1 wn m i1 i8 in; do echo "# $rtt ms $f: $(tr '\n' ' ' <"$T/$f")" >&2; done
    w=$(median <"$T/w"); w1=$(median <"$T/w1"); wn=$(median <"$T/wn")
    m=$(median <"$T/m"); i1=$(median <"$T/i1"); i8=$(median <"$T/i8"); i8n=$(median <"$T/in")
    awk -v rtt="$rtt" -v loss="$LOSS" -v w="$w" -v w1="$w1" -v wn="$wn" -v m="$m" -v i1="$i1" \
        -v i8="$i8" -v in8="$i8n" 'BEGIN {
        printf "| %s ms, %s%% | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.1f | %.2f |\n",
               rtt, loss, w, w1, wn, m, i1, i8, w / m, w / i8, wn / m, wn / i8, in8, w / in8 }' </dev/null
done
kill "$DL" && wait "$DL" 2>/dev/null
DL=
sed 's/^/# /' "$T/dl.err" >&2   # what the delay line passed and dropped, each round trip
