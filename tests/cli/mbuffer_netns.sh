#!/bin/bash
# Purpose: syncoid's direct mode across two hosts, played by two network
# namespaces joined by a veth pair.  syncoid starts the receiver as
# "mbuffer -W 60 -I HOST:PORT" with HOST the receiver's own address; mbuffer,
# and weir with it, take HOST as the only peer allowed.  So across hosts the
# sender is refused (by the real mbuffer as by weir, which says why), and the
# same line with the sender's address works.
. "$(dirname "$0")/lib.sh"
REAL_MBUFFER=$(command -v mbuffer) || fail "mbuffer is not installed (scripts/deps.sh installs it)"
command -v socat >/dev/null || fail "socat is not installed (scripts/deps.sh installs it)"
two_hosts 10.77.0
mkdir "$TMP/bin"
ln -s "$(readlink -f "$WEIR")" "$TMP/bin/mbuffer"
MB=$TMP/bin/mbuffer
# ns_listening NS PORT: wait until something listens on PORT in NS
ns_listening() {
    local i=0
    until ip netns exec "$1" ss -ltn "sport = :$2" | grep -q LISTEN; do
        i=$((i + 1)); [ "$i" -gt 200 ] && fail "nothing listens on port $2 in $1 after 10 s"
        sleep 0.05
    done
}
gen "$TMP/in" "$(sized 52428800 8388608)" random

# syncoid's line on host B: -I names B's own address, the sender is on A
# (-l keeps the refusals that -q hides on stderr)
ip netns exec "$B" "$MB" -W 3 -I 10.77.0.2:9090 -q -s 128k -m 16M -l "$TMP/r1.log" >"$TMP/r1.out" 2>"$TMP/r1.err" &
rpid=$!
PIDS+=("$rpid")
ns_listening "$B" 9090
ip netns exec "$A" socat - TCP:10.77.0.2:9090,retry=5,interval=1 <"$TMP/in" >/dev/null 2>&1
wait_bounded "$rpid" 20
[ "$STATUS" -eq 5 ] || fail "syncoid's -I OWN-ADDRESS:PORT across hosts: exit $STATUS, want 5"
has_msg "$TMP/r1.log" "refused connection from 10.77.0.1" "the sender on another host is refused"
has_msg "$TMP/r1.log" "only 10.77.0.2 may connect" "the refusal says who may connect"
has_msg "$TMP/r1.err" "watchdog (-W 3): no sender connected" "-W ends the wait, naming the listener"
[ -s "$TMP/r1.out" ] && fail "a refused sender's bytes reached the output"
ok "nothing from the refused sender reached the output"

# the real mbuffer does the same with that line
ip netns exec "$B" "$REAL_MBUFFER" -W 3 -I 10.77.0.2:9091 -q -s 128k -m 16M >"$TMP/r2.out" 2>"$TMP/r2.err" &
rpid=$!
PIDS+=("$rpid")
ns_listening "$B" 9091
ip netns exec "$A" socat - TCP:10.77.0.2:9091,retry=5,interval=1 <"$TMP/in" >/dev/null 2>&1
wait_bounded "$rpid" 20
[ "$STATUS" -ne 0 ] || fail "the real mbuffer accepted a sender that -I HOST did not name"
[ -s "$TMP/r2.out" ] && fail "the real mbuffer wrote a refused sender's bytes"
ok "the real mbuffer refuses it too (exit $STATUS): HOST is the peer allowed for both"

# with the sender's address as HOST, the transfer goes through, checked
ip netns exec "$B" "$MB" -W 60 -I 10.77.0.1:9092 -q -s 128k -m 16M >"$TMP/r3.out" 2>"$TMP/r3.err" &
rpid=$!
PIDS+=("$rpid")
ns_listening "$B" 9092
ip netns exec "$A" socat - TCP:10.77.0.2:9092,retry=5,interval=1 <"$TMP/in" >"$TMP/socat.out" ||
    fail "socat exited $?"
wait_bounded "$rpid" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/r3.err"; fail "-I SENDER:PORT across hosts: exit $STATUS"; }
same "$TMP/in" "$TMP/r3.out" "-I SENDER-ADDRESS:PORT across hosts: 50 MiB arrive intact"
[ -s "$TMP/socat.out" ] && fail "the receiver wrote to the plain sender"
ok "the plain sender got nothing back"

# weir to weir across the veth, both as mbuffer: the SYN's mark survives, the stream is verified
ip netns exec "$B" "$MB" -q -s 256k -W 600 -m 1G -4 -v 4 -I 9093 >"$TMP/r4.out" 2>"$TMP/r4.err" &
rpid=$!
PIDS+=("$rpid")
ns_listening "$B" 9093
ip netns exec "$A" "$MB" -q -s 256k -W 600 -m 1G -O 10.77.0.2:9093 <"$TMP/in" || fail "weir as mbuffer, sender: exit $?"
wait_bounded "$rpid" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/r4.err"; fail "weir as mbuffer across the veth: exit $STATUS"; }
same "$TMP/in" "$TMP/r4.out" "znapzend's lines across hosts, weir on both ends"
if on_linux "weir to weir as mbuffer speaks the weir stream (the kept SYN's mark)"; then
    grep -q "plain bytes" "$TMP/r4.err" && fail "weir to weir across the veth fell back to plain bytes"
    ok "weir to weir across the veth speaks the weir stream"
fi
done_testing
