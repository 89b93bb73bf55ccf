#!/bin/bash
# Purpose: a TCP-terminating relay between the two weirs that acknowledges
# the receiver's answer and then loses it (the connection cut just after)
# does not turn a good transfer into a failure: the receiver waits for the
# sender's word that it read the answer, the sender comes back for it, and
# both exit 0 with the data whole; plain, -z and with a key.
. "$(dirname "$0")/lib.sh"
"$WEIR" -q --genkey "$TMP/key" --key-id relay || fail "--genkey"
gen "$TMP/in" "$(sized 6000001 2000001)" mixed

for opts in "" "-z" "--key-file $TMP/key" "-z --key-file $TMP/key"; do
    keyopt=""
    case "$opts" in *--key-file*) keyopt="--key-file $TMP/key" ;; esac
    listen "$TMP/out" "$TMP/lerr" $keyopt
    # the first connection's last words from the receiver (its answer) are
    # read by the relay, acknowledged, and lost when the receiver closes
    cut_proxy "$LPORT" 1 1G reset --hold-back 300
    expect 0 "a relay that loses the answer ($opts)" \
        "$WEIR" -q $opts -i "$TMP/in" -O "127.0.0.1:$PPORT"
    wait_bounded "$LPID" 60
    [ "$STATUS" -eq 0 ] || { cat "$TMP/lerr"; fail "the receiver ($opts): exit $STATUS"; }
    same "$TMP/in" "$TMP/out" "the data behind a relay that lost the answer ($opts)"
    grep -q "lost [0-9]* bytes before the server's end" "$TMP/proxy" ||
        fail "the relay lost nothing ($opts): $(cat "$TMP/proxy")"
    ok "the relay lost the receiver's answer ($opts)"
    has_msg "$TMP/lerr" "the sender came back for the answer" \
        "the receiver waited for the sender's word, not its own host's ($opts)"
    kill "$PPID_" 2>/dev/null
done
done_testing
