#!/bin/bash
# Purpose: -I HOST:PORT admits only HOST; others are refused, logged, and the
# listener keeps waiting for the allowed peer.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 200000 random
rm -f "$TMP/lerr"   # never read a previous listener's port
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

# a disallowed peer never affects an allowed one that has not sent yet (nc,
# mbuffer, a slow producer): the allowed one waits, the other is refused
rm -f "$TMP/lerr2"   # never read a previous listener's port
"$WEIR" -I 127.0.0.1:0 --raw -o "$TMP/out2" 2>"$TMP/lerr2" &
LPID=$!
PIDS+=("$LPID")
wait_for "$TMP/lerr2" "listening on" 10
port=$(grep -o 'listening on .*' "$TMP/lerr2" | grep -o '[0-9]*$')
mkfifo "$TMP/hold"
nc -N 127.0.0.1 "$port" <"$TMP/hold" >/dev/null 2>&1 &
PIDS+=($!)
exec 8>"$TMP/hold"      # the allowed peer is connected and silent
for i in 1 2 3; do
    echo intruder | nc -N -s 127.0.0.2 127.0.0.1 "$port" 2>/dev/null
done
wait_for "$TMP/lerr2" "refused connection from 127.0.0.2" 10
cat "$TMP/in" >&8       # now the allowed peer sends
exec 8>&-
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || { cat "$TMP/lerr2"; fail "listener exited $STATUS"; }
same "$TMP/in" "$TMP/out2" "a silent allowed peer outlasts disallowed ones and its data arrives"
grep -q "dropped connection from 127.0.0.1" "$TMP/lerr2" && fail "the allowed peer was dropped"
ok "the allowed peer was never dropped"
done_testing
