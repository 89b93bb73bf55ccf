#!/bin/bash
# Purpose: with --key-file the two weirs authenticate each other with a TLS 1.3
# PSK handshake and encrypt everything after it; every refusal (a wrong key, no
# key on either side, plain bytes, a replayed session) fails the sender (5) and
# leaves the listener listening with nothing written; round trips at awkward
# sizes, across key epochs, with -z and beside a plain -o file are identical,
# and so are transfers whose first records reach the listener in the same read
# as the end of the handshake.
. "$(dirname "$0")/lib.sh"
KEY=$TMP/a.key
"$WEIR" --genkey "$KEY" --key-id alpha 2>"$TMP/gen" || fail "--genkey: exit $?"
[ "$(stat -c %a "$KEY")" = 600 ] || fail "--genkey made mode $(stat -c %a "$KEY")"
ok "--genkey writes a key file with mode 0600"
secret=$(cut -d' ' -f2 "$KEY")
grep -qF "$secret" "$TMP/gen" && fail "--genkey printed the key"
ok "--genkey never prints the key"
expect 2 "--genkey never overwrites" "$WEIR" --genkey "$KEY"
has_msg "$TMP/err" "File exists" "--genkey over a file: says so"
"$WEIR" -q --genkey "$TMP/b.key" --key-id bravo || fail "second key"
cp "$KEY" "$TMP/open.key"
chmod 644 "$TMP/open.key"
expect 2 "a key file others can read" "$WEIR" -q --key-file "$TMP/open.key" -I 0
has_msg "$TMP/err" "permissions 0644 on $TMP/open.key are too open" "a readable key file: says so"
expect 2 "--key-file without a connection" "$WEIR" -q --key-file "$KEY" -o /dev/null
expect 2 "--key-file with --raw" "$WEIR" -q --key-file "$KEY" --raw -O 127.0.0.1:9

B=65536
for n in 0 1 $((B - 1)) $B $((B + 1)) "$(sized 20000003 5000003)"; do
    gen "$TMP/in" "$n" mixed
    for z in "" -z; do
        listen "$TMP/out" "$TMP/lerr" --key-file "$KEY"
        expect 0 "encrypted $z, $n bytes" "$WEIR" -q $z -s 64k --key-file "$KEY" -i "$TMP/in" -O "127.0.0.1:$LPORT"
        wait_bounded "$LPID" 20
        [ "$STATUS" -eq 0 ] || { cat "$TMP/lerr"; fail "encrypted receiver: exit $STATUS"; }
        same "$TMP/in" "$TMP/out" "encrypted round trip $z of $n bytes"
    done
done
has_msg "$TMP/lerr" "with the key 'alpha'" "the listener logs which key connected"
grep -qF "$secret" "$TMP/lerr" "$TMP/err" && fail "a key appeared in a message"
ok "no key appears in any message"

# keys change every 2 records: a transfer crosses many epochs
gen "$TMP/in" 3000000 mixed
WEIR_TEST_EPOCH_RECORDS=2 listen "$TMP/out" "$TMP/lerr" --key-file "$KEY"
WEIR_TEST_EPOCH_RECORDS=2 expect 0 "across key epochs" \
    "$WEIR" -q -s 64k --key-file "$KEY" -i "$TMP/in" -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/out" "a round trip across 23 key epochs"

# a plain -o file beside an encrypted -O gets the plaintext
listen "$TMP/out" "$TMP/lerr" --key-file "$KEY"
expect 0 "-o beside an encrypted -O" "$WEIR" -q --key-file "$KEY" -i "$TMP/in" \
    -O "127.0.0.1:$LPORT" -o "$TMP/plain"
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/out" "the encrypted output"
same "$TMP/in" "$TMP/plain" "the -o file beside it gets the plaintext"

# refusals: the sender exits 5 and says why; the listener logs, writes
# nothing, and keeps listening for the real sender
refused() {   # refused LABEL SENDER-MESSAGE LISTENER-MESSAGE SENDER-ARGS...
    local label=$1 smsg=$2 lmsg=$3
    shift 3
    expect 5 "$label" "$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$LPORT" "$@"
    has_msg "$TMP/err" "$smsg" "$label: the sender says why"
    [ -z "$lmsg" ] || wait_for "$TMP/lerr" "$lmsg" 10
    ok "$label: the listener logs it"
    kill -0 "$LPID" 2>/dev/null || fail "$label: the listener stopped"
    [ -s "$TMP/out" ] && fail "$label: something reached the output"
    ok "$label: nothing written, still listening"
}
listen "$TMP/out" "$TMP/lerr" --key-file "$KEY"
refused "a key the receiver does not have" "the keys do not match" \
    "the sender's key 'bravo' is not in the key file" --key-file "$TMP/b.key"
sed 's/^bravo /alpha /' "$TMP/b.key" >"$TMP/c.key"
chmod 600 "$TMP/c.key"
refused "the right name with a wrong key" "the keys do not match" "keys do not match" \
    --key-file "$TMP/c.key"
# (the keyless sender reads the greeting and gives up before it sends a byte)
refused "a sender without a key" "the receiver takes only encrypted connections" \
    "it closed without sending anything"
printf 'GET / HTTP/1.1\r\n\r\n' | nc -N 127.0.0.1 "$LPORT" >/dev/null 2>&1
wait_for "$TMP/lerr" "it sent plain bytes" 10
ok "plain bytes to a keyed listener are refused"
# a replayed recording of a real session
rm -f "$TMP/proxy"
"$TESTTOOL" proxy "$LPORT" record 0 0 "$TMP/session" >"$TMP/proxy" &
PIDS+=($!)
wait_for "$TMP/proxy" "proxy listening on" 10
expect 0 "a session through a recording proxy" "$WEIR" -q --key-file "$KEY" -i "$TMP/in" \
    -O "127.0.0.1:$(grep -o '[0-9]*$' "$TMP/proxy")"
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/out" "the recorded session itself arrived"
# the sender's last handshake message and the records after it, read by the
# listener at once: every byte after the handshake is kept (the listener read
# 16 KiB at a time and kept 2 KiB of what followed, so a record did not open)
set -- $(od -An -tu1 -j 32 -N 5 "$TMP/session")   # the ClientHello's TLS record
[ "$#" -eq 5 ] && [ "$1" -eq 22 ] || fail "no ClientHello after the greeting: $*"
hello_end=$((32 + 5 + $4 * 256 + $5))
for z in "" -z; do
    rm -f "$TMP/proxy" "$TMP/cons"
    listen "$TMP/out" "$TMP/lerr" --key-file "$KEY" -- sh -c "cat >'$TMP/cons'"
    "$TESTTOOL" proxy "$LPORT" gather "$hello_end" 60000 >"$TMP/proxy" &
    PIDS+=($!)
    wait_for "$TMP/proxy" "proxy listening on" 10
    # (--reconnect 0: a sender that may resume waits for the session's name
    # after the header, and the proxy would hold the header back for ever)
    expect 0 "handshake end and records in one read $z" "$WEIR" -q $z --key-file "$KEY" \
        --reconnect 0 -i "$TMP/in" -O "127.0.0.1:$(grep -o '[0-9]*$' "$TMP/proxy")"
    wait_bounded "$LPID" 20
    [ "$STATUS" -eq 0 ] || { cat "$TMP/lerr"; fail "records after the handshake $z: receiver exit $STATUS"; }
    same "$TMP/in" "$TMP/cons" "records read with the handshake's end arrive whole $z"
done
listen "$TMP/out" "$TMP/lerr" --key-file "$KEY"
nc -N 127.0.0.1 "$LPORT" <"$TMP/session" >/dev/null 2>&1
wait_for "$TMP/lerr" "refused connection from 127.0.0.1" 10
kill -0 "$LPID" 2>/dev/null || fail "a replay stopped the listener"
[ -s "$TMP/out" ] && fail "a replayed session wrote into the output"
ok "a replayed session is refused and writes nothing"
expect 0 "the real sender after all that" "$WEIR" -q --key-file "$KEY" -i "$TMP/in" -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/out" "the real sender gets through after the refusals"
# a keyed sender never sends in clear
listen "$TMP/out" "$TMP/lerr"
expect 5 "a keyed sender to a listener without a key" "$WEIR" -q --key-file "$KEY" -i "$TMP/in" \
    -O "127.0.0.1:$LPORT"
has_msg "$TMP/err" "the receiver has no key: refusing to send in clear" "no clear text from a keyed sender"
[ -s "$TMP/out" ] && fail "a keyed sender's data reached a keyless listener"
ok "nothing reached the keyless listener"
kill "$LPID"
has_msg "$TMP/lerr" "no key and no allow-list: anyone who can reach" "a keyless open listener warns"

# a keyed peer whose records are of an older form (a greeting with the key
# bit and not bit 6) is refused by name before the handshake, both ways
listen "$TMP/out" "$TMP/lerr" --key-file "$KEY"
{ "$TESTTOOL" greet 1 1 S 3; sleep 2; } | nc 127.0.0.1 "$LPORT" >"$TMP/told" 2>/dev/null
wait_for "$TMP/lerr" "a sender with a key: its encrypted records are of an older weir's form (upgrade it)" 10
grep -qa "older weir's form" "$TMP/told" || fail "the older sender was not told why"
ok "a keyed sender with records of an older form is refused, and told why"
kill "$LPID"
"$TESTTOOL" greet 1 1 R 3 >"$TMP/oldgreet"
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print("port", s.getsockname()[1], flush=True)
c, _ = s.accept(); c.sendall(open(sys.argv[1], "rb").read()); c.settimeout(10)
got = c.recv(1 << 16)
open(sys.argv[2], "wb").write(got)
' "$TMP/oldgreet" "$TMP/oldgot" >"$TMP/oldport" &
PIDS+=($!)
wait_for "$TMP/oldport" "port " 10
expect 5 "a keyed sender at a listener with records of an older form" "$WEIR" -q \
    --key-file "$KEY" -i "$TMP/in" -O "127.0.0.1:$(grep -o '[0-9]*$' "$TMP/oldport")"
has_msg "$TMP/err" "the receiver has a key, but its encrypted records are of an older weir's form" \
    "the sender names the older listener"

# a crowd does not keep a keyed sender out
listen "$TMP/out" "$TMP/lerr" --key-file "$KEY"
mkfifo "$TMP/crowdhold"
"$TESTTOOL" crowd "$LPORT" 200 1 <"$TMP/crowdhold" >"$TMP/crowd" &
PIDS+=($!)
exec 9>"$TMP/crowdhold"
wait_for "$TMP/crowd" "crowd ready" 20
t0=$(date +%s%N)
expect 0 "a keyed sender behind a crowd of 200" "$WEIR" -q --key-file "$KEY" -i "$TMP/in" -O "127.0.0.1:$LPORT"
t1=$(date +%s%N)
echo "# the keyed sender got in and finished $(( (t1 - t0) / 1000000 )) ms after a crowd of 200"
wait_bounded "$LPID" 20
same "$TMP/in" "$TMP/out" "a keyed sender behind a crowd"
exec 9>&-
# a reset during the handshake (on the way, not a refusal): the sender says
# the connection was reset, not only "does the receiver have this key?"
listen /dev/null "$TMP/lerr" --key-file "$KEY" -o "$TMP/out.reset"
rm -f "$TMP/proxy"
"$TESTTOOL" proxy "$LPORT" reset 100 >"$TMP/proxy" &
PIDS+=($!)
wait_for "$TMP/proxy" "proxy listening on" 10
expect 5 "a reset during the handshake" "$WEIR" -q --key-file "$KEY" -i "$TMP/in" \
    -O "127.0.0.1:$(grep -o '[0-9]*$' "$TMP/proxy")"
has_msg "$TMP/err" "the connection was reset during the handshake" \
    "a reset during the handshake: the sender says reset"
kill "$LPID"

done_testing
