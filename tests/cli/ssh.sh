#!/bin/bash
# Purpose: weir --ssh starts the other weir over a real sshd (a throwaway one
# on a loopback port, with its own host key, user key and config), hands it a
# one-time key through the ssh channel, and moves the data directly; push and
# pull, with and without -z, at 0, 1 byte and 20 MiB, arrive whole; a failed
# remote consumer, remote producer or local producer, a wrong user key, a
# missing remote weir and a killed ssh each give their status and a message
# naming the side; SIGINT leaves nothing running on the "remote" side.
. "$(dirname "$0")/lib.sh"
start_sshd
SSH=(--ssh "$HOST" --rsh "$TMP/sshd/ssh" --remote-weir "$RWEIR")

for n in 0 1 "$(sized 20971520 3000001)"; do
    gen "$TMP/in" "$n" mixed
    for z in "" -z; do
        rm -f "$TMP/out" "$TMP/out2"
        expect 0 "push $z, $n bytes" "$WEIR" -q $z "${SSH[@]}" --remote "cat >'$TMP/out'" \
            -i "$TMP/in"
        same "$TMP/in" "$TMP/out" "push $z, $n bytes: identical"
        expect 0 "pull $z, $n bytes" "$WEIR" -q $z "${SSH[@]}" --pull --remote "cat '$TMP/in'" \
            -o "$TMP/out2"
        same "$TMP/in" "$TMP/out2" "pull $z, $n bytes: identical"
    done
done
# the ways the data can go: through ssh, connected back, direct only, and
# through ssh after the direct connection is refused (as a firewall would)
gen "$TMP/in" "$(sized 5000011 1000003)" mixed
for way in --ssh-tunnel --connect-back --ssh-direct "--connect-back --ssh-direct"; do
    for z in "" -z; do
        rm -f "$TMP/out" "$TMP/out2"
        expect 0 "push $way $z" "$WEIR" -q $z "${SSH[@]}" $way --remote "cat >'$TMP/out'" \
            -i "$TMP/in"
        same "$TMP/in" "$TMP/out" "push $way $z: identical"
        expect 0 "pull $way $z" "$WEIR" -q $z "${SSH[@]}" $way --pull \
            --remote "cat '$TMP/in'" -o "$TMP/out2"
        same "$TMP/in" "$TMP/out2" "pull $way $z: identical"
    done
done
# a direct push spread over three connections to the weir ssh started
rm -f "$TMP/out"
"$WEIR" -z "${SSH[@]}" --ssh-direct --streams 3 --remote "cat >'$TMP/out'" -i "$TMP/in" \
    2>"$TMP/err" || { cat "$TMP/err" >&2; fail "push --ssh-direct --streams 3: exit $?"; }
same "$TMP/in" "$TMP/out" "push --ssh-direct --streams 3 -z: identical"
has_msg "$TMP/err" "the transfer goes over 3 connections" "the direct push went over three"
expect 2 "--streams 3 with --pull" "$WEIR" "${SSH[@]}" --pull --streams 3 \
    --remote "cat '$TMP/in'" -o "$TMP/out2"
has_msg "$TMP/err" "--streams with --ssh spreads a push over direct connections only" \
    "--streams with --pull: says why"
for n in 0 1; do
    gen "$TMP/tiny" "$n" mixed
    rm -f "$TMP/out" "$TMP/out2"
    expect 0 "push --ssh-tunnel, $n bytes" "$WEIR" -q "${SSH[@]}" --ssh-tunnel \
        --remote "cat >'$TMP/out'" -i "$TMP/tiny"
    same "$TMP/tiny" "$TMP/out" "push --ssh-tunnel, $n bytes: identical"
    expect 0 "pull --ssh-tunnel, $n bytes" "$WEIR" -q "${SSH[@]}" --ssh-tunnel --pull \
        --remote "cat '$TMP/tiny'" -o "$TMP/out2"
    same "$TMP/tiny" "$TMP/out2" "pull --ssh-tunnel, $n bytes: identical"
done
rm -f "$TMP/out" "$TMP/out2"
WEIR_TEST_SSH_DIRECT_PORT=1 "$WEIR" "${SSH[@]}" --remote "cat >'$TMP/out'" -i "$TMP/in" \
    2>"$TMP/err" || { cat "$TMP/err" >&2; fail "push without a direct connection: exit $?"; }
same "$TMP/in" "$TMP/out" "push without a direct connection: through ssh, identical"
has_msg "$TMP/err" "the data goes through the ssh connection instead" "the fallback is said"
has_msg "$TMP/err" "Connection refused" "the fallback says why"
# the remote weir listens already: a refusal is its answer, not retried
grep -q "retrying" "$TMP/err" && { cat "$TMP/err" >&2; fail "a refused direct connection was retried"; }
ok "a refused direct connection is not retried: the tunnel is taken at once"
WEIR_TEST_SSH_DIRECT_PORT=1 "$WEIR" -q -z "${SSH[@]}" --pull --remote "cat '$TMP/in'" \
    -o "$TMP/out2" 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "pull without a direct connection"; }
same "$TMP/in" "$TMP/out2" "pull -z without a direct connection: through ssh, identical"
WEIR_TEST_SSH_DIRECT_PORT=1 expect 5 "--ssh-direct without a direct connection" "$WEIR" -q \
    "${SSH[@]}" --ssh-direct --remote "cat >/dev/null" -i "$TMP/in"
has_msg "$TMP/err" "(--ssh-direct: not through ssh)" "--ssh-direct: says why it failed"
expect 2 "--ssh-tunnel with --ssh-direct" "$WEIR" "${SSH[@]}" --ssh-tunnel --ssh-direct \
    --remote cat -i "$TMP/in"
expect 2 "--connect-back with --ssh-tunnel" "$WEIR" "${SSH[@]}" --ssh-tunnel --connect-back \
    --remote cat -i "$TMP/in"

# commands at both ends, and standard input and output
gen "$TMP/in" 1000003 mixed
expect 0 "push from a local producer" "$WEIR" -q "${SSH[@]}" --remote "cat >'$TMP/out'" \
    -- cat "$TMP/in"
same "$TMP/in" "$TMP/out" "push from a local producer: identical"
"$WEIR" -q -z "${SSH[@]}" --pull --remote "cat '$TMP/in'" -- sh -c "cat >'$TMP/out3'" \
    2>"$TMP/err" || fail "pull into a local consumer: exit $?"
same "$TMP/in" "$TMP/out3" "pull into a local consumer: identical"
"$WEIR" -q "${SSH[@]}" --remote "cat >'$TMP/out4'" <"$TMP/in" 2>"$TMP/err" ||
    fail "push from standard input: exit $?"
same "$TMP/in" "$TMP/out4" "push from standard input: identical"
"$WEIR" -q "${SSH[@]}" --pull --remote "cat '$TMP/in'" >"$TMP/out5" 2>"$TMP/err" ||
    fail "pull to standard output: exit $?"
same "$TMP/in" "$TMP/out5" "pull to standard output: identical"

# the remote weir's messages arrive prefixed, with its summary
"$WEIR" "${SSH[@]}" --remote "cat >/dev/null" -i "$TMP/in" 2>"$TMP/err" || fail "verbose push"
has_msg "$TMP/err" "remote: summary: 977 KiB" "the remote summary appears as remote:"
has_msg "$TMP/err" "with the key 'ssh-one-time'" "the remote weir admitted the one-time key"

# the status line (SIGUSR1 prints it once) shows what the remote end wrote
gen "$TMP/slow" 6000000 random
rm -f "$TMP/out7"
bg "$WEIR" -r 2M "${SSH[@]}" --remote "cat >'$TMP/out7'" -i "$TMP/slow" 2>"$TMP/err7"
wait_size "$TMP/out7" 1000000 30
# the receiver's keepalives carry what it wrote, twice a second
for _ in $(seq 40); do
    kill -USR1 "$BPID"
    grep -q "receiver wrote" "$TMP/err7" && break
    sleep 0.1
done
has_msg "$TMP/err7" "receiver wrote" "SIGUSR1's status line, during a push"
wait_bounded "$BPID" 60
[ "$STATUS" -eq 0 ] || { cat "$TMP/err7" >&2; fail "the status line's push: exit $STATUS"; }
ok "the status line shows what the remote receiver wrote"

# failures, each named with its side
expect 4 "remote consumer exits 1" "$WEIR" -q "${SSH[@]}" \
    --remote "head -c 10 >/dev/null; echo recv-broke >&2; exit 1" -i "$TMP/in"
has_msg "$TMP/err" "remote: consumer 'head -c 10 >/dev/null; echo recv-broke >&2; exit 1' exited with status 1: recv-broke" \
    "remote consumer: named, with its last line"
expect 3 "remote producer exits 1" "$WEIR" -q "${SSH[@]}" --pull \
    --remote "head -c 1000 '$TMP/in'; echo send-broke >&2; exit 1" -o "$TMP/out6"
has_msg "$TMP/err" "remote: producer 'head -c 1000" "remote producer: named"
has_msg "$TMP/err" "exited with status 1: send-broke" "remote producer: its last line"
expect 3 "local producer exits 1" "$WEIR" -q "${SSH[@]}" --remote "cat >/dev/null" \
    -- sh -c "head -c 1000 '$TMP/in'; exit 1"
has_msg "$TMP/err" "producer 'head -c 1000 '$TMP/in'; exit 1' exited with status 1" "local producer: named"
# the remote end heard why, or (when the producer failed before the
# stream began) that the connection was reset or closed, or the local weir went away
grep -qE "remote: (sender: producer|the ssh session ended|.*(Connection reset by peer|no weir sender proved itself))" "$TMP/err" ||
    { cat "$TMP/err" >&2; fail "the remote end said nothing of the failure"; }
ok "the remote end stopped, and said why"
expect 5 "a remote weir that is missing" "$WEIR" -q --ssh "$HOST" --rsh "$TMP/sshd/ssh" \
    --remote-weir "$TMP/no/weir" --remote "cat" -i "$TMP/in"
has_msg "$TMP/err" "remote: $TMP/no/weir: command not found on $HOST" "missing weir: said"
# a remote weir too old to know --ssh-server, and one that speaks another
# version of the channel's protocol: each named, with the versions known
printf '#!/bin/sh\necho "weir: unknown option %s" >&2\nexit 2\n' "'--ssh-server'" >"$TMP/oldweir"
printf '#!/bin/sh\necho "ready 9 0.0.1 direct 127.0.0.1 1234"\nexec cat >/dev/null\n' >"$TMP/otherweir"
chmod 755 "$TMP/oldweir" "$TMP/otherweir"
version=$("$WEIR" --version | awk '{print $2}')
expect 5 "a remote weir too old for --ssh" "$WEIR" -q --ssh "$HOST" --rsh "$TMP/sshd/ssh" \
    --remote-weir "$TMP/oldweir" --remote "cat" -i "$TMP/in"
has_msg "$TMP/err" "remote: the weir on $HOST is too old for --ssh (it does not know --ssh-server); this is weir $version" \
    "too old: named, with this weir's version"
expect 5 "a remote weir of another --ssh protocol" "$WEIR" -q --ssh "$HOST" --rsh "$TMP/sshd/ssh" \
    --remote-weir "$TMP/otherweir" --remote "cat" -i "$TMP/in"
has_msg "$TMP/err" "remote: weir 0.0.1 on $HOST speaks --ssh protocol 9; this weir $version speaks 1" \
    "another protocol: both versions named"
# and the other way: a local weir of another protocol, as the remote one hears it
printf 'weir-ssh 9\n' | SSH_CONNECTION="127.0.0.1 1 127.0.0.1 22" "$WEIR" --ssh-server >"$TMP/answer" 2>/dev/null
st=$?
[ "$st" -eq 5 ] || fail "--ssh-server, a request of protocol 9: exit $st, want 5"
has_msg "$TMP/answer" "refused 5 weir $version speaks --ssh protocol 1, the local weir speaks 9: use the same version on both hosts" \
    "--ssh-server refuses another protocol, naming both"
ssh-keygen -q -t ed25519 -N '' -f "$TMP/stranger" </dev/null
sed "s|-i $TMP/sshd/user_key|-i $TMP/stranger|" "$TMP/sshd/ssh" >"$TMP/badssh"
chmod 755 "$TMP/badssh"
expect 5 "a wrong user key" "$WEIR" -q --ssh "$HOST" --rsh "$TMP/badssh" --remote-weir "$WEIR" \
    --remote "cat" -i "$TMP/in"
has_msg "$TMP/err" "ssh $HOST: $HOST: Permission denied (publickey)" "wrong key: ssh's words"
# ssh's last words before it gave up are the failure's message: once, last
[ "$(grep -c "Permission denied" "$TMP/err")" -eq 1 ] &&
    tail -n 1 "$TMP/err" | grep -q "Permission denied (publickey)" ||
    { cat "$TMP/err" >&2; fail "wrong key: ssh's words not said once, last"; }
ok "wrong key: ssh's words said once, as the last line"
expect 5 "a host that does not resolve" "$WEIR" -q --ssh nosuchhost.invalid \
    --rsh "$TMP/sshd/ssh" --remote "cat" -i "$TMP/in"
[ "$(grep -c "nosuchhost.invalid" "$TMP/err")" -eq 1 ] &&
    tail -n 1 "$TMP/err" | grep -q "^weir: ssh nosuchhost.invalid: ssh: Could not resolve hostname" ||
    { cat "$TMP/err" >&2; fail "a host that does not resolve: not said once, last"; }
ok "a host that does not resolve: ssh's words said once, as the last line"
expect 2 "a bad option for the remote weir" "$WEIR" -q "${SSH[@]}" --remote-opts "--bogus" \
    --remote "cat >/dev/null" -i "$TMP/in"
has_msg "$TMP/err" "remote: unknown option '--bogus'" "a bad remote option: the remote weir's words"
[ "$(grep -c "bogus" "$TMP/err")" -eq 1 ] || fail "a bad remote option: said more than once"
ok "a bad remote option: said once, before any connection"
for opt in --raw "--key-file $TMP/nokey" -d; do
    expect 2 "--remote-opts '$opt'" "$WEIR" -q "${SSH[@]}" --remote-opts "$opt" \
        --remote "cat >/dev/null" -i "$TMP/in"
    has_msg "$TMP/err" "has no place there: the two weirs of --ssh make their own connection" \
        "--remote-opts '$opt': refused, not ignored"
done
# a local end that cannot work is named before ssh logs in: the far end's
# command never starts (the ssh stand-in leaves a mark if it is run)
printf '#!/bin/sh\ntouch "%s/ssh-ran"\nexit 255\n' "$TMP" >"$TMP/markssh"
chmod 755 "$TMP/markssh"
MARK=(--ssh "$HOST" --rsh "$TMP/markssh" --remote-weir "$RWEIR")
expect 3 "--ssh push, standard input closed" "$WEIR" -q "${MARK[@]}" --remote "cat >/dev/null" <&-
has_msg "$TMP/err" "input <stdin>: standard input is closed" "push, stdin closed: said"
expect 3 "--ssh push, -i a file that is not there" "$WEIR" -q "${MARK[@]}" --remote "cat >/dev/null" \
    -i "$TMP/no/such"
has_msg "$TMP/err" "input $TMP/no/such: open: No such file or directory" "push, no input file: said"
expect 4 "--ssh --pull, standard output closed" "$WEIR" -q "${MARK[@]}" --pull --remote "cat '$TMP/in'" >&-
has_msg "$TMP/err" "output <stdout>: standard output is closed" "pull, stdout closed: said"
[ ! -e "$TMP/ssh-ran" ] || fail "ssh was started for a local end that could not work"
ok "ssh not started for a local end that cannot work"
"$WEIR" -q "${MARK[@]}" --remote "cat >/dev/null" </dev/null 2>"$TMP/err"
[ -e "$TMP/ssh-ran" ] || { cat "$TMP/err" >&2; fail "the ssh stand-in was not run (the check above proves nothing)"; }
ok "the ssh stand-in runs when the local end is fine"
expect 2 "--remote without --ssh" "$WEIR" --remote "cat" -i "$TMP/in"
expect 2 "--ssh without --remote" "$WEIR" --ssh "$HOST" -i "$TMP/in"
expect 2 "--ssh with a host that is an option" "$WEIR" --ssh "-oProxyCommand=x" --remote cat
expect 2 "--ssh with -O" "$WEIR" "${SSH[@]}" --remote cat -O 127.0.0.1:9

# SIGTERM while ssh is still logging in (an ssh that takes 20 s to start)
printf '#!/bin/sh\nsleep 20\nexec %s "$@"\n' "$TMP/sshd/ssh" >"$TMP/slowssh"
chmod 755 "$TMP/slowssh"
bg "$WEIR" -q --ssh "$HOST" --rsh "$TMP/slowssh" --remote-weir "$WEIR" --remote "cat >/dev/null" \
    -i "$TMP/in"
pid=$BPID
for _ in $(seq 200); do pgrep -f "$TMP/slowssh" >/dev/null && break; sleep 0.05; done
kill -TERM "$pid"
wait_bounded "$pid" 5
[ "$STATUS" -eq 143 ] || fail "SIGTERM while ssh logs in: exit $STATUS, want 143"
ok "SIGTERM while ssh logs in: 143, without waiting for the login"

# SIGTERM while the direct connection is being tried (its SYNs are
# dropped, as by a firewall, and the connection is tried for 5 s)
python_with socket python3
"$PY" "$(dirname "$0")/../tools/syn_drop.py" 30 >"$TMP/drop.port" &
PIDS+=($!)
wait_for "$TMP/drop.port" "" 10   # a line: the port
WEIR_TEST_SSH_DIRECT_PORT=$(cat "$TMP/drop.port") bg "$WEIR" -v "${SSH[@]}" --ssh-direct \
    --remote "cat >/dev/null" -i "$TMP/in" 2>"$TMP/direct.err"
pid=$BPID
wait_for "$TMP/direct.err" "answered" 10
kill -TERM "$pid"
wait_bounded "$pid" 3
[ "$STATUS" -eq 143 ] ||
    { cat "$TMP/direct.err" >&2; fail "SIGTERM while connecting: exit $STATUS, want 143"; }
has_msg "$TMP/direct.err" "interrupted by SIGTERM while making the direct connection" \
    "SIGTERM while connecting: said"

# the key never on a command line: the remote weir runs as "weir --ssh-server"
bg "$WEIR" -q "${SSH[@]}" --remote "sleep 37" -i "$TMP/in"
for _ in $(seq 200); do
    rpid=$(pgrep -f -x -- "$RWEIR --ssh-server" | head -1)
    [ -n "$rpid" ] && break
    sleep 0.05
done
[ -n "$rpid" ] || fail "no remote weir seen"
tr '\0' ' ' </proc/"$rpid"/cmdline >"$TMP/cmdline"
grep -q "^$RWEIR --ssh-server $" "$TMP/cmdline" || fail "remote command line: $(cat "$TMP/cmdline")"
ok "the remote weir's command line holds no key and no command"
grep -qa "ssh-one-time" /proc/"$rpid"/environ && fail "the key is in the remote environment"
ok "the remote weir's environment holds no key"

# SIGINT to the local weir: nothing left running on the other side
for _ in $(seq 200); do
    spid=$(pgrep -f -x "sleep 37" | head -1)
    [ -n "$spid" ] && break
    sleep 0.05
done
[ -n "$spid" ] || fail "the remote consumer never started"
kill -INT "$BPID"
wait_bounded "$BPID" 30
[ "$STATUS" -eq 130 ] || fail "SIGINT: exit $STATUS, want 130"
ok "SIGINT: the local weir exits 130"
for _ in $(seq 200); do
    kill -0 "$rpid" 2>/dev/null || kill -0 "$spid" 2>/dev/null || break
    sleep 0.05
done
kill -0 "$rpid" 2>/dev/null && fail "the remote weir $rpid still runs after SIGINT"
kill -0 "$spid" 2>/dev/null && fail "the remote consumer $spid still runs after SIGINT"
ok "SIGINT: the remote weir and its consumer are gone"

# ssh killed mid-transfer, with resuming off (ssh_resume.sh: with it on)
bg "$WEIR" -q --reconnect 0 "${SSH[@]}" --remote "sleep 37" -i "$TMP/in"
for _ in $(seq 200); do
    sshpid=$(pgrep -f -- "-i $TMP/sshd/user_key.*--ssh-server" | head -1)
    spid=$(pgrep -f -x "sleep 37" | head -1)
    [ -n "$sshpid" ] && [ -n "$spid" ] && break
    sleep 0.05
done
[ -n "$sshpid" ] || fail "no ssh client seen"
kill -9 "$sshpid"
wait_bounded "$BPID" 30
[ "$STATUS" -eq 5 ] || fail "ssh killed: exit $STATUS, want 5"
ok "ssh killed mid-transfer: the local weir exits 5"
for _ in $(seq 200); do kill -0 "$spid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$spid" 2>/dev/null && fail "the remote consumer $spid still runs after ssh died"
ok "ssh killed mid-transfer: nothing left on the other side"
# a remote command that leaves a background job holding the ssh session
# open: the transfer is vouched for by the remote end's answer, so ssh is
# stopped after the grace period (twice --timeout, 3 s, here) and weir
# exits 0, saying why (it used to exit 5, "the connection failed")
gen "$TMP/bgin" 60000 random
rm -f "$TMP/out" "$TMP/bg.pid"
expect 0 "a remote background job holds the session" "$WEIR" "${SSH[@]}" --timeout 3 \
    --remote "sleep 40 & echo \$! >'$TMP/bg.pid'; cat >'$TMP/out'" -i "$TMP/bgin"
has_msg "$TMP/err" "the session was still open 6 s after the transfer (a process the remote command left behind holds it)" \
    "a remote background job: says why ssh was stopped"
same "$TMP/bgin" "$TMP/out" "a remote background job: identical"
[ -s "$TMP/bg.pid" ] && kill "$(cat "$TMP/bg.pid")" 2>/dev/null
done_testing
