#!/bin/bash
# Purpose: an --ssh transfer whose data connection breaks resumes where the
# receiver stopped, as between two weirs started by hand, in every
# direction: a push or a pull, made directly or connected back, each cut by
# the fault proxy, arrive whole; a push or a pull through ssh comes back
# through a new ssh session after its session drops.  The ssh session dropping mid-transfer (its sshd killed) does not
# stop either weir: the transfer ends over its direct connection, exit 0.
# A local weir killed outright leaves its remote end waiting only until
# --reconnect runs out; with --reconnect 0 an ssh drop fails as before.
. "$(dirname "$0")/lib.sh"
start_sshd
SSH=(--ssh "$HOST" --rsh "$TMP/sshd/ssh")
# no_remote: wait until no remote weir of this test runs (a finished
# transfer's remote end may still be exiting)
no_remote() {
    for _ in $(seq 400); do pgrep -f -x -- "$RWEIR --ssh-server" >/dev/null || return 0; sleep 0.05; done
    fail "a remote weir still runs 20 s after its transfer"
}
SIZE=$(sized 40000003 12000007)
gen "$TMP/in" "$SIZE" mixed

# proxy CUTS EVERY MODE: a cut proxy whose target port is written to
# $TMP/target later (the remote weir's port is known only once it answers);
# sets PPORT, PPID_
proxy() {
    rm -f "$TMP/target"
    cut_proxy "@$TMP/target" "$@"
}

# target FILE TEXT: the port at the end of the line of FILE holding TEXT
# becomes the proxy's target
target() {
    wait_for "$1" "$2" 60
    grep -o -e "$2.*" "$1" | head -n1 | grep -o '[0-9]*$' >"$TMP/target.new"
    mv "$TMP/target.new" "$TMP/target"
}

# cut_through LABEL HOW OUT CUTS WEIR-OPTIONS...: run the local weir -v -z
# over ssh with its data connection through the proxy (HOW: direct, the
# test hook sends the direct connection there; back, a wrapper gives the
# remote weir the hook for its connection back), and check exit 0, OUT
# identical to the input, the proxy's CUTS cuts and the local summary's
# reconnections
cut_through() {
    local label=$1 how=$2 out=$3 cuts=$4
    shift 4
    rm -f "$out"
    if [ "$how" = direct ]; then
        WEIR_TEST_SSH_DIRECT_PORT=$PPORT bg "$WEIR" -v -z "${SSH[@]}" --remote-weir "$RWEIR" \
            "$@" 2>"$TMP/err"
        target "$TMP/err" "it listens on "
    else
        printf '#!/bin/sh\nWEIR_TEST_SSH_BACK_PORT=%s exec %s "$@"\n' "$PPORT" "$WEIR" \
            >"$TMP/rweir"
        chmod 755 "$TMP/rweir"
        bg "$WEIR" -v -z "${SSH[@]}" --remote-weir "$TMP/rweir" --connect-back "$@" 2>"$TMP/err"
        target "$TMP/err" "--connect-back: listening on "
    fi
    wait_bounded "$BPID" 120
    [ "$STATUS" -eq 0 ] || { cat "$TMP/err" >&2; fail "$label, $cuts resets: exit $STATUS"; }
    ok "$label, its connection reset $cuts times: exit 0"
    same "$TMP/in" "$out" "$label, $cuts resets: identical"
    [ "$(grep -c '^cut ' "$TMP/proxy")" -eq "$cuts" ] || fail "$label: the proxy did not cut $cuts times"
    has_msg "$TMP/err" "$cuts reconnections" "$label: the local summary counts them"
}

# a push made directly, its data connection reset 3 times (ssh intact)
proxy 3 $((SIZE / 12)) reset
cut_through "push -z" direct "$TMP/out" 3 --remote "cat >'$TMP/out'" -i "$TMP/in"
has_msg "$TMP/err" "remote: summary:" "push: the remote summary arrives"
grep "remote: summary:" "$TMP/err" | grep -qF "3 reconnections" ||
    fail "push: the remote summary does not count them"
ok "push: the remote summary counts them"
kill "$PPID_" 2>/dev/null

# a pull connected back, its data connection reset twice: the remote weir
# connects back through the proxy (a wrapper gives it the test hook)
proxy 2 $((SIZE / 12)) reset
cut_through "pull --connect-back -z" back "$TMP/out2" 2 --pull --remote "cat '$TMP/in'" \
    -o "$TMP/out2"
kill "$PPID_" 2>/dev/null

# a pull made directly, cut twice where the remote weir sends (the proxy
# counts the server's bytes): the local receiver dials the remote weir's
# port again, and the remote sender takes it there
proxy 2 $((SIZE / 12)) reset --down
cut_through "pull -z made directly" direct "$TMP/out2" 2 --pull --remote "cat '$TMP/in'" \
    -o "$TMP/out2"
kill "$PPID_" 2>/dev/null

# a push connected back (the remote receiver dialled), cut twice: it dials
# the local weir's port again
proxy 2 $((SIZE / 12)) reset --down
cut_through "push --connect-back -z" back "$TMP/out" 2 --remote "cat >'$TMP/out'" -i "$TMP/in"
kill "$PPID_" 2>/dev/null

# the ssh session dropped mid-transfer (the server side's sshd killed), then
# the data connection reset once: the transfer still ends whole
proxy 1 $((SIZE * 2 / 3)) reset
rm -f "$TMP/out"
WEIR_TEST_SSH_DIRECT_PORT=$PPORT bg "$WEIR" -v -r 8M "${SSH[@]}" --remote-weir "$RWEIR" \
    --remote "cat >'$TMP/out'" -i "$TMP/in" 2>"$TMP/err"
target "$TMP/err" "it listens on "
wait_size "$TMP/out" 1000000 60   # the session is under way (the receiver named it)
sshds=$(pgrep -P "$(cat "$TMP/sshd/sshd.pid")")
[ -n "$sshds" ] || fail "no sshd session process seen"
kill -9 $sshds
wait_bounded "$BPID" 120
[ "$STATUS" -eq 0 ] || { cat "$TMP/err" >&2; fail "ssh dropped, then a reset: exit $STATUS"; }
ok "the ssh session dropped, then the data connection reset: exit 0"
same "$TMP/in" "$TMP/out" "ssh dropped, then a reset: identical"
has_msg "$TMP/err" "the ssh connection ended (status 255); the transfer goes on over its direct connection" \
    "ssh dropped: said, with what happens next"
has_msg "$TMP/err" "1 reconnection" "ssh dropped: the reconnection counted"
has_msg "$TMP/err" "the remote end's answer vouches for it" "ssh dropped: why exit 0 is earned"
kill "$PPID_" 2>/dev/null

# through ssh (--ssh-tunnel), the ssh session dropped twice: each time a new
# ssh session carries the transfer back to the remote weir, which waited on
# a port of its host's loopback
rm -f "$TMP/out"
# (a slower rate where weir is sanitized, and the second cut at a third:
# what ssh and the sockets hold in flight must not carry the rest of the
# stream before the cut lands)
bg "$WEIR" -v -r "$(sized 8M 2M)" "${SSH[@]}" --remote-weir "$RWEIR" --ssh-tunnel --remote "cat >'$TMP/out'" \
    -i "$TMP/in" 2>"$TMP/err"
wait_size "$TMP/out" 1000000 60
kill -9 $(pgrep -P "$(cat "$TMP/sshd/sshd.pid")")
wait_for "$TMP/err" "reconnected after" 30
wait_size "$TMP/out" $((SIZE / 3)) 60
kill -9 $(pgrep -P "$(cat "$TMP/sshd/sshd.pid")")
wait_bounded "$BPID" 120
[ "$STATUS" -eq 0 ] || { cat "$TMP/err" >&2; fail "--ssh-tunnel, ssh dropped twice: exit $STATUS"; }
ok "--ssh-tunnel, the ssh session dropped twice: exit 0"
same "$TMP/in" "$TMP/out" "--ssh-tunnel, ssh dropped twice: identical"
has_msg "$TMP/err" "a new ssh session carries the transfer" "--ssh-tunnel: a new session, said"
has_msg "$TMP/err" "2 reconnections" "--ssh-tunnel: both counted"

# a pull through ssh, its session dropped: the local receiver starts the new
# ssh session, and the remote sender takes the connection it brings
rm -f "$TMP/out2"
bg "$WEIR" -q "${SSH[@]}" --remote-weir "$RWEIR" --ssh-tunnel --pull \
    --remote "'$WEIR' -q -r 8M -i '$TMP/in'" -o "$TMP/out2" 2>"$TMP/err"
wait_size "$TMP/out2" 1000000 60
kill -9 $(pgrep -P "$(cat "$TMP/sshd/sshd.pid")")
wait_bounded "$BPID" 120
[ "$STATUS" -eq 0 ] || { cat "$TMP/err" >&2; fail "pull --ssh-tunnel, ssh dropped: exit $STATUS"; }
ok "pull --ssh-tunnel, the ssh session dropped: exit 0"
same "$TMP/in" "$TMP/out2" "pull --ssh-tunnel, ssh dropped: identical"

# the fallback to ssh (the direct port refuses, as a firewall would): the
# new session comes back to the port the remote weir listened on at first
rm -f "$TMP/out"
WEIR_TEST_SSH_DIRECT_PORT=1 bg "$WEIR" -q -r 8M "${SSH[@]}" --remote-weir "$RWEIR" \
    --remote "cat >'$TMP/out'" -i "$TMP/in" 2>"$TMP/err"
wait_size "$TMP/out" 1000000 60
kill -9 $(pgrep -P "$(cat "$TMP/sshd/sshd.pid")")
wait_bounded "$BPID" 120
[ "$STATUS" -eq 0 ] || { cat "$TMP/err" >&2; fail "fallback to ssh, dropped once: exit $STATUS"; }
ok "through ssh after the fallback, the ssh session dropped: exit 0"
same "$TMP/in" "$TMP/out" "fallback, ssh dropped: identical"

# the remote weir killed in a gap of a transfer through ssh: the new
# session finds nothing listening, and the local weir fails at once
rm -f "$TMP/out"
no_remote
bg "$WEIR" -q -r 8M "${SSH[@]}" --remote-weir "$RWEIR" --ssh-tunnel --remote "cat >'$TMP/out'" \
    -i "$TMP/in" 2>"$TMP/err"
wait_size "$TMP/out" 1000000 60
rpid=$(pgrep -f -x -- "$RWEIR --ssh-server" | head -1)
[ -n "$rpid" ] || fail "no remote weir seen"
kill -9 "$rpid"
wait_bounded "$BPID" 60
[ "$STATUS" -eq 5 ] || { cat "$TMP/err" >&2; fail "remote weir killed: exit $STATUS, want 5"; }
ok "--ssh-tunnel, the remote weir killed: exit 5"
has_msg "$TMP/err" "it is gone" "the remote weir killed: the local weir says it is gone"

# the ssh session dropped once the whole stream is in, while the remote
# consumer still works (a zfs recv committing): the transfer ends whole
gen "$TMP/small" 2000003 mixed
rm -f "$TMP/o1" "$TMP/o2"
bg "$WEIR" -v "${SSH[@]}" --remote-weir "$RWEIR" \
    --remote "head -c 1 >'$TMP/o1'; sleep 3; cat >'$TMP/o2'" -i "$TMP/small" 2>"$TMP/err"
wait_for "$TMP/err" "answered" 60   # SIGUSR1 is weir's to take from here
for _ in $(seq 200); do   # the sender sent it all, and waits for the answer
    kill -USR1 "$BPID" 2>/dev/null
    grep -q "waiting for the receiver" "$TMP/err" && break
    sleep 0.05
done
has_msg "$TMP/err" "waiting for the receiver" "the whole stream sent, the answer awaited"
kill -9 $(pgrep -P "$(cat "$TMP/sshd/sshd.pid")")
wait_bounded "$BPID" 60
[ "$STATUS" -eq 0 ] || { cat "$TMP/err" >&2; fail "ssh dropped during the drain: exit $STATUS"; }
ok "the ssh session dropped while the remote consumer drained: exit 0"
cat "$TMP/o1" "$TMP/o2" >"$TMP/out"
same "$TMP/small" "$TMP/out" "ssh dropped during the drain: identical"

# ssh killed a moment before the producer ends: the engine may end before
# the watch on ssh sees it; the remote end's answer still decides
rm -f "$TMP/out"
no_remote
bg "$WEIR" -q "${SSH[@]}" --remote-weir "$RWEIR" --remote "cat >'$TMP/out'" -- \
    sh -c "cat '$TMP/small'; sleep 0.5; pkill -KILL -P \$PPID -x ssh; exit 0"
wait_bounded "$BPID" 60
[ "$STATUS" -eq 0 ] || fail "ssh killed as the producer ended: exit $STATUS"
ok "ssh killed as the producer ended: exit 0"
same "$TMP/small" "$TMP/out" "ssh killed as the producer ended: identical"

# with --reconnect 0 the same drop fails the transfer, as before
rm -f "$TMP/out"
bg "$WEIR" -q -r 8M --reconnect 0 "${SSH[@]}" --remote-weir "$RWEIR" --remote "cat >'$TMP/out'" \
    -i "$TMP/in" 2>"$TMP/err"
wait_size "$TMP/out" 1000000 60
kill -9 $(pgrep -P "$(cat "$TMP/sshd/sshd.pid")")
wait_bounded "$BPID" 30
[ "$STATUS" -eq 5 ] || { cat "$TMP/err" >&2; fail "--reconnect 0, ssh dropped: exit $STATUS"; }
ok "--reconnect 0, the ssh session dropped: exit 5"
has_msg "$TMP/err" "the ssh session ended (its connection dropped, or the local weir is gone)" \
    "--reconnect 0: the remote end says why it stopped"

# the local weir killed outright: its remote end waits out --reconnect 3,
# says so in its log (-l through --remote-opts), and leaves nothing running
rm -f "$TMP/out" "$TMP/rlog"
no_remote
bg "$WEIR" -q -r 8M --reconnect 3 "${SSH[@]}" --remote-weir "$RWEIR" --remote-opts "-l $TMP/rlog" \
    --remote "cat >'$TMP/out'" -i "$TMP/in"
wait_size "$TMP/out" 1000000 60
rpid=$(pgrep -f -x -- "$RWEIR --ssh-server" | head -1)
[ -n "$rpid" ] || fail "no remote weir seen"
kill -9 "$BPID"
for _ in $(seq 400); do kill -0 "$rpid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$rpid" 2>/dev/null && fail "the remote weir $rpid still runs 20 s after the local one died"
ok "the local weir killed: the remote weir gave up within --reconnect and a margin"
has_msg "$TMP/rlog" "the sender did not come back within 3 s" "the remote weir's log says why"
pgrep -f -x "cat >$TMP/out" >/dev/null && fail "the remote consumer still runs"
ok "the local weir killed: the remote consumer is gone"
done_testing
