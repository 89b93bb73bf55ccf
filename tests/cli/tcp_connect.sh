#!/bin/bash
# Purpose: a refused connection fails cleanly (exit 5); a sender started before its
# receiver retries until it connects; --connect-timeout bounds the retrying.
. "$(dirname "$0")/lib.sh"
port=$("$TESTTOOL" freeport)
echo data >"$TMP/in"
expect 5 "nobody listening, --connect-timeout 0" \
    "$WEIR" -q --connect-timeout 0 -O "127.0.0.1:$port" -i "$TMP/in"
has_msg "$TMP/err" "output 127.0.0.1:$port: connect: Connection refused" "message names peer and cause"
expect 5 "gives up after --connect-timeout 1" \
    "$WEIR" -q --connect-timeout 1 -O "127.0.0.1:$port" -i "$TMP/in"
has_msg "$TMP/err" "gave up after 1 s" "message says it gave up"
expect 5 "unknown host" "$WEIR" -q --connect-timeout 0 -O "no-such-host.invalid:9" -i "$TMP/in"
has_msg "$TMP/err" "no-such-host.invalid:9" "message names the host"

gen "$TMP/in" 3000000 random
port=$("$TESTTOOL" freeport)
bg "$WEIR" -q --connect-timeout 20 -O "127.0.0.1:$port" -i "$TMP/in"
spid=$BPID
"$WEIR" -q -I "$port" -o "$TMP/out" &
rpid=$!
PIDS+=("$rpid")
wait_bounded "$spid" 25
[ "$STATUS" -eq 0 ] || fail "early sender exited $STATUS"
wait_bounded "$rpid" 25
[ "$STATUS" -eq 0 ] || fail "late receiver exited $STATUS"
same "$TMP/in" "$TMP/out" "sender started before its receiver"

port=$("$TESTTOOL" freeport)
"$WEIR" -q -I "$port" -o /dev/null 2>/dev/null &
PIDS+=($!)
"$TESTTOOL" waitlisten "$port" 10 || fail "listener"
expect 5 "port already in use" "$WEIR" -q -I "$port"
has_msg "$TMP/err" "Address already in use" "bind failure reported"
expect 5 "--accept-timeout" "$WEIR" -q -I 0 --accept-timeout 0.5 -o /dev/null
has_msg "$TMP/err" "no connection within 0.5 s" "accept timeout reported"
done_testing
