#!/bin/bash
# Purpose: a listener is not a door left open.  It admits only a connection that
# proves itself (a weir greeting and a whole, valid header; any byte with --raw).
# Port scans, silent peers, one-byte peers, a crowd of 200 of them, plain bytes
# (an HTTP request), weirs of another protocol version and corrupt headers are
# refused and logged; none of them delays or displaces the real sender, and the
# listener keeps listening.
. "$(dirname "$0")/lib.sh"
gen "$TMP/in" 500000 random
real_sender() {   # real_sender LABEL: the real sender gets through; the listener exits 0
    "$WEIR" -q -O "127.0.0.1:$LPORT" -i "$TMP/in" || fail "$1: the real sender exited $?"
    wait_bounded "$LPID" 20
    [ "$STATUS" -eq 0 ] || { cat "$TMP/lerr"; fail "$1: the listener exited $STATUS"; }
    same "$TMP/in" "$TMP/out" "$1: the real sender gets through"
}
still_listening() {
    kill -0 "$LPID" 2>/dev/null || fail "$1 ended the listener"
    [ -s "$TMP/out" ] && fail "$1: something reached the output"
    ok "$1: logged and refused, nothing written, still listening"
}

listen "$TMP/out" "$TMP/lerr"
nc -z 127.0.0.1 "$LPORT" || fail "nc -z could not connect"
wait_for "$TMP/lerr" "dropped connection from 127.0.0.1" 10
has_msg "$TMP/lerr" "it closed without sending anything" "a port scan is logged"
still_listening "a port scan"
real_sender "after a port scan"

# one byte used to own the listener; now it waits, and the real sender wins
listen "$TMP/out" "$TMP/lerr"
mkfifo "$TMP/hold"
{ printf 'x'; exec cat "$TMP/hold"; } | nc 127.0.0.1 "$LPORT" >/dev/null 2>&1 &
PIDS+=($!)
exec 8>"$TMP/hold"
sleep 0.2   # give the one-byte peer its head start (not a wait for a result)
real_sender "behind a one-byte peer"
has_msg "$TMP/lerr" "another sender was admitted first" "the one-byte peer is dropped once the real one is in"
exec 8>&-

# a crowd of 200 silent and 200 one-byte peers does not lock the real sender out
for bytes in 0 1; do
    listen "$TMP/out" "$TMP/lerr"
    rm -f "$TMP/crowd"
    mkfifo "$TMP/crowdhold"
    "$TESTTOOL" crowd "$LPORT" 200 "$bytes" <"$TMP/crowdhold" >"$TMP/crowd" &
    PIDS+=($!)
    exec 9>"$TMP/crowdhold"
    wait_for "$TMP/crowd" "crowd ready" 20
    t0=$(date +%s%N)
    real_sender "behind 200 peers sending $bytes bytes"
    t1=$(date +%s%N)
    echo "# the real sender got in and finished $(( (t1 - t0) / 1000000 )) ms after a crowd of 200 ($bytes bytes each)"
    has_msg "$TMP/lerr" "too many unproven connections" "the crowd is bounded: the oldest are dropped"
    exec 9>&-
    rm -f "$TMP/crowdhold"
done

# a silent peer is dropped after the handshake time, and does not hold the listener
listen "$TMP/out" "$TMP/lerr" --timeout 1
exec 8<> <(:)
nc 127.0.0.1 "$LPORT" <&8 >/dev/null 2>&1 &
PIDS+=($!)
wait_for "$TMP/lerr" "it sent no weir greeting and header within 1 s" 10
still_listening "a silent peer"
real_sender "after a silent peer"
exec 8>&-

# plain bytes are refused unless the listener was told to expect them (--raw)
for extra in "" "-d"; do
    listen "$TMP/out" "$TMP/lerr" $extra
    printf 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' | nc -N 127.0.0.1 "$LPORT" >/dev/null
    wait_for "$TMP/lerr" "refused connection from 127.0.0.1" 10
    # quoted as far as its first read went: the request line at least
    # (nc may hand it over in more than one piece)
    has_msg "$TMP/lerr" "it sent plain bytes ('GET / HTTP/1.1.." "an HTTP request to -I $extra is refused and quoted"
    still_listening "an HTTP request to -I $extra"
    real_sender "after an HTTP request to -I $extra"
done
listen "$TMP/out" "$TMP/lerr" -q --raw
printf 'GET / HTTP/1.1\r\n\r\n' | nc -N 127.0.0.1 "$LPORT" >/dev/null
wait_bounded "$LPID" 10
[ "$STATUS" -eq 0 ] || fail "--raw listener: exit $STATUS"
grep -q "GET / HTTP" "$TMP/out" || fail "--raw: the plain bytes were not passed on"
ok "with --raw, plain bytes are taken as they are"

# weir records that do not make a valid admission
greet() {   # greet VERSION OLDEST ROLE
    "$TESTTOOL" greet "$1" "$2" "$3"
}
header() {   # header VERSION [FLAGS]
    printf "\x57\x2a\x4d\x18\x10\x00\x00\x00HWEIR\\x$(printf %02x "$1")\\x$(printf %02x "${2:-0}")\x00\x00\x00\x01\x00\x00\x00\x00\x00"
}
listen "$TMP/out" "$TMP/lerr"
{ greet 1 1 S; header 9; } | nc -N 127.0.0.1 "$LPORT" >"$TMP/answer"
wait_for "$TMP/lerr" "unsupported weir stream version 9" 10
still_listening "a header of an unknown stream version"
grep -qa "unsupported weir stream version 9" "$TMP/answer" || fail "the refused sender was not told why"
ok "the refused sender is told why, in an answer record"
{ greet 9 9 S; header 1; } | nc -N 127.0.0.1 "$LPORT" >"$TMP/answer"
wait_for "$TMP/lerr" "the sender speaks weir protocol 9 to 9, this receiver 1 to 1" 10
grep -qa "protocol 9 to 9" "$TMP/answer" || fail "the newer sender was not told both versions"
ok "a sender of an incompatible protocol version is told both versions"
# a header that says its blocks carry no checksums (flag bit 1), which only
# an encrypted connection may carry: refused at once, the port kept (it used
# to be admitted, and the receiver failed with exit 6)
{ greet 1 1 S; header 1 2; } | nc -N 127.0.0.1 "$LPORT" >"$TMP/answer"
wait_for "$TMP/lerr" "a stream without block checksums, which only an encrypted connection may carry" 10
still_listening "a plain header without block checksums"
header 1 | nc -N 127.0.0.1 "$LPORT" >/dev/null
wait_for "$TMP/lerr" "a weir sender without the greeting" 10
{ greet 1 1 R; header 1; } | nc -N 127.0.0.1 "$LPORT" >/dev/null
wait_for "$TMP/lerr" "it did not greet as a weir sender" 10
still_listening "an old weir and a receiver's greeting"
real_sender "after five refused weir peers"

# too many unproven connections from one address: the oldest goes first
listen "$TMP/out" "$TMP/lerr"
rm -f "$TMP/crowd"
mkfifo "$TMP/crowdhold2"
"$TESTTOOL" crowd "$LPORT" 33 0 <"$TMP/crowdhold2" >"$TMP/crowd" &
PIDS+=($!)
exec 9>"$TMP/crowdhold2"
wait_for "$TMP/crowd" "crowd ready" 20
wait_for "$TMP/lerr" "too many unproven connections from that address; the oldest goes" 10
still_listening "33 unproven connections from one address"
real_sender "after 33 unproven connections"
exec 9>&-
done_testing
