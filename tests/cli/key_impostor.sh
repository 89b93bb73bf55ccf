#!/bin/bash
# Purpose: only the key authenticates.  A peer that greets as a keyed weir
# but finishes TLS with a certificate instead of the pre-shared key (the
# impostor, tests/tools/impostor.c) gets no byte of a stream: a keyed
# sender, a keyed link tester and both ends of --ssh refuse it, name why,
# and exit 5.  A listener tells a stranger nothing about which identities
# its key file holds: an unknown identity fails exactly as a wrong key does.
# A crypto policy that makes the handshake retry with another group
# (OPENSSL_CONF, Groups = P-256: a HelloRetryRequest) still works on either
# end.
. "$(dirname "$0")/lib.sh"
: "${IMPOSTOR:?IMPOSTOR must name the impostor tool}"

"$WEIR" -q --genkey "$TMP/k" --key-id alpha || fail "--genkey"
gen "$TMP/in" 3000017 mixed

# impostor_at [sender]: start the impostor in the background; sets IPORT
impostor_at() {
    rm -f "$TMP/imp.out"
    "$IMPOSTOR" listen "$@" >"$TMP/imp.out" 2>"$TMP/imp.err" &
    IPID=$!
    PIDS+=("$IPID")
    wait_for "$TMP/imp.out" "port " 10
    IPORT=$(awk '/^port/ {print $2}' "$TMP/imp.out")
}

# impostor_got LABEL: the impostor's handshake failed, and it received nothing
impostor_got_nothing() {
    wait_bounded "$IPID" 30
    has_msg "$TMP/imp.out" "handshake failed" "$1: the impostor's handshake failed"
    grep -q "^received" "$TMP/imp.out" && fail "$1: the impostor received bytes"
    ok "$1: the impostor received no byte"
}

# 1. a keyed sender facing a listener that shows a certificate
impostor_at
expect 5 "a keyed sender facing a certificate" \
    "$WEIR" -q --key-file "$TMP/k" -O "127.0.0.1:$IPORT" -i "$TMP/in"
has_msg "$TMP/err" "the listener did not prove that it holds the key 'alpha' (it offered a certificate instead): refusing to send" \
    "the sender says the listener did not prove it holds the key"
impostor_got_nothing "sender"

# 2. a keyed link tester
impostor_at
expect 5 "a keyed link tester facing a certificate" \
    "$WEIR" -q --key-file "$TMP/k" --link-test -O "127.0.0.1:$IPORT" --duration 0.1
has_msg "$TMP/err" "did not prove that it holds the key" "the tester says why"
impostor_got_nothing "link tester"

# 3. a keyed listener facing a sender that offers no key
rm -f "$TMP/lerr"   # never read a previous listener's port
"$WEIR" -v --key-file "$TMP/k" -I 0 -o "$TMP/out" 2>"$TMP/lerr" &
LPID=$!
PIDS+=("$LPID")
wait_for "$TMP/lerr" "listening on" 10
LPORT=$(grep -o 'listening on [^ ]*' "$TMP/lerr" | grep -o '[0-9]*$')
"$IMPOSTOR" dial 127.0.0.1 "$LPORT" >"$TMP/dial.out" 2>&1
has_msg "$TMP/dial.out" "handshake failed" "a keyless sender cannot finish the handshake"
wait_for "$TMP/lerr" "refused connection from 127.0.0.1" 10
has_msg "$TMP/lerr" "it offered no key (a TLS client without weir's pre-shared key" \
    "the listener names a sender that offered no key"

# 4. what a stranger learns: an unknown identity and a wrong key get the
# same alert (the listener above is still waiting for its sender)
wrong=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
"$IMPOSTOR" probe 127.0.0.1 "$LPORT" nobody "$wrong" >"$TMP/p1" 2>&1
"$IMPOSTOR" probe 127.0.0.1 "$LPORT" alpha "$wrong" >"$TMP/p2" 2>&1
has_msg "$TMP/p1" "alert " "an unknown identity gets an alert"
[ "$(grep '^alert' "$TMP/p1")" = "$(grep '^alert' "$TMP/p2")" ] ||
    fail "an unknown identity ($(grep '^alert' "$TMP/p1")) and a wrong key ($(grep '^alert' "$TMP/p2")) are told apart"
ok "an unknown identity and a wrong key get the same alert: $(grep '^alert' "$TMP/p1")"
grep -q "complete" "$TMP/p1" "$TMP/p2" && fail "a probe finished the handshake"
ok "neither probe finished the handshake"
# and the listener, which refused them all, still takes its real sender
expect 0 "the real sender after the impostors" \
    "$WEIR" -q --key-file "$TMP/k" -O "127.0.0.1:$LPORT" -i "$TMP/in"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || fail "the listener after the impostors: exit $STATUS"
same "$TMP/in" "$TMP/out" "the real sender's stream, whole"

# 5. --ssh: an on-path impostor takes the data connection.  The remote weir
# is real, but the port it announces is rewritten to the impostor's.
start_sshd
# redirect PORT: a remote weir whose "ready ... listen ADDR PORT" names PORT
# instead (the environment does not cross ssh: the port goes into the script)
redirect() {
    cat >"$TMP/rweir" <<EOF
#!/bin/bash
"$RWEIR" "\$@" | sed -u 's/^\\(ready 1 [^ ]* listen [^ ]*\\) [0-9]*\$/\\1 $1/'
EOF
    chmod +x "$TMP/rweir"
}
impostor_at
redirect "$IPORT"
expect 5 "--ssh push to an impostor" \
    "$WEIR" -q --ssh "$HOST" --rsh "$TMP/sshd/ssh" --remote-weir "$TMP/rweir" --ssh-direct \
    --remote "cat >'$TMP/out.ssh'" -i "$TMP/in"
has_msg "$TMP/err" "did not prove that it holds the key" "--ssh push: says why"
impostor_got_nothing "--ssh push"
# a pull: the local weir dials the port to receive; the impostor there
# poses as the remote sender and offers no key
impostor_at sender
redirect "$IPORT"
expect 5 "--ssh pull from an impostor" \
    "$WEIR" -q --ssh "$HOST" --rsh "$TMP/sshd/ssh" --remote-weir "$TMP/rweir" --ssh-direct \
    --pull --remote "cat '$TMP/in'" -o "$TMP/out.pull"
has_msg "$TMP/err" "no weir sender proved itself on it" "--ssh pull: says why"
wait_bounded "$IPID" 30
has_msg "$TMP/imp.out" "handshake failed" "--ssh pull: the impostor's handshake failed"
[ -s "$TMP/out.pull" ] && fail "--ssh pull: the impostor's bytes were written"
ok "--ssh pull: nothing written"

# 6. a crypto policy that retries the handshake with P-256
cat >"$TMP/p256.cnf" <<'EOF'
openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
Groups = P-256
EOF
for side in listener sender; do
    rm -f "$TMP/out"
    lenv=() senv=()
    [ "$side" = listener ] && lenv=(OPENSSL_CONF="$TMP/p256.cnf")
    [ "$side" = sender ] && senv=(OPENSSL_CONF="$TMP/p256.cnf")
    rm -f "$TMP/lerr"   # never read a previous listener's port
    env "${lenv[@]}" "$WEIR" -v --key-file "$TMP/k" -I 0 -o "$TMP/out" 2>"$TMP/lerr" &
    LPID=$!
    PIDS+=("$LPID")
    wait_for "$TMP/lerr" "listening on" 10
    LPORT=$(grep -o 'listening on [^ ]*' "$TMP/lerr" | grep -o '[0-9]*$')
    expect 0 "P-256 only on the $side" \
        env "${senv[@]}" "$WEIR" -q --key-file "$TMP/k" -O "127.0.0.1:$LPORT" -i "$TMP/in"
    wait_bounded "$LPID" 30
    [ "$STATUS" -eq 0 ] || { cat "$TMP/lerr" >&2; fail "P-256 on the $side: listener exit $STATUS"; }
    same "$TMP/in" "$TMP/out" "P-256 only on the $side: whole"
done

done_testing
