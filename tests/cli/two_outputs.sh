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
done_testing
