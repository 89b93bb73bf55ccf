#!/bin/bash
# Purpose: the receiver's answer swallowed by a black hole between two hosts
# (two network namespaces joined by a veth pair, the sender's link taken
# down after its trailer, while the receiver's consumer still works).  The
# receiver must not take anything but the sender's word ('D') for proof that
# the answer arrived, and when that does not come, keeps its port for the
# sender to come back for it.  Both exit 0.  (It used to exit 0 at once
# and the sender, back on the mended link, found nobody: exit 5 with the
# data whole.)
. "$(dirname "$0")/lib.sh"
two_hosts 10.78.0
gen "$TMP/in" 3000017 random

ip netns exec "$B" "$WEIR" -I 10.78.0.1:0 --reconnect 60 \
    -- sh -c "cat >'$TMP/out'; sleep 2" 2>"$TMP/lerr" &
LPID=$!
PIDS+=("$LPID")
wait_for "$TMP/lerr" "listening on" 10
LPORT=$(grep -o 'listening on .*' "$TMP/lerr" | grep -o '[0-9]*$')
bg ip netns exec "$A" "$WEIR" --reconnect 60 -i "$TMP/in" -O "10.78.0.2:$LPORT" 2>"$TMP/serr"
# the whole stream is in (the consumer has it): the link goes before the answer
wait_size "$TMP/out" 3000016 30
ip -n "$A" link set "$VA" down || fail "link down"
wait_for "$TMP/serr" "reconnecting for up to" 30
ip -n "$A" link set "$VA" up || fail "link up"
both_exit_0 "an answer lost in a black hole" "$BPID"
same "$TMP/in" "$TMP/out" "an answer lost in a black hole: both exit 0, whole"
has_msg "$TMP/lerr" "the sender has not said that it read the answer" \
    "the receiver waits for the sender's word, not for its end of file"
has_msg "$TMP/lerr" "the sender came back for the answer" "the sender came back for the answer"
has_msg "$TMP/serr" "1 reconnection" "the sender counts its reconnection"

done_testing
