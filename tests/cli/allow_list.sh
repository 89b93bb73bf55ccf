#!/bin/bash
# Purpose: -I HOST:PORT admits only HOST; others are refused, logged, and the
# listener keeps waiting for the allowed peer.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 200000 random
"$WEIR" -I 127.0.0.1:0 -o "$TMP/out" 2>"$TMP/lerr" &
LPID=$!
PIDS+=("$LPID")
wait_for "$TMP/lerr" "listening on" 10
port=$(grep -o 'listening on .*' "$TMP/lerr" | grep -o '[0-9]*$')
# a peer from 127.0.0.2 is not 127.0.0.1
echo intruder | nc -N -s 127.0.0.2 127.0.0.1 "$port" 2>/dev/null
wait_for "$TMP/lerr" "refused connection from 127.0.0.2" 10
ok "a peer other than HOST is refused and logged"
kill -0 "$LPID" 2>/dev/null || fail "listener quit after refusing a peer"
ok "the listener keeps listening"
"$WEIR" -q -O "127.0.0.1:$port" -i "$TMP/in" || fail "allowed sender exited $?"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "listener exited $STATUS"
same "$TMP/in" "$TMP/out" "the allowed peer's data arrives, the intruder's does not"
done_testing
