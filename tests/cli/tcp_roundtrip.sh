#!/bin/bash
# Purpose: weir -O to weir -I over loopback delivers identical data at awkward
# sizes, in the verified stream (default), compressed (-z) and --raw.
. "$(dirname "$0")/lib.sh"
B=65536
for mode in stream z raw; do
    flags=()
    [ "$mode" = z ] && flags=(-z)
    [ "$mode" = raw ] && flags=(--raw)
    for n in 0 1 $((B - 1)) $B $((B + 1)) "$(sized 12000017 3000017)"; do
        gen "$TMP/in" "$n" mixed
        lflags=()
        [ "$mode" = raw ] && lflags=(--raw)
        listen "$TMP/out" "$TMP/lerr" "${lflags[@]}"
        if [ "$mode" = raw ] && [ "$n" -eq 0 ]; then
            # no bytes and no framing: to the listener this is a port scan
            "$WEIR" -q --raw -O "127.0.0.1:$LPORT" -i "$TMP/in" || fail "empty raw sender"
            wait_for "$TMP/lerr" "it closed without sending anything" 10
            kill -0 "$LPID" 2>/dev/null || fail "an empty raw connection ended the listener"
            ok "an empty plain-byte connection is dropped and weir keeps listening"
            kill "$LPID"
            continue
        fi
        "$WEIR" -q -s 64k "${flags[@]}" -O "127.0.0.1:$LPORT" -i "$TMP/in" 2>"$TMP/serr" \
            || { cat "$TMP/serr" "$TMP/lerr"; fail "$mode sender exited $? for $n bytes"; }
        wait_bounded "$LPID" 20
        [ "$STATUS" -eq 0 ] || { cat "$TMP/lerr"; fail "$mode receiver exited $STATUS"; }
        same "$TMP/in" "$TMP/out" "tcp $mode round trip of $n bytes"
    done
done
# IPv6 literal and a host name
gen "$TMP/in" 100000 random
listen "$TMP/out" "$TMP/lerr" -q
"$WEIR" -q -O "[::1]:$LPORT" -i "$TMP/in" || fail "IPv6 sender"
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/out" "[::1]:PORT reaches the dual-stack listener"
listen "$TMP/out" "$TMP/lerr" -q -4 --bind 127.0.0.1
"$WEIR" -q -O "localhost:$LPORT" -i "$TMP/in" || fail "localhost sender"
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/out" "--bind 127.0.0.1 -4 with a host name"
# two network outputs and a file
listen "$TMP/o1" "$TMP/e1" -q
p1=$LPORT; l1=$LPID
listen "$TMP/o2" "$TMP/e2" -q
"$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$p1" -O "127.0.0.1:$LPORT" -o "$TMP/o3" || fail "fan out"
wait_bounded "$l1" 20
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/o1" "first -O of two"
same "$TMP/in" "$TMP/o2" "second -O of two"
same "$TMP/in" "$TMP/o3" "-o beside two -O"
done_testing
