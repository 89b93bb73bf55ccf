#!/bin/bash
# Purpose: weir --link-test against a weir listener prints its table (the
# test, the round trip, a row per write size with both directions alone and
# both at once, which way is which, the verdict on duplex) and the same as
# JSON lines; a keyed listener serves holders of its key, a keyless one only
# with --allow-link-test; every refusal (a keyless tester at a keyed
# listener, a listener without --allow-link-test, a wrong key, a key at a
# keyless listener, a stranger's data connection, an older listener) exits
# 5 with one line naming the listener and the cause, while the listener
# logs the peer and keeps listening; nothing reaches the listener's
# outputs, and a real sender after a test, or during one, is admitted and
# its transfer is whole.  No speed is asserted: only the shape of figures.
. "$(dirname "$0")/lib.sh"
D=0.2
KEY=$TMP/a.key
"$WEIR" -q --genkey "$KEY" --key-id alpha || fail "--genkey"
"$WEIR" -q --genkey "$TMP/b.key" --key-id bravo || fail "--genkey"
sed 's/^bravo /alpha /' "$TMP/b.key" >"$TMP/c.key"
chmod 600 "$TMP/c.key"

# ---- options: absurd values and contradictions are refused before any I/O
expect 2 "--link-test without -O" "$WEIR" --link-test
has_msg "$TMP/err" "--link-test needs one -O HOST:PORT" "--link-test without -O: says why"
expect 2 "--link-test with two -O" "$WEIR" --link-test -O 127.0.0.1:9 -O 127.0.0.1:10
expect 2 "--link-test with -i" "$WEIR" --link-test -O 127.0.0.1:9 -i /dev/null
expect 2 "--link-test with -z" "$WEIR" --link-test -O 127.0.0.1:9 -z
expect 2 "--link-test with -m" "$WEIR" --link-test -O 127.0.0.1:9 -m 1M
expect 2 "--duration 0" "$WEIR" --link-test -O 127.0.0.1:9 --duration 0
has_msg "$TMP/err" "is not a number of seconds from 0.05 to 60" "--duration 0: says the range"
expect 2 "--duration 61" "$WEIR" --link-test -O 127.0.0.1:9 --duration 61
expect 2 "--duration nan" "$WEIR" --link-test -O 127.0.0.1:9 --duration nan
expect 2 "--parallel 0" "$WEIR" --link-test -O 127.0.0.1:9 --parallel 0
expect 2 "--parallel 17" "$WEIR" --link-test -O 127.0.0.1:9 --parallel 17
expect 2 "--sweep with a word" "$WEIR" --link-test -O 127.0.0.1:9 --sweep 1k,banana
expect 2 "--sweep 8M" "$WEIR" --link-test -O 127.0.0.1:9 --sweep 8M
expect 2 "--sweep of 17 sizes" "$WEIR" --link-test -O 127.0.0.1:9 \
    --sweep 1k,2k,3k,4k,5k,6k,7k,8k,9k,10k,11k,12k,13k,14k,15k,16k,17k
expect 2 "--duration without --link-test" "$WEIR" --duration 1 -o /dev/null
expect 2 "--parallel without --link-test" "$WEIR" --parallel 2 -o /dev/null
expect 2 "--allow-link-test without -I" "$WEIR" --allow-link-test -o /dev/null
expect 2 "--allow-link-test with --raw" "$WEIR" -I 0 --raw --allow-link-test

# tester STATUS LABEL FILE ARGS...: weir ARGS with its standard output in
# FILE (stderr in $TMP/err); its exit status must be STATUS
tester() {
    local want=$1 label=$2 out=$3
    shift 3
    "$WEIR" "$@" >"$out" 2>"$TMP/err"
    local got=$?
    [ "$got" -eq "$want" ] || { cat "$TMP/err" >&2; fail "$label: exit $got, want $want"; }
    ok "$label (exit $want)"
}

# table_shape FILE ROWS PARALLEL LABEL: the table's lines, in order
table_shape() {
    local f=$1 rows=$2 par=$3 label=$4 conn
    conn="$par connection"; [ "$par" -eq 1 ] || conn="${conn}s"
    sed -n 1p "$f" | grep -q "^link test to 127.0.0.1:$LPORT (127.0.0.1:$LPORT): $conn each way, $D s a measurement, " \
        || { cat "$f" >&2; fail "$label: the first line"; }
    sed -n 2p "$f" | grep -qE '^round trip: [0-9]+\.[0-9]{3} ms \(median of 20; [0-9.]+ to [0-9.]+ ms\)$' \
        || { cat "$f" >&2; fail "$label: the round trip"; }
    sed -n 3p "$f" | grep -qE '^ *write size +out +in +both: out +both: in +both: total$' \
        || { cat "$f" >&2; fail "$label: the columns"; }
    # a row: a size (two words) and five rates (two words each: "1.25 GiB/s")
    awk -v n="$rows" 'NR > 3 && NR <= 3 + n {
            if (NF != 12 || $2 !~ /^(B|KiB|MiB)$/) exit 1
            for (i = 3; i <= 11; i += 2) if ($i !~ /^[0-9.]+$/ || $(i + 1) !~ /^(B|KiB|MiB|GiB|TiB)\/s$/) exit 1
        }' "$f" || { cat "$f" >&2; fail "$label: a row"; }
    sed -n "$((rows + 4))p" "$f" | grep -q "^out: from this host to 127.0.0.1:$LPORT; in: from it to this host" \
        || { cat "$f" >&2; fail "$label: which way is which"; }
    sed -n "$((rows + 5))p" "$f" | grep -qE '^duplex: both ways at once carried .* times what the faster way carries alone .*(full duplex|half duplex)' \
        || { cat "$f" >&2; fail "$label: the duplex line"; }
    [ "$(wc -l <"$f")" -eq $((rows + 5)) ] || { cat "$f" >&2; fail "$label: $(wc -l <"$f") lines"; }
    ok "$label: the table has its lines, $rows rows of five figures each"
}

# untouched LABEL: the listener's outputs got nothing, and it still listens
untouched() {
    kill -0 "$LPID" 2>/dev/null || { cat "$TMP/lerr" >&2; fail "$1: the listener stopped"; }
    [ -s "$TMP/stdout" ] && fail "$1: something reached the listener's standard output"
    [ -s "$TMP/ofile" ] && fail "$1: something reached the listener's -o file"
    [ -s "$TMP/consumed" ] && fail "$1: something reached the listener's consumer"
    ok "$1: the listener's outputs got nothing, and it still listens"
}

# ---- a keyless listener that allows tests; an -o file and a consumer as outputs
: >"$TMP/consumed"
listen "$TMP/stdout" "$TMP/lerr" --allow-link-test -o "$TMP/ofile" -- sh -c "cat >'$TMP/consumed'"
tester 0 "a link test, the short sweep" "$TMP/table" --link-test -O "127.0.0.1:$LPORT" --duration "$D"
table_shape "$TMP/table" 3 1 "the short sweep"
for s in "1 KiB" "64 KiB" "1 MiB"; do
    grep -qE "^ +$s " "$TMP/table" || fail "the short sweep: no row for $s"
done
ok "the short sweep: 1 KiB, 64 KiB and 1 MiB"
grep -q "no key$" "$TMP/table" || fail "the table does not say there was no key"
ok "the table says there was no key"
wait_for "$TMP/lerr" "done (9 measurements); still listening" 10
has_msg "$TMP/lerr" "link test from 127.0.0.1:" "the listener logs the tester's address"
untouched "after a test"

tester 0 "--parallel 3 and a sweep of its own" "$TMP/table" -q --link-test -O "127.0.0.1:$LPORT" \
    --duration "$D" --parallel 3 --sweep 1k,12345,4M
table_shape "$TMP/table" 3 3 "--parallel 3"
grep -qE '^ +12345 B ' "$TMP/table" || fail "a size that is no multiple of 1 KiB is in bytes"
grep -qE '^ +4 MiB ' "$TMP/table" || fail "no row for 4 MiB"
ok "--sweep: the sizes given, in order"

D=0.05
tester 0 "--sweep full" "$TMP/table" -q --link-test -O "127.0.0.1:$LPORT" --duration "$D" --sweep full
table_shape "$TMP/table" 11 1 "--sweep full"
awk 'NR > 3 && NR <= 14 { print $1 " " $2 }' "$TMP/table" | tr '\n' ',' >"$TMP/sizes"
[ "$(cat "$TMP/sizes")" = "1 KiB,2 KiB,4 KiB,8 KiB,16 KiB,32 KiB,64 KiB,128 KiB,256 KiB,512 KiB,1 MiB," ] \
    || fail "--sweep full: sizes $(cat "$TMP/sizes")"
ok "--sweep full: every power of two from 1 KiB to 1 MiB"
D=0.2

# ---- the JSON form: one object a line, the same figures
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || fail "python3 is not installed"
tester 0 "--progress=json" "$TMP/table" -q --link-test -O "127.0.0.1:$LPORT" --duration "$D" \
    --sweep 1k,64k --parallel 2 --progress=json="$TMP/lt.json"
"$PY" - "$TMP/lt.json" "$LPORT" <<'EOF' || fail "the JSON lines"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ev = [l["event"] for l in lines]
assert ev[0] == "link-start" and ev[1] == "link-rtt" and ev[-1] == "link-end", ev
assert ev.count("link-figure") == 8, ev
for l in lines:
    assert l["schema"] == 1 and isinstance(l["time"], float)
start = lines[0]
assert start["listener"] == "127.0.0.1:" + sys.argv[2] and start["parallel"] == 2
assert start["sizes"] == [1024, 65536] and start["duration"] == 0.2, start
rtt = lines[1]["rtt"]
assert rtt["pings"] == 20 and 0 < rtt["min"] <= rtt["median"] <= rtt["max"], rtt
ways = ["out", "in", "both_out", "both_in"]
figs = [l for l in lines if l["event"] == "link-figure"]
assert [(f["size"], f["direction"]) for f in figs] == \
    [(s, w) for s in (1024, 65536) for w in ways], figs
end = lines[-1]
assert end["status"] == 0 and end["ok"] is True and end["message"] is None, end
assert end["key"] is None and end["parallel"] == 2 and end["loopback"] is True
assert end["rtt"] == rtt
assert [r["size"] for r in end["rows"]] == [1024, 65536]
for r, size in zip(end["rows"], (1024, 65536)):
    for w in ways:
        f = r[w]
        assert f["bytes"] > 0 and f["seconds"] > 0 and isinstance(f["rate"], int), f
        assert f["cpu_here"] >= 0 and f["cpu_there"] >= 0, f
        fig = [g for g in figs if g["size"] == size and g["direction"] == w][0]
        assert fig["figure"] == f, (fig, f)
    assert abs(r["both_total"] - r["both_out"]["rate"] - r["both_in"]["rate"]) <= 1, r
assert end["duplex"] in ("full", "half") and end["duplex_size"] in (1024, 65536), end
assert isinstance(end["duplex_ratio"], float) and isinstance(end["cpu_bound"], bool)
assert end["verdict"].startswith("both ways at once carried"), end
EOF
ok "--progress=json: start, round trip, each figure, and the end with the whole table"
table_shape "$TMP/table" 2 2 "the table beside the JSON lines"
tester 0 "JSON lines on standard output" "$TMP/json1" -q --link-test -O "127.0.0.1:$LPORT" \
    --duration "$D" --sweep 1k --progress=json=1
grep -q '"event":"link-end"' "$TMP/json1" || fail "no end line on standard output"
grep -q "^round trip" "$TMP/json1" && fail "the table went where the JSON lines go"
ok "the JSON lines on standard output take the table's place"
untouched "after four tests"

# ---- a stranger cannot join the data connections
{ "$TESTTOOL" greet 1 1 T; "$TESTTOOL" join O 0 12345; } | nc -N 127.0.0.1 "$LPORT" >/dev/null 2>&1
wait_for "$TMP/lerr" "a data connection of a link test, and none is under way" 10
ok "a data connection with no test under way is refused and logged"
# a request altered on the way is refused as that, not as no request
{ "$TESTTOOL" greet 1 1 T; "$TESTTOOL" hello 1 200000 1024 1 |
    python3 -c 'import sys; b = bytearray(sys.stdin.buffer.read()); b[20] ^= 1; sys.stdout.buffer.write(b)'; } |
    nc -N 127.0.0.1 "$LPORT" >/dev/null 2>&1
wait_for "$TMP/lerr" "after a link tester's greeting: corrupt weir record (checksum mismatch)" 10
ok "a tester's request with a bit flipped is refused as corrupt"
bg "$WEIR" -q --link-test -O "127.0.0.1:$LPORT" --duration 1 --sweep 1k
TPID=$BPID
wait_for "$TMP/lerr" "serving it (1 connection each way, 1 s" 10
{ "$TESTTOOL" greet 1 1 T; "$TESTTOOL" join I 0 12345; } | nc -N 127.0.0.1 "$LPORT" >/dev/null 2>&1
wait_for "$TMP/lerr" "a data connection of another link test" 10
ok "a data connection naming another test is refused and logged"
expect 5 "a second tester while a test runs" "$WEIR" -q --link-test -O "127.0.0.1:$LPORT" \
    --duration "$D"
has_msg "$TMP/err" "link test to 127.0.0.1:$LPORT: refused: busy: another link test is under way" \
    "the second tester is told the listener is busy"
grep -q "refused: busy: .*127\.0\.0\.1" "$TMP/err" && fail "the second tester was told who tests"
ok "the second tester is not told who tests"
has_msg "$TMP/lerr" "refused a link test from 127.0.0.1:" "the listener logs the busy refusal"
wait_bounded "$TPID" 30
[ "$STATUS" -eq 0 ] || fail "the test a stranger tried to join: exit $STATUS"
ok "the test a stranger tried to join went on"

# ---- SIGINT stops a tester: 130, and the listener goes on
bg "$WEIR" -q --link-test -O "127.0.0.1:$LPORT" --duration 2 --sweep 1k
TPID=$BPID
wait_for "$TMP/lerr" "serving it (1 connection each way, 2 s" 10
kill -INT "$TPID"
wait_bounded "$TPID" 10
[ "$STATUS" -eq 130 ] || fail "an interrupted tester: exit $STATUS"
ok "an interrupted tester exits 130"
wait_for "$TMP/lerr" "the tester gave up: " 10
has_msg "$TMP/lerr" "interrupted by SIGINT" "the listener logs why the tester gave up"
untouched "after an interrupted test"

# ---- a tester that asks for a test and then says nothing is dropped in 10 s
{ "$TESTTOOL" greet 1 1 T; "$TESTTOOL" hello 1 200000 1024 1; sleep 15; } \
    | nc -N 127.0.0.1 "$LPORT" >/dev/null 2>&1 &
PIDS+=($!)
wait_for "$TMP/lerr" "its data connections did not all join within 10 s (0 of 2); still listening" 15
ok "a tester whose data connections never come is dropped within 10 s"
untouched "after a silent tester"

# ---- after the tests, the real sender is admitted and its transfer is whole
gen "$TMP/in" 3000001 mixed
expect 0 "a transfer after the tests" "$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || { cat "$TMP/lerr" >&2; fail "the listener: exit $STATUS"; }
same "$TMP/in" "$TMP/ofile" "the -o file holds the transfer, and only it"
same "$TMP/in" "$TMP/consumed" "the consumer got the transfer, and only it"

# ---- a sender that comes during a test is admitted; the test stops
listen "$TMP/stdout" "$TMP/lerr" --allow-link-test
bg "$WEIR" --link-test -O "127.0.0.1:$LPORT" --duration 2
TPID=$BPID
wait_for "$TMP/lerr" "serving it" 10
expect 0 "a transfer during a test" "$WEIR" -q -i "$TMP/in" -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || { cat "$TMP/lerr" >&2; fail "the listener: exit $STATUS"; }
same "$TMP/in" "$TMP/stdout" "the transfer during a test is whole"
has_msg "$TMP/lerr" "stopped: the listener admitted its transfer" "the listener logs that the test stopped"
wait_bounded "$TPID" 10
[ "$STATUS" -eq 5 ] || fail "the tester whose test stopped: exit $STATUS"
ok "the tester whose test the transfer stopped exits 5"

# ---- refusals: exit 5, one line naming the listener and why; the listener
# logs the peer and goes on listening with nothing written
refused() {   # refused LABEL TESTER-MESSAGE LISTENER-MESSAGE TESTER-ARGS...
    local label=$1 tmsg=$2 lmsg=$3
    shift 3
    expect 5 "$label" "$WEIR" -q --link-test -O "127.0.0.1:$LPORT" --duration "$D" "$@"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || { cat "$TMP/err" >&2; fail "$label: not one line"; }
    has_msg "$TMP/err" "weir: link test to 127.0.0.1:$LPORT: " "$label: the tester names the listener"
    has_msg "$TMP/err" "$tmsg" "$label: the tester says why"
    wait_for "$TMP/lerr" "$lmsg" 10
    grep -F -- "$lmsg" "$TMP/lerr" | grep -q "from 127.0.0.1:" || fail "$label: no peer address"
    ok "$label: the listener logs it with the peer's address"
    untouched "$label"
}
: >"$TMP/ofile"
: >"$TMP/consumed"
listen "$TMP/stdout" "$TMP/lerr" --key-file "$KEY" -o "$TMP/ofile" -f
tester 0 "a test with the listener's key" "$TMP/table" --link-test -O "127.0.0.1:$LPORT" \
    --key-file "$KEY" --duration "$D" --sweep 1k
table_shape "$TMP/table" 1 1 "a keyed test"
grep -q "the key 'alpha'$" "$TMP/table" || fail "the table does not name the key"
ok "the table names the key"
has_msg "$TMP/lerr" "the key 'alpha'" "the listener logs the tester's key"
secret=$(cut -d' ' -f2 "$KEY")
grep -qF "$secret" "$TMP/lerr" "$TMP/err" "$TMP/table" && fail "a key appeared in a message"
ok "no key appears in any message"
refused "a keyless tester at a keyed listener" "refused: a link tester without a key" \
    "a link tester without a key: this listener serves link tests only to holders of its key"
refused "a key the listener does not have" "the keys do not match" \
    "the sender's key 'bravo' is not in the key file" --key-file "$TMP/b.key"
refused "the right name with a wrong key" "the keys do not match" "keys do not match" \
    --key-file "$TMP/c.key"
# a stranger's data connection at a keyed listener: the log says why, the
# stranger hears only that it is not taken
{ "$TESTTOOL" greet 1 1 T; "$TESTTOOL" join O 0 12345; } | nc -N 127.0.0.1 "$LPORT" \
    >"$TMP/told" 2>/dev/null
wait_for "$TMP/lerr" "a data connection of a link test, and none is under way" 10
grep -qa "a data connection this listener does not take" "$TMP/told" ||
    fail "a stranger's join at a keyed listener was not refused: $(od -c "$TMP/told" | head)"
grep -qa "none is under way" "$TMP/told" && fail "a stranger learnt whether a test runs"
ok "a keyed listener tells a stranger's join only that it is not taken"
gen "$TMP/in" 1000003 mixed
expect 0 "a keyed transfer after the refusals" "$WEIR" -q --key-file "$KEY" -i "$TMP/in" \
    -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || { cat "$TMP/lerr" >&2; fail "the keyed listener: exit $STATUS"; }
same "$TMP/in" "$TMP/ofile" "the keyed transfer after a test and refusals"

: >"$TMP/ofile"
listen "$TMP/stdout" "$TMP/lerr" -o "$TMP/ofile" -f
refused "a keyless listener without --allow-link-test" \
    "refused: a link tester: this listener does not serve link tests (start it with --allow-link-test" \
    "this listener does not serve link tests"
refused "a tester with a key at a keyless listener" "refused: a link tester with a key: this listener has none" \
    "a link tester with a key: this listener has none" --key-file "$KEY"
kill "$LPID"

# ---- a listener older than link tests refuses the greeting; the tester says what that means
P=$("$TESTTOOL" freeport)
{ "$TESTTOOL" greet 1 1 R; sleep 1; "$TESTTOOL" status 5 0 "it did not greet as a weir sender"; sleep 1; } \
    | nc -l 127.0.0.1 "$P" >/dev/null 2>&1 &
PIDS+=($!)
"$TESTTOOL" waitlisten "$P" 5 || fail "the old listener's stand-in did not listen"
expect 5 "an older listener" "$WEIR" -q --link-test -O "127.0.0.1:$P" --duration "$D"
has_msg "$TMP/err" "link test to 127.0.0.1:$P: refused: it did not greet as a weir sender (the listener does not offer link tests: a weir older than them?)" \
    "an older listener: the tester says what its refusal means"
# ---- a tester interrupted before the welcome reaches it still tells the
# listener why: a listener serves from the hello on, and logs what it hears
P=$("$TESTTOOL" freeport)
{ "$TESTTOOL" greet 1 1 R; sleep 8; } | nc -l 127.0.0.1 "$P" >"$TMP/heard" 2>/dev/null &
PIDS+=($!)
"$TESTTOOL" waitlisten "$P" 5 || fail "the slow listener's stand-in did not listen"
bg "$WEIR" -q --link-test -O "127.0.0.1:$P" --duration "$D"
TPID=$BPID
wait_size "$TMP/heard" 95 10   # its greeting (32 bytes) and hello (64)
kill -INT "$TPID"
wait_bounded "$TPID" 10
[ "$STATUS" -eq 130 ] || fail "a tester interrupted while awaiting the welcome: exit $STATUS"
wait_for "$TMP/heard" "interrupted by SIGINT" 10
ok "a tester interrupted while awaiting the welcome tells the listener why"
done_testing
