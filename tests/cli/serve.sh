#!/bin/bash
# serve.sh - weir --serve: a permanent keyed target for many clients.
#
# Three clients at once to their own targets (checksums at awkward sizes);
# a file target named by strftime; a client asking for another's target,
# an unknown key, a keyless sender, --target to a plain receiver: each
# refused on both ends with the reason; busy (one per client and target)
# and max-transfers; a target that fails tells its own sender only; a
# reload mid-transfer, and one that fails (the old file stays); SIGTERM
# mid-transfer (the transfer ends whole, nothing new is taken); a bad file
# refused at the start with its line; systemd-socket-activate with
# readiness; 100 transfers in a row with no descriptor or process left; a
# transfer whose connection is cut twice resumes through the service.
. "$(dirname "$0")/lib.sh"
python_with socket python3

K=$TMP/keys
mkdir -p "$K" "$TMP/out"
for c in nas1 nas2 laptop stranger; do
    "$WEIR" -q --genkey "$K/$c.key" --key-id "$c" 2>/dev/null || fail "--genkey $c"
done
cat "$K/nas1.key" "$K/nas2.key" "$K/laptop.key" >"$K/clients.key"
chmod 600 "$K/clients.key"
gen "$TMP/a" 3333331 random
gen "$TMP/b" 2097152 mixed
gen "$TMP/c" 1 random
gen "$TMP/big" "$(sized 60000017 20000017)" random
# a consumer that waits for its go file before it reads: a transfer held
# open for as long as a check needs, without sleeping
cat >"$TMP/held.sh" <<EOF
#!/bin/sh
while [ ! -e "$TMP/go" ]; do sleep 0.05; done
cat >"$TMP/out/held"
EOF
chmod +x "$TMP/held.sh"

conf() {
    cat >"$TMP/serve.conf" <<EOF
# the test's service
listen 127.0.0.1:0
key-file $K/clients.key
max-transfers ${MAXT:-4}
client nas1   target tank  -- sh -c "cat > '$TMP/out/tank'"
client nas1   target home  -- dd of=$TMP/out/home bs=64k status=none
client nas2   target tank  -- sh -c 'cat > "$TMP/out/nas2"'
client laptop target files -o $TMP/out/%Y-%m.tar
client laptop target held  -- $TMP/held.sh
client laptop target bad   -- sh -c 'head -c 1000 >/dev/null; echo "no space left for laptop" >&2; exit 3'
$*
EOF
}

# serve: start the service; SPID, SPORT
serve() {
    rm -f "$TMP/slog"
    "$WEIR" --serve "$TMP/serve.conf" 2>"$TMP/slog" &
    SPID=$!
    PIDS+=("$SPID")
    wait_for "$TMP/slog" "listening on" 10
    SPORT=$(grep -o 'listening on [^:]*:[0-9]*' "$TMP/slog" | head -n1 | grep -o '[0-9]*$')
    [ -n "$SPORT" ] || fail "no port in: $(cat "$TMP/slog")"
}

# begun N: wait until the service's log says N transfers began
begun() {
    local i=0
    until [ "$(grep -c ': transfer from .* begins' "$TMP/slog")" -ge "$1" ]; do
        i=$((i + 1))
        [ $i -gt 200 ] && { cat "$TMP/slog" >&2; fail "fewer than $1 transfers began"; }
        sleep 0.05
    done
}

# send CLIENT [OPTIONS...]: a keyed sender to the service
send() {
    local c=$1
    shift
    "$WEIR" -q --key-file "$K/$c.key" -O "127.0.0.1:${TO:-$SPORT}" "$@"
}

# 1. three clients at once, each to its own target
conf
serve
send nas1 --target tank -i "$TMP/a" 2>"$TMP/e1" & p1=$!
send nas2 -i "$TMP/b" 2>"$TMP/e2" & p2=$!
send nas1 --target home -i "$TMP/c" 2>"$TMP/e3" & p3=$!
for p in $p1 $p2 $p3; do
    wait_bounded "$p" 60
    [ "$STATUS" -eq 0 ] || { cat "$TMP"/e? "$TMP/slog" >&2; fail "a sender of three: exit $STATUS"; }
done
ok "three senders at once: exit 0"
same "$TMP/a" "$TMP/out/tank" "nas1's tank is whole"
same "$TMP/b" "$TMP/out/nas2" "nas2's first target (none named) is whole"
same "$TMP/c" "$TMP/out/home" "nas1's home (one byte) is whole"
expect 0 "a file target, named by strftime" send laptop --target files -i "$TMP/b"
same "$TMP/b" "$TMP/out/$(date +%Y-%m).tar" "the file target is whole"
wait_for "$TMP/slog" "client laptop target files: transfer from" 10
wait_for "$TMP/slog" "2097152 bytes in" 10
ok "the service logs each transfer's end with its bytes"

# 2. refusals, said on both ends
expect 5 "a client asking for another's target" send nas2 --target home -i "$TMP/c"
has_msg "$TMP/err" "client nas2 has no target named home here" "the sender is told why"
has_msg "$TMP/slog" "client nas2 has no target named home here" "the service says why"
expect 5 "an unknown key" send stranger -i "$TMP/c"
has_msg "$TMP/err" "the keys do not match (identity 'stranger'" "the stranger is told"
has_msg "$TMP/slog" "the sender's key 'stranger' is not in the key file" "the service says why"
expect 5 "a sender without a key" "$WEIR" -q -O "127.0.0.1:$SPORT" -i "$TMP/c"
has_msg "$TMP/err" "the receiver takes only encrypted connections" "the keyless sender is told"
listen "$TMP/lout" "$TMP/lerr" --key-file "$K/clients.key"
expect 5 "--target to a receiver that is not a service" \
    "$WEIR" -q --key-file "$K/nas1.key" -O "127.0.0.1:$LPORT" --target tank -i "$TMP/c"
has_msg "$TMP/err" "--target tank: the receiver is not a service" "the sender says why"
kill "$LPID" 2>/dev/null
expect 2 "--target without a key" "$WEIR" -q -O "127.0.0.1:$SPORT" --target tank -i "$TMP/c"
has_msg "$TMP/err" "--target names a service's target: it needs -O and --key-file" "named"
expect 2 "--target with a slash" send nas1 --target ../tank -i "$TMP/c"
has_msg "$TMP/err" "a target's name is 1 to 63 of" "the name's rule is said"

# 3. a target that fails: its message reaches its own sender only
n=$(grep -c ': transfer from .* begins' "$TMP/slog")
send laptop --target held -i "$TMP/big" 2>"$TMP/eh" & ph=$!
begun $((n + 1))
expect 4 "a failing target" send laptop --target bad -i "$TMP/a"
has_msg "$TMP/err" "no space left for laptop" "the failing target's last line reaches its sender"
# 4. busy: the same client and target, while held runs
expect 5 "a second transfer to a busy target" send laptop --target held -i "$TMP/c"
has_msg "$TMP/err" "busy: client laptop target held has a transfer under way" "busy is said"
touch "$TMP/go"
wait_bounded "$ph" 60
[ "$STATUS" -eq 0 ] || { cat "$TMP/eh" >&2; fail "the held transfer: exit $STATUS"; }
grep -q "no space left" "$TMP/eh" && fail "another target's failure reached the held sender"
same "$TMP/big" "$TMP/out/held" "the held transfer is whole, untouched by the failing one"
rm -f "$TMP/go" "$TMP/out/held"

# 5. a reload mid-transfer: the running one goes on; the new target works;
#    a reload that fails keeps the file in use
n=$(grep -c ': transfer from .* begins' "$TMP/slog")
send laptop --target held -i "$TMP/big" 2>"$TMP/eh" & ph=$!
begun $((n + 1))
conf "client nas2 target extra -- sh -c 'cat > $TMP/out/extra'"
kill -HUP "$SPID"
wait_for "$TMP/slog" "reloaded $TMP/serve.conf" 10
expect 0 "a target the reload added" send nas2 --target extra -i "$TMP/a"
same "$TMP/a" "$TMP/out/extra" "the new target is whole"
echo "client nas2 target other user no-such-user-here -- cat" >>"$TMP/serve.conf"
kill -HUP "$SPID"
wait_for "$TMP/slog" "the configuration in use stays" 10
has_msg "$TMP/slog" "serve.conf:12: user no-such-user-here: no such user" "the bad line is named"
expect 0 "the file in use still serves" send nas2 --target extra -i "$TMP/c" -f
touch "$TMP/go"
wait_bounded "$ph" 60
[ "$STATUS" -eq 0 ] || { cat "$TMP/eh" >&2; fail "the transfer across reloads: exit $STATUS"; }
same "$TMP/big" "$TMP/out/held" "the transfer across two reloads is whole"
rm -f "$TMP/go" "$TMP/out/held"

# 6. a transfer that reconnects: its connection is cut twice on the way,
#    and each time the service hands the sender's return to its process
cut_proxy "$SPORT" 2 $(($(stat -c %s "$TMP/big") / 3)) reset
TO=$PPORT expect 0 "a transfer cut twice on its way to the service" \
    send nas2 --target extra -i "$TMP/big" -f --reconnect 30
same "$TMP/big" "$TMP/out/extra" "the transfer resumed through the service is whole"
has_msg "$TMP/proxy" "cut 2 at" "the proxy cut the connection twice"
[ "$(grep -c "the sender is back after" "$TMP/slog")" -ge 2 ] ||
    { cat "$TMP/slog" >&2; fail "the transfer's process did not take the sender back twice"; }
ok "the transfer's process took its sender back twice"
kill "$PPID_" 2>/dev/null

# 6b. a transfer spread over four connections: the service hands the
#     joiners to the transfer's process (their greeting names its route),
#     and again after one of them is cut
expect 0 "a transfer over four connections to the service" \
    send nas1 --target tank --streams 4 -i "$TMP/big"
same "$TMP/big" "$TMP/out/tank" "the spread transfer through the service is whole"
has_msg "$TMP/slog" "the transfer comes over 4 connections" "the service's transfer took four"
if on_linux "ss -K"; then
    n=$(grep -c "the sender is back after" "$TMP/slog")
    gen "$TMP/mid" 16000057 random   # 4 s at -R 4M: the cut comes after 1 MiB
    send laptop --target held --streams 4 -R 4M -i "$TMP/mid" 2>"$TMP/eh" & ph=$!
    wait_for "$TMP/slog" "client laptop target held: transfer from" 10
    i=0
    until [ "$(grep -c "the transfer comes over 4 connections" "$TMP/slog")" -ge 2 ]; do
        i=$((i + 1)); [ $i -gt 200 ] && { cat "$TMP/slog" >&2; fail "no second spread"; }
        sleep 0.05
    done
    touch "$TMP/go"
    wait_size "$TMP/out/held" 1048576 20
    port=$(ss -Htn state established "( dport = :$SPORT )" | awk '{print $4}' |
           grep -o '[0-9]*$' | sort -n | tail -n1)
    ss -K -tn "( sport = :$port )" >/dev/null 2>&1 || fail "ss -K"
    wait_bounded "$ph" 60
    [ "$STATUS" -eq 0 ] || { cat "$TMP/eh" "$TMP/slog" >&2; fail "the cut spread transfer: exit $STATUS"; }
    same "$TMP/mid" "$TMP/out/held" "a spread transfer cut on its way to the service is whole"
    [ "$(grep -c "the sender is back after" "$TMP/slog")" -gt "$n" ] ||
        { cat "$TMP/slog" >&2; fail "the transfer's process did not take the sender back"; }
    ok "the transfer's process took the spread sender back, and its joiners"
    rm -f "$TMP/go" "$TMP/out/held"
fi

# 7. SIGTERM mid-transfer: nothing new is taken, the running one ends whole
n=$(grep -c ': transfer from .* begins' "$TMP/slog")
send laptop --target held -i "$TMP/big" 2>"$TMP/eh" & ph=$!
begun $((n + 1))
kill -TERM "$SPID"
wait_for "$TMP/slog" "stopping: 1 transfer under way" 10
expect 5 "a sender while the service stops" send nas1 --target tank -i "$TMP/c" \
    --connect-timeout 1
touch "$TMP/go"
wait_bounded "$ph" 60
[ "$STATUS" -eq 0 ] || { cat "$TMP/eh" >&2; fail "the transfer across SIGTERM: exit $STATUS"; }
same "$TMP/big" "$TMP/out/held" "the transfer under way at SIGTERM ends whole"
wait_bounded "$SPID" 30
[ "$STATUS" -eq 0 ] || fail "the service after SIGTERM: exit $STATUS"
ok "the service stops with exit 0 once its transfer ended"
rm -f "$TMP/go" "$TMP/out/held"

# 8. a bad file is refused at the start, naming its line
conf "client nas1 target tank -- cat"
expect 2 "a target given twice" "$WEIR" --serve "$TMP/serve.conf"
has_msg "$TMP/err" "serve.conf:11: client nas1 target tank: given twice" "the line is named"
conf "client ghost target tank -- cat"
expect 2 "a client without a key" "$WEIR" --serve "$TMP/serve.conf"
has_msg "$TMP/err" "serve.conf:11: client ghost: no key of that name in" "the client is named"
conf 'client nas1 target quote -- sh -c "cat'
expect 2 "a quote not closed" "$WEIR" --serve "$TMP/serve.conf"
has_msg "$TMP/err" "serve.conf:11: a quote is not closed" "the quote is named"
MAXT=0 conf
expect 2 "max-transfers 0" "$WEIR" --serve "$TMP/serve.conf"
has_msg "$TMP/err" "max-transfers 0: not a number from 1 to 1024" "the limit is said"
expect 2 "--serve with other options" "$WEIR" --serve "$TMP/serve.conf" -o /dev/null
has_msg "$TMP/err" "--serve takes its listening address" "--serve alone is said"
cat >"$TMP/zfs.conf" <<EOF
key-file $K/clients.key
listen 127.0.0.1:0
client nas1 target fz -- zfs recv -F tank/x
EOF
timeout 5 "$WEIR" --serve "$TMP/zfs.conf" 2>"$TMP/err" &
wait_for "$TMP/err" "listening on" 10
kill %% 2>/dev/null
has_msg "$TMP/err" "zfs recv -F rolls the dataset back" "zfs recv -F is warned about"
has_msg "$TMP/err" "zfs recv without -u mounts what it receives" "zfs recv without -u too"

# 9. systemd: the socket passed (LISTEN_FDS) and readiness (NOTIFY_SOCKET)
if command -v systemd-socket-activate >/dev/null; then
    conf
    port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$PY" - "$TMP/notify" >"$TMP/notified" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(20)
print(s.recv(256).decode(), flush=True)
EOF
    npid=$!
    PIDS+=("$npid")
    wait_bounded_file() { local i=0; until [ -S "$1" ]; do i=$((i+1)); [ $i -gt 200 ] && fail "no $1"; sleep 0.05; done; }
    wait_bounded_file "$TMP/notify"
    systemd-socket-activate -E NOTIFY_SOCKET="$TMP/notify" -l "127.0.0.1:$port" \
        "$WEIR" --serve "$TMP/serve.conf" 2>"$TMP/slog" &
    SPID=$!
    PIDS+=("$SPID")
    wait_for "$TMP/slog" "Listening on" 10
    SPORT=$port
    expect 0 "a transfer through systemd's socket" send nas1 --target tank -i "$TMP/b"
    same "$TMP/b" "$TMP/out/tank" "the transfer through systemd's socket is whole"
    has_msg "$TMP/slog" "(socket from systemd)" "the service says the socket is systemd's"
    wait_bounded "$npid" 20
    has_msg "$TMP/notified" "READY=1" "the service told systemd it is ready"
    kill -TERM "$SPID"
    wait_bounded "$SPID" 30
else
    fail "systemd-socket-activate is missing (scripts/deps.sh installs systemd)"
fi

# 10. 100 transfers in a row: no descriptor, process or memory left behind
conf
serve
fds=$(ls /proc/"$SPID"/fd | wc -l)
rss=$(awk '/VmRSS/ {print $2}' /proc/"$SPID"/status)
for i in $(seq 1 100); do
    send nas1 --target tank -i "$TMP/c" || fail "transfer $i of 100"
done
same "$TMP/c" "$TMP/out/tank" "the 100th transfer is whole"
wait_for "$TMP/slog" "ended" 10
i=0
until [ "$(grep -c 'ended:' "$TMP/slog")" -ge 100 ]; do
    i=$((i + 1)); [ $i -gt 200 ] && fail "the service did not log 100 ends"; sleep 0.05
done
[ "$(ls /proc/"$SPID"/fd | wc -l)" -eq "$fds" ] ||
    fail "descriptors: $fds before, $(ls /proc/"$SPID"/fd | wc -l) after 100 transfers"
ok "no descriptor left after 100 transfers"
kids=$(pgrep -P "$SPID" | wc -l)
[ "$kids" -eq 0 ] || fail "$kids processes left after 100 transfers"
ok "no process left after 100 transfers"
rss2=$(awk '/VmRSS/ {print $2}' /proc/"$SPID"/status)
[ "$rss2" -lt $((rss + 4096)) ] || fail "the service grew from $rss to $rss2 kB over 100 transfers"
ok "the service's memory stays ($rss kB, then $rss2 kB)"
kill -TERM "$SPID"
wait_bounded "$SPID" 30
[ "$STATUS" -eq 0 ] || fail "the service: exit $STATUS"
done_testing
