#!/bin/bash
# Purpose: a signal to the local weir at any phase of an --ssh start (ssh
# starting, the remote weir answering, the data's connection being made,
# the stream flowing), in every mode (through ssh, direct, connected back;
# push and pull), ends it with 128+N and leaves no remote weir behind (an
# interrupted --ssh-tunnel start used to leave the remote end listening for
# ever); and --pull --ssh-tunnel with ssh killed after the whole stream
# arrived ends both sides, the answer brought home through a new ssh session.
. "$(dirname "$0")/lib.sh"
start_sshd
SSH=(--ssh "$HOST" --rsh "$TMP/sshd/ssh" --remote-weir "$RWEIR")

# remote_gone LABEL: no remote weir of this test is left within 10 s
remote_gone() {
    local i n
    for i in $(seq 200); do
        n=$(pgrep -f -- "$RWEIR --ssh-server" | wc -l)
        [ "$n" -eq 0 ] && break
        sleep 0.05
    done
    [ "$n" -eq 0 ] || { pgrep -af -- "$RWEIR --ssh-server" >&2; fail "$1: $n remote weirs left"; }
    ok "$1: no remote weir left"
}

sigs=(INT TERM HUP)
k=0
for mode in --ssh-tunnel "" --connect-back; do
    for dir in push pull; do
        for delay in 0.05 0.2 0.4 1.5; do
            sig=${sigs[$((k % 3))]}
            k=$((k + 1))
            label="SIG$sig after $delay s, $dir ${mode:-direct}"
            # a script's background job starts with SIGINT ignored, and a
            # signal that comes before weir blocks it (a sanitized weir
            # starts slowly) would then be lost: weir starts as from a
            # terminal, with every signal at its default
            if [ "$dir" = push ]; then
                bg env --default-signal "$WEIR" -q "${SSH[@]}" $mode --remote 'cat >/dev/null' \
                    -i /dev/zero
            else
                bg env --default-signal "$WEIR" -q "${SSH[@]}" $mode --pull --remote 'cat /dev/zero' \
                    -o /dev/null
            fi
            sleep "$delay"   # the phase to interrupt: the fault's own timing
            kill -"$sig" "$BPID"
            wait_bounded "$BPID" 15
            want=$((128 + $(kill -l "$sig")))
            [ "$STATUS" -eq "$want" ] || fail "$label: local exit $STATUS, want $want"
            ok "$label: local exit $want"
            remote_gone "$label"
        done
    done
done

# --pull --ssh-tunnel, ssh killed once the whole stream is in (the local
# consumer still works): the local weir comes back through a new ssh
# session for the answer, and both sides end
gen "$TMP/in" 3000000 random
bg "$WEIR" "${SSH[@]}" --ssh-tunnel --pull --remote "cat '$TMP/in'" -- \
    sh -c "cat >'$TMP/out'; sleep 2"
LPID_=$BPID
cp /dev/null "$TMP/serr"
wait_size "$TMP/out" 2999999 20
sshpid=$(pgrep -P "$LPID_" -x ssh | head -1)
[ -n "$sshpid" ] || fail "no ssh under the local weir"
kill -9 "$sshpid"
wait_bounded "$LPID_" 40
[ "$STATUS" -eq 0 ] || fail "pull through ssh, ssh killed at the end: local exit $STATUS"
same "$TMP/in" "$TMP/out" "pull through ssh, ssh killed at the end: whole"
remote_gone "pull through ssh, ssh killed at the end"
done_testing
