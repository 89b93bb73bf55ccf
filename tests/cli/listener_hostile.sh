#!/bin/bash
# Purpose: a listener is not a door left open: port scanners and silent peers are
# dropped while weir keeps listening; an HTTP request is never taken for a weir
# stream; a corrupt stream header is rejected.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 500000 random

listen "$TMP/out" "$TMP/lerr"
nc -z 127.0.0.1 "$LPORT" || fail "nc -z could not connect"
wait_for "$TMP/lerr" "dropped: it sent nothing; still listening" 10
ok "a port scan (connect, close) is logged and dropped"
nc -N 127.0.0.1 "$LPORT" </dev/null 2>/dev/null
kill -0 "$LPID" 2>/dev/null || fail "an empty connection ended the listener"
ok "an empty connection does not end the listener"
"$WEIR" -q -O "127.0.0.1:$LPORT" -i "$TMP/in" || fail "sender after the scans exited $?"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || fail "listener exited $STATUS"
same "$TMP/in" "$TMP/out" "the real sender after two scans gets through"

listen "$TMP/out" "$TMP/lerr"
mkfifo "$TMP/hold"
nc 127.0.0.1 "$LPORT" <"$TMP/hold" >/dev/null 2>&1 &
PIDS+=($!)
exec 8>"$TMP/hold"      # keeps the silent peer's connection open
wait_for "$TMP/lerr" "connection from" 10
"$WEIR" -q -O "127.0.0.1:$LPORT" -i "$TMP/in" || fail "sender behind a silent peer exited $?"
wait_bounded "$LPID" 20
exec 8>&-
[ "$STATUS" -eq 0 ] || fail "listener exited $STATUS"
has_msg "$TMP/lerr" "dropped: it sent nothing" "a silent (half-open) peer is dropped when another knocks"
same "$TMP/in" "$TMP/out" "the sender behind a silent peer gets through"

listen "$TMP/out" "$TMP/lerr"
printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' | nc -N 127.0.0.1 "$LPORT" >/dev/null
wait_bounded "$LPID" 10
has_msg "$TMP/lerr" "plain bytes, not a weir stream: its end cannot be verified" \
    "an HTTP request is passed on as plain bytes, and said to be unverified"
listen "$TMP/out" "$TMP/lerr" -d
printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' | nc -N 127.0.0.1 "$LPORT" >/dev/null
wait_bounded "$LPID" 10
[ "$STATUS" -eq 6 ] || fail "HTTP to -I -d: exit $STATUS, want 6"
has_msg "$TMP/lerr" "not a weir stream or LZ4 data" "with -d an HTTP request is rejected (exit 6)"
[ ! -s "$TMP/out" ] || fail "the HTTP request was written out"
ok "nothing of it was written"

listen "$TMP/out" "$TMP/lerr"
printf '\x57\x2a\x4d\x18\x10\x00\x00\x00HWEIR\x09\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00' \
    | nc -N 127.0.0.1 "$LPORT" >/dev/null
wait_bounded "$LPID" 10
[ "$STATUS" -eq 6 ] || fail "bad version: exit $STATUS, want 6"
has_msg "$TMP/lerr" "unsupported weir stream version 9" "a header of an unknown version is rejected"
done_testing
