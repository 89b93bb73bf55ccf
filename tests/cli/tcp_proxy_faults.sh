#!/bin/bash
# Purpose: faults injected between sender and receiver by the test proxy (cut,
# reset, stall, flipped byte, dropped, duplicated and swapped blocks) are caught.
# The receivers run with --reconnect 0: a break then fails the transfer, as it
# does with a peer that cannot resume (tests/cli/reconnect.sh resumes).
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 2000000 mixed

# run_fault MODE AT [SECS] [RECEIVER ARGS...]: sender -> proxy -> receiver;
# sets RST (receiver status) and SST (sender status)
run_fault() {
    local mode=$1 at=$2 secs=$3
    shift 3
    listen "$TMP/out" "$TMP/lerr" -q --reconnect 0 "$@"
    rm -f "$TMP/proxy"   # never read the previous proxy's port
    "$TESTTOOL" proxy "$LPORT" "$mode" "$at" "$secs" >"$TMP/proxy" &
    PIDS+=($!)
    wait_for "$TMP/proxy" "proxy listening on" 10
    local pport
    pport=$(grep -o '[0-9]*$' "$TMP/proxy")
    "$WEIR" -q -s 64k -O "127.0.0.1:$pport" -i "$TMP/in" 2>"$TMP/serr"
    SST=$?
    wait_bounded "$LPID" 20
    RST=$STATUS
}

run_fault pass 0 0
[ "$SST" -eq 0 ] && [ "$RST" -eq 0 ] || fail "control: sender $SST receiver $RST"
same "$TMP/in" "$TMP/out" "through the proxy without a fault"

# cut before the sender proved itself (greeting and header are 48 bytes):
# the listener never admitted it, logs the drop and keeps listening
listen "$TMP/out" "$TMP/lerr"
rm -f "$TMP/proxy"
"$TESTTOOL" proxy "$LPORT" cut 10 0 >"$TMP/proxy" &
PIDS+=($!)
wait_for "$TMP/proxy" "proxy listening on" 10
pport=$(grep -o '[0-9]*$' "$TMP/proxy")
expect 5 "cut at byte 10: the sender" "$WEIR" -q -s 64k -O "127.0.0.1:$pport" -i "$TMP/in"
wait_for "$TMP/lerr" "it closed before it sent a weir header" 10
kill -0 "$LPID" || fail "cut at byte 10 ended the listener"
ok "cut at byte 10: the listener logs it and keeps listening"
"$WEIR" -q -O "127.0.0.1:$LPORT" -i "$TMP/in" || fail "the sender after the cut one: exit $?"
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/out" "then a real sender gets through"

for at in 100 100000 1999990; do
    run_fault cut "$at" 0
    [ "$RST" -eq 6 ] || { cat "$TMP/lerr"; fail "cut at $at: receiver exit $RST"; }
    has_msg "$TMP/lerr" "truncated weir stream" "cut at byte $at: receiver reports truncation (exit 6)"
    [ "$SST" -ne 0 ] || fail "cut at $at: sender exited 0"
    ok "cut at byte $at: sender exits $SST"
done
run_fault reset 500000 0
[ "$RST" -eq 5 ] || { cat "$TMP/lerr"; fail "reset: receiver exit $RST"; }
ok "reset mid-stream: receiver exits 5"
[ "$SST" -ne 0 ] || fail "reset: sender exited 0"
ok "reset mid-stream: sender exits $SST"
run_fault flip 700000 0
[ "$RST" -eq 6 ] || fail "flip: receiver exit $RST"
has_msg "$TMP/lerr" "checksum mismatch" "flipped byte: receiver exits 6"
[ "$SST" -eq 6 ] || fail "flip: sender exit $SST, want 6"
has_msg "$TMP/serr" "receiver: input" "flipped byte: sender exits 6 with the receiver's message"
for mode in drop dup swap; do
    run_fault "$mode" 3 0
    [ "$RST" -eq 6 ] || { cat "$TMP/lerr"; fail "$mode block: receiver exit $RST"; }
    has_msg "$TMP/lerr" "arrived where block" "$mode a block: receiver exits 6"
    [ "$SST" -ne 0 ] || fail "$mode: sender exited 0"
done
run_fault stall 300000 1.5 --timeout 10
[ "$RST" -eq 0 ] && [ "$SST" -eq 0 ] || fail "short stall: sender $SST receiver $RST"
same "$TMP/in" "$TMP/out" "a stall shorter than --timeout is survived"
run_fault stall 300000 4 --timeout 1
[ "$RST" -eq 5 ] || { cat "$TMP/lerr"; fail "long stall: receiver exit $RST"; }
has_msg "$TMP/lerr" "no progress for 1 s" "a stall longer than --timeout fails the receiver"
done_testing
