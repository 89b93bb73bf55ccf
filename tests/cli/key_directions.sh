#!/bin/bash
# Purpose: a listener given --key-id takes that key of its file alone (a
# sender with another key of the file is refused as a wrong key is, and
# nothing is written), so a host that sends and receives with one key file
# and a key for each direction cannot be made to receive its own stream.
. "$(dirname "$0")/lib.sh"
"$WEIR" -q --genkey "$TMP/a2b.key" --key-id a2b || fail "--genkey a2b"
"$WEIR" -q --genkey "$TMP/b2a.key" --key-id b2a || fail "--genkey b2a"
cat "$TMP/a2b.key" "$TMP/b2a.key" >"$TMP/both.key"
chmod 600 "$TMP/both.key"
gen "$TMP/in" 1000003 mixed

# without --key-id a listener takes any key of its file
listen "$TMP/out" "$TMP/lerr" --key-file "$TMP/both.key"
expect 0 "a listener without --key-id takes the file's second key" \
    "$WEIR" -q --key-file "$TMP/both.key" --key-id b2a -i "$TMP/in" -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || { cat "$TMP/lerr"; fail "receiver: exit $STATUS"; }
same "$TMP/in" "$TMP/out" "the transfer under the second key"

# with --key-id it refuses the file's other keys, as a wrong key is refused
listen "$TMP/out" "$TMP/lerr" --key-file "$TMP/both.key" --key-id b2a
expect 5 "a key of the file that the listener does not take" \
    "$WEIR" -q --key-file "$TMP/both.key" --key-id a2b -i "$TMP/in" -O "127.0.0.1:$LPORT"
has_msg "$TMP/err" "the keys do not match" "the sender hears what a wrong key hears"
wait_for "$TMP/lerr" "the sender's key 'a2b' is not the one this listener takes (--key-id b2a)" 10
ok "the listener names the key it refused and the one it takes"
kill -0 "$LPID" 2>/dev/null || fail "the listener stopped after a refusal"
[ -s "$TMP/out" ] && fail "a refused sender's bytes reached the output"
ok "nothing written, still listening"
expect 0 "the key the listener takes" \
    "$WEIR" -q --key-file "$TMP/both.key" --key-id b2a -i "$TMP/in" -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || { cat "$TMP/lerr"; fail "receiver: exit $STATUS"; }
same "$TMP/in" "$TMP/out" "the transfer under the key it takes"

# a reflection: host A sends to B under a2b and receives from B under b2a;
# an attacker turns A's connection back to A's own listener, through a relay
listen "$TMP/out" "$TMP/lerr" --key-file "$TMP/both.key" --key-id b2a
cut_proxy "$LPORT" 0 0 reset
expect 5 "a sender turned back to its own host's listener" \
    "$WEIR" -q --key-file "$TMP/both.key" --key-id a2b -i "$TMP/in" -O "127.0.0.1:$PPORT"
has_msg "$TMP/err" "the keys do not match" "the reflected sender fails the handshake"
[ -s "$TMP/out" ] && fail "the host received its own stream"
ok "the host did not receive its own stream"
kill "$LPID" 2>/dev/null
wait_bounded "$LPID" 10

done_testing
