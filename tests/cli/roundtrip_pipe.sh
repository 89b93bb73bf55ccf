#!/bin/bash
# Purpose: data piped through weir comes out identical at awkward sizes.
. "$(dirname "$0")/lib.sh"
B=65536
for n in 0 1 $((B - 1)) $B $((B + 1)) $((20 * 1024 * 1024 + 7)); do
    gen "$TMP/in" "$n" random
    "$WEIR" -q -s 64k <"$TMP/in" >"$TMP/out" || fail "weir exited $? for $n bytes"
    same "$TMP/in" "$TMP/out" "pipe round trip of $n bytes"
done
gen "$TMP/in" 3000000 mixed
"$WEIR" -q -i "$TMP/in" -f -o "$TMP/out" || fail "file to file"
same "$TMP/in" "$TMP/out" "-i FILE -o FILE"
"$WEIR" -q -i - -o - <"$TMP/in" >"$TMP/out2" || fail "dash for stdin and stdout"
same "$TMP/in" "$TMP/out2" "-i - -o -"
done_testing
