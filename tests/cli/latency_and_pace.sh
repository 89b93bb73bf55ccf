#!/bin/bash
# Purpose: a single line comes out while the input is still open (not when a block
# fills); slow consumers and slow producers lose nothing, and the summary names the
# side that limited the transfer.
. "$(dirname "$0")/lib.sh"
mkfifo "$TMP/fifo"
# The producer writes one line and then holds the pipe open until told to stop.
( echo "first line"; while [ ! -e "$TMP/stop" ]; do sleep 0.05; done ) >"$TMP/fifo" &
PIDS+=($!)
"$WEIR" -q <"$TMP/fifo" >"$TMP/line" &
wpid=$!
PIDS+=("$wpid")
wait_for "$TMP/line" "first line" 5
kill -0 "$wpid" 2>/dev/null || fail "weir ended early"
ok "a line comes out while the input is still open"
touch "$TMP/stop"
wait_bounded "$wpid" 10
[ "$STATUS" -eq 0 ] || fail "weir exited $STATUS"
ok "input end ends weir cleanly"

gen "$TMP/in" 3000000 random
"$WEIR" -s 64k -m 512k <"$TMP/in" 2>"$TMP/err" | "$TESTTOOL" slowread 6000000 >"$TMP/out"
same "$TMP/in" "$TMP/out" "slow consumer gets every byte"
has_msg "$TMP/err" "output was the bottleneck" "summary blames the output"

gen "$TMP/in2" 1500000 random
( i=0; while [ $i -lt 15 ]; do dd if="$TMP/in2" bs=100000 skip=$i count=1 status=none; sleep 0.04; i=$((i+1)); done ) \
    | "$WEIR" 2>"$TMP/err2" >"$TMP/out2"
same "$TMP/in2" "$TMP/out2" "slow producer loses nothing"
has_msg "$TMP/err2" "input was the bottleneck" "summary blames the input"
done_testing
