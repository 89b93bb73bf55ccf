#!/bin/bash
# Purpose: every output sees every byte; a failed output does not stop the others
# unless --stop-on-error, and the exit status still reports it.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 5000001 mixed
"$WEIR" -q -i "$TMP/in" -o "$TMP/a" -o "$TMP/b" || fail "two outputs"
same "$TMP/in" "$TMP/a" "first of two outputs"
same "$TMP/in" "$TMP/b" "second of two outputs"
"$WEIR" -q -i "$TMP/in" -o "$TMP/c" -o - >"$TMP/d" || fail "file and stdout"
same "$TMP/in" "$TMP/c" "file output next to stdout"
same "$TMP/in" "$TMP/d" "stdout next to a file output"
expect 4 "one output is /dev/full, the other completes" \
    "$WEIR" -q -i "$TMP/in" -o /dev/full -o "$TMP/e"
has_msg "$TMP/err" "output /dev/full: write: No space left on device" "failed output is named"
same "$TMP/in" "$TMP/e" "the healthy output still got every byte"
gen "$TMP/big" 50000000 zero
expect 4 "--stop-on-error stops everything" \
    "$WEIR" -q -s 64k -m 1M --stop-on-error -i "$TMP/big" -o /dev/full -o "$TMP/f"
# (an output that got nothing is removed: weir created it, and a retry
# would otherwise be refused with "file exists")
[ "$(stat -c %s "$TMP/f" 2>/dev/null || echo 0)" -lt 50000000 ] ||
    fail "--stop-on-error wrote everything"
ok "--stop-on-error left the other output incomplete"
# two receivers, one failing: the sender says which (it said only
# "receiver: output /dev/full: ..."), and the other gets every byte
listen /dev/null "$TMP/l1" -q -o /dev/full
p1=$LPORT l1=$LPID
listen /dev/null "$TMP/l2" -q -o "$TMP/r2"
expect 4 "two -O, one receiver's disk full" \
    "$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$p1" -O "127.0.0.1:$LPORT"
has_msg "$TMP/err" "weir: receiver 127.0.0.1:$p1: output /dev/full:" "the failing receiver is named"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "the other receiver: exit $STATUS"
same "$TMP/in" "$TMP/r2" "the other receiver got every byte"
wait_bounded "$l1" 20

done_testing
