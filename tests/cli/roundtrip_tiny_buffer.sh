#!/bin/bash
# Purpose: a buffer of four 1 KiB blocks wraps thousands of times without loss.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" $((10 * 1024 * 1024 + 333)) mixed
"$WEIR" -q -s 1k -m 4k <"$TMP/in" >"$TMP/out" || fail "weir exited $?"
same "$TMP/in" "$TMP/out" "10 MiB through -s 1k -m 4k (over 10000 wraps)"
"$WEIR" -q -s 1000 -b 3 <"$TMP/in" | "$TESTTOOL" slowread 50000000 >"$TMP/out2" \
    || fail "odd block size"
same "$TMP/in" "$TMP/out2" "-s 1000 -b 3 with a slower consumer"
done_testing
