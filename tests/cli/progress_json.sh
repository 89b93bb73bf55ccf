#!/bin/bash
# Purpose: --progress=json writes one JSON object a line: a start line, a
# line every --interval, and an end line whose status, message and summary
# agree with weir's exit status and its human summary, also when weir fails;
# counters and time never go back; names are escaped; a descriptor that is
# not open is a usage error; a target that fails warns and the transfer goes
# on; on standard error the lines take the place of the status line.
. "$(dirname "$0")/lib.sh"
# the system's python3 first: a version manager's shim takes seconds a start
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || fail "python3 is not installed"
command -v script >/dev/null || fail "script(1) is not installed (util-linux)"

# The checker: every line of FILE (those starting with '{' when the lines
# share standard error with messages) parses; the first is a start line, the
# last an end line with status STATUS; counters never go back and time never
# does; each output's bytes and wire too.  Extra checks are python
# expressions over `lines` (the objects) and `end` (the last), each one
# argument.
cat >"$TMP/check.py" <<'EOF'
import json, sys

def human(n):
    """the summary's way of writing a byte count (report.c, stats_bytes)"""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    v, u = float(n), 0
    while v >= 1024 and u < 5:
        v /= 1024
        u += 1
    if u == 0:
        return "%d B" % n
    return "%.*f %s" % (2 if v < 10 else 1 if v < 100 else 0, v, units[u])

path, status, only_objects = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "mixed"
raw = open(path, "rb").read()
assert raw.endswith(b"\n"), "the last line is not whole"
lines = []
for n, text in enumerate(raw.split(b"\n")[:-1], 1):
    if only_objects and not text.startswith(b"{"):
        continue
    try:
        lines.append(json.loads(text))
    except ValueError as e:
        sys.exit("line %d does not parse (%s): %r" % (n, e, text[:200]))
assert lines, "no line"
end = lines[-1]
assert lines[0]["event"] == "start", "the first event is %r" % lines[0]["event"]
assert end["event"] == "end", "the last event is %r" % end["event"]
assert [l["event"] for l in lines[1:-1]] == ["progress"] * (len(lines) - 2), "events in between"
for l in lines:
    assert l["schema"] == 1, "schema %r" % l["schema"]
    for k in ("time", "elapsed", "in", "out", "data", "wire", "buffer", "buffer_capacity",
              "in_rate", "out_rate", "in_rate_avg", "out_rate_avg", "buffer_percent"):
        assert isinstance(l[k], (int, float)) and l[k] >= 0, "%s is %r" % (k, l[k])
    for k in ("in", "out", "data", "holes", "wire", "buffer", "in_rate", "out_rate"):
        assert isinstance(l[k], int), "%s is not an integer: %r" % (k, l[k])
    assert l["holes"] <= l["data"], "more holes than data"

    assert "eta" in l and "phase" in l and "outputs" in l and "size" in l
counters = ("time", "elapsed", "in", "out", "data", "holes", "wire")
for a, b in zip(lines, lines[1:]):
    for k in counters:
        assert b[k] >= a[k], "%s went back: %r then %r" % (k, a[k], b[k])
    if a["encoded"] is not None and b["encoded"] is not None:
        assert b["encoded"] >= a["encoded"], "encoded went back"
    assert len(a["outputs"]) == len(b["outputs"]), "outputs came or went"
    for oa, ob in zip(a["outputs"], b["outputs"]):
        assert oa["name"] == ob["name"], "an output changed its name"
        for k in ("bytes", "wire", "holes"):
            assert ob[k] >= oa[k], "output %s: %s went back" % (oa["name"], k)
assert end["phase"] == "done", "the end's phase is %r" % end["phase"]
assert end["status"] == status, "the end says status %r, weir exited %d" % (end["status"], status)
assert end["ok"] is (status == 0), "ok is %r with status %d" % (end["ok"], status)
if status == 0:
    assert end["message"] is None, "a message on success: %r" % end["message"]
else:
    assert isinstance(end["message"], str) and end["message"], "no message on failure"
s = end["summary"]
assert s["bytes"] == end["data"], "summary bytes %r, data %r" % (s["bytes"], end["data"])
holes = ", of which %s holes," % human(s["holes"]) if s["holes"] else ""
assert s["line"].startswith("summary: " + ("" if status == 0 else "INCOMPLETE: ")
                            + human(s["bytes"]) + holes + " in "), "summary line %r" % s["line"]
if s["encoded"] is not None:
    assert "; wire " + human(s["encoded"]) + "," in s["line"], "wire in %r" % s["line"]
for expr in sys.argv[4:]:
    assert eval(expr), "not so: " + expr
print("%d lines" % len(lines))
EOF
# jcheck LABEL FILE STATUS [mixed|plain] [PYTHON-EXPR...]
jcheck() {
    local label=$1 file=$2 status=$3 mode=${4:-plain}
    shift 4 2>/dev/null || shift $#
    local why
    why=$("$PY" "$TMP/check.py" "$file" "$status" "$mode" "$@" 2>&1) ||
        { echo "--- $file:" >&2; head -c 3000 "$file" >&2; fail "$label: $why"; }
    ok "$label: $why parse, start to end, nothing goes back"
}
# summary_agrees LABEL JSONFILE STDERRFILE: the end line's summary is the
# human one that weir printed
summary_agrees() {
    local human json
    human=$(grep '^summary: ' "$3") || fail "$1: no human summary in $3"
    json=$("$PY" -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]["summary"]["line"])' "$2")
    [ "$human" = "$json" ] || fail "$1: the summaries differ: '$human' and '$json'"
    ok "$1: the end line's summary is the one printed"
}

gen "$TMP/in" 3145728 mixed
cd "$TMP" || fail "cd $TMP"

# a plain copy: every figure agrees with the summary weir prints
expect 0 "copy with --progress=json=3" bash -c \
    '"$0" -i "$1" -o "$2" --progress=json=3 3>"$3"' "$WEIR" in out p1.jsonl
same in out "the copy is whole"
jcheck "copy" p1.jsonl 0 plain 'end["data"] == end["in"] == end["out"] == 3145728' \
    'end["outputs"] == [{"name": "output out", "kind": "file", "bytes": 3145728, "wire": 0, "holes": 0, "reconnections": 0, "state": "done"}]' \
    'end["size"] == 3145728 and end["percent"] == 100 and end["eta"] == 0' \
    'end["wire"] == 0 and end["encoded"] is None' 'lines[0]["eta"] is None'
summary_agrees "copy" p1.jsonl "$TMP/err"

# a sparse file: the holes are counted apart, and the percent reaches 100
truncate -s 8M sparse
head -c 1048576 in | dd of=sparse bs=1M seek=3 conv=notrunc status=none
expect 0 "a sparse copy with --progress" bash -c \
    '"$0" -i "$1" -o "$2" --progress=json=3 3>"$3"' "$WEIR" sparse sparse.out p0.jsonl
jcheck "sparse" p0.jsonl 0 plain 'end["data"] == 8388608 and end["holes"] == 7340032' \
    'end["in"] == end["out"] == 1048576' 'end["outputs"][0]["holes"] == 7340032' \
    'end["summary"]["holes"] == 7340032 and end["percent"] == 100'
summary_agrees "sparse" p0.jsonl "$TMP/err"

# -z: the encoded stream's size is the summary's wire figure
expect 0 "-z with --progress" bash -c \
    '"$0" -z -T 2 -i "$1" -o "$2" -f --progress=json=3 3>"$3"' "$WEIR" in out.lz4 p2.jsonl
jcheck "-z" p2.jsonl 0 plain 'end["encoded"] == end["summary"]["encoded"] > 0' \
    'end["data"] == 3145728' 'end["outputs"][0]["bytes"] == end["encoded"]'
summary_agrees "-z" p2.jsonl "$TMP/err"

# a rate-limited transfer: several lines, each with an ETA once data moves,
# from the input file's size or from --size
expect 0 "-R 2M of 3 MiB from a file, --interval 0.2" bash -c \
    '"$0" -q -R 2M -i "$1" -o /dev/null --progress=json=3 --interval 0.2 3>"$2"' \
    "$WEIR" in p3.jsonl
jcheck "-R 2M from a file" p3.jsonl 0 plain \
    'len([l for l in lines if l["event"] == "progress"]) >= 3' \
    'all(l["size"] == 3145728 for l in lines)' \
    'all(l["eta"] is not None and l["eta"] >= 0 for l in lines[1:])' \
    'any(l["eta"] > 0 and 0 < l["percent"] < 100 for l in lines[1:-1])' \
    'any(l["out_rate"] > 0 for l in lines[1:-1])' \
    'all(l["phase"] in ("waiting", "transferring", "draining", "done") for l in lines)'
expect 0 "-R 2M of 3 MiB from a pipe with --size" bash -c \
    'cat "$1" | "$0" -q -R 2M --size 3M -o /dev/null --progress=json=3 --interval 0.2 3>"$2"' \
    "$WEIR" in p4.jsonl
jcheck "-R 2M with --size" p4.jsonl 0 plain \
    'len([l for l in lines if l["event"] == "progress"]) >= 3' \
    'any(l["eta"] is not None and l["eta"] > 0 for l in lines[1:-1])' \
    'all(l["size"] == 3145728 for l in lines)'
expect 0 "-d -R 2M of a file, --interval 0.2" bash -c \
    '"$0" -q -d -R 2M -i "$1" -o /dev/null --progress=json=3 --interval 0.2 3>"$2"' \
    "$WEIR" out.lz4 p6.jsonl
jcheck "-d -R 2M from a file" p6.jsonl 0 plain 'end["encoded"] == end["in"] == end["size"]' \
    'end["data"] == 3145728' 'any(0 < l["percent"] < 100 and l["eta"] > 0 for l in lines[1:-1])'
expect 0 "a pipe without --size" bash -c \
    'cat "$1" | "$0" -q -o /dev/null --progress=json=3 3>"$2"' "$WEIR" in p5.jsonl
jcheck "no size known" p5.jsonl 0 plain 'all(l["eta"] is None and l["size"] is None for l in lines)'

# failures: the file is complete, with the status and the message
expect 4 "-o /dev/full" bash -c '"$0" -i "$1" -o /dev/full --progress=json=3 3>"$2"' \
    "$WEIR" in f1.jsonl
jcheck "an output that fails" f1.jsonl 4 plain \
    '"output /dev/full: write: No space left on device" == end["message"]' \
    'end["outputs"][0]["state"] == "failed" and end["outputs"][0]["bytes"] == 0' \
    'end["summary"]["verdict"] is None'
summary_agrees "an output that fails" f1.jsonl "$TMP/err"
expect 4 "-o /dev/full beside a file" bash -c \
    '"$0" -q -i "$1" -o /dev/full -o "$2" -f --progress=json=3 3>"$3"' "$WEIR" in out f2.jsonl
jcheck "one of two outputs fails" f2.jsonl 4 plain \
    '[o["state"] for o in end["outputs"]] == ["failed", "done"]' 'end["out"] == 3145728'
expect 5 "a connection refused" bash -c \
    '"$0" -q -i "$1" -O 127.0.0.1:1 --connect-timeout 0 --progress=json=3 3>"$2"' \
    "$WEIR" in f3.jsonl
jcheck "a connection refused" f3.jsonl 5 plain '"Connection refused" in end["message"]' \
    'lines[0]["phase"] == "connecting"' 'end["outputs"][0]["kind"] == "connection"' \
    'end["outputs"][0]["state"] == "failed"'
expect 3 "an input that cannot be opened" bash -c \
    '"$0" -q -i missing -o /dev/null --progress=json=3 3>"$1"' "$WEIR" f4.jsonl
jcheck "a start that fails" f4.jsonl 3 plain 'len(lines) == 2' \
    '"input missing: open: No such file or directory" == end["message"]'

# a failed decode claims neither 100% nor an ETA: one whose content
# checksum is wrong (all its blocks were decoded and written), one cut short
cp out.lz4 badsum.lz4
len=$(stat -c %s badsum.lz4)
byte=$(od -An -tu1 -j $((len - 1)) -N 1 badsum.lz4)
printf "$(printf '\\%03o' $(( (byte ^ 1) & 255 )))" |
    dd of=badsum.lz4 bs=1 seek=$((len - 1)) conv=notrunc status=none
expect 6 "-d of a file whose content checksum is wrong" bash -c \
    '"$0" -q -d -i "$1" -o /dev/null --progress=json=3 3>"$2"' "$WEIR" badsum.lz4 f5.jsonl
jcheck "a decode that fails at the end" f5.jsonl 6 plain \
    '"content checksum mismatch" in end["message"]' \
    'end["percent"] is None or end["percent"] < 100' 'end["eta"] is None' \
    'end["size"] == end["in"]'
head -c $((len / 2)) out.lz4 >cut.lz4
expect 6 "-d of a file cut in half" bash -c \
    '"$0" -q -d -i "$1" -o /dev/null --progress=json=3 3>"$2"' "$WEIR" cut.lz4 f6.jsonl
jcheck "a decode of a cut file" f6.jsonl 6 plain '"truncated LZ4 data" in end["message"]' \
    'end["percent"] is None or end["percent"] < 100' 'end["eta"] is None'
expect 4 "-o /dev/full of a file" bash -c \
    '"$0" -q -i "$1" -o /dev/full --progress=json=3 3>"$2"' "$WEIR" in f7.jsonl
jcheck "an output that fails at once" f7.jsonl 4 plain 'end["percent"] == 0' \
    'end["eta"] is None'

# a TCP transfer: the sender connects, the receiver waits; both count the
# same bytes on the wire
listen "$TMP/rx.out" "$TMP/rx.err" -q --progress=json="$TMP/rx.jsonl" --interval 0.2
expect 0 "send -R 4M over TCP" "$WEIR" -q -R 4M -i in -O "127.0.0.1:$LPORT" \
    --progress=json=tx.jsonl --interval 0.2
wait_bounded "$LPID" 20
[ "$STATUS" -eq 0 ] || { cat "$TMP/rx.err"; fail "the receiver exited $STATUS"; }
same in rx.out "the receiver wrote everything"
jcheck "receiver" rx.jsonl 0 plain 'lines[0]["phase"] == "waiting"' \
    'end["data"] == 3145728 and end["wire"] > end["data"]'
jcheck "sender" tx.jsonl 0 plain 'lines[0]["phase"] == "connecting"' \
    'lines[0]["outputs"][0]["state"] == "connecting"' \
    'end["outputs"][0]["wire"] == end["wire"] > 3145728' \
    'any(l["phase"] == "draining" for l in lines)' \
    'end["outputs"][0]["streams"] == 1 and len(end["outputs"][0]["connections"]) == 1' \
    'all(set(c) == {"rtt_ms", "cwnd", "retrans", "delivery_rate"} for l in lines for o in l["outputs"] for c in o["connections"])'
"$PY" - rx.jsonl tx.jsonl <<'EOF' || fail "the two ends count different wire bytes"
import json, sys
rx, tx = ([json.loads(l) for l in open(f)][-1] for f in sys.argv[1:])
assert rx["wire"] == tx["wire"], (rx["wire"], tx["wire"])
EOF
ok "both ends count the same bytes on the wire"
# the path as the system sees it: Linux's TCP_INFO gives every figure (a
# round trip and a window on loopback; a count of segments sent again,
# which on loopback is small but not always 0: a receiver slowed by a
# sanitizer lets a tail-loss probe fire); the portable build on Linux
# knows no way to ask, and says null rather than guess
"$PY" - tx.jsonl "${WEIR_PLATFORM:-linux}" <<'EOF' || fail "the connection's path is not as the system says"
import json, sys
c = [json.loads(l) for l in open(sys.argv[1])][-1]["outputs"][0]["connections"][0]
if sys.argv[2] == "linux":
    assert c["rtt_ms"] > 0 and c["cwnd"] > 0, c
    assert isinstance(c["retrans"], int) and 0 <= c["retrans"] < 64, c
    assert c["delivery_rate"] is None or c["delivery_rate"] > 0, c
else:
    assert c == {"rtt_ms": None, "cwnd": None, "retrans": None, "delivery_rate": None}, c
EOF
ok "the connection's round trip, window and retransmissions are reported"

# the target: a descriptor that is not open, ./3, a file that is an input
expect 2 "--progress=json=3 with 3 closed" "$WEIR" -i in -o /dev/null --progress=json=3 3>&-
has_msg "$TMP/err" "--progress=json=3: descriptor 3 is not open" "the closed descriptor is named"
expect 2 "--progress=json=0 read-only" bash -c \
    '"$0" -i in -o /dev/null --progress=json=0 </dev/null' "$WEIR"
has_msg "$TMP/err" "descriptor 0 is not open for writing" "a read-only descriptor is named"
rm -f 3
expect 0 "--progress=json=./3" "$WEIR" -q -i in -o /dev/null --progress=json=./3
[ -f 3 ] || fail "./3 did not create a file named 3"
jcheck "./3 is a file" 3 0
echo "old content that is longer than nothing" >old.jsonl
expect 0 "an existing file is truncated" "$WEIR" -q -i in -o /dev/null --progress=json=old.jsonl
jcheck "a truncated file" old.jsonl 0
cp in in.orig
expect 2 "--progress=json=the input" "$WEIR" -q -i in -o /dev/null --progress=json=in
has_msg "$TMP/err" "are the same file" "the input as the target: says why"
same in.orig in "the input is untouched"
expect 2 "--progress=json=x -o x" "$WEIR" -q -i in -o x --progress=json=x
has_msg "$TMP/err" "are the same file" "the output as the target: says why"
[ -e x ] && fail "--progress=json=x -o x left x behind"
ok "--progress=json=x -o x leaves nothing behind"
expect 2 "--progress=json=3 3>>out -o out" bash -c \
    '"$0" -q -i "$1" -o "$2" -f --progress=json=3 3>>"$2"' "$WEIR" in out
expect 2 "--progress=json=f -l f" "$WEIR" -q -i in -o /dev/null -l logged \
    --progress=json=logged
has_msg "$TMP/err" "are the same file" "the -l file as the target: says why"
expect 2 "--progress into a missing directory" "$WEIR" -i in -o /dev/null \
    --progress=json=no/such/dir/p
has_msg "$TMP/err" "progress no/such/dir/p: open: No such file or directory" "the file is named"
for bad in "--progress=xml" "--progress=json=" "--progress=jsonx" "--interval 0 --progress=json" \
    "--interval -1 --progress=json" "--interval 1" "--progress=json=99999999999"; do
    # shellcheck disable=SC2086
    expect 2 "weir $bad" "$WEIR" -i in -o /dev/null $bad
done

# a target that fails: warned once, the transfer goes on
expect 0 "--progress=json=3 3>/dev/full" bash -c \
    '"$0" -i "$1" -o out -f --progress=json=3 --interval 0.05 -R 8M 3>/dev/full' "$WEIR" in
same in out "ENOSPC on the target: the copy is whole"
[ "$(grep -c 'progress descriptor 3: write: No space left on device' "$TMP/err")" -eq 1 ] ||
    { cat "$TMP/err"; fail "ENOSPC is not said exactly once"; }
ok "ENOSPC on the target is said once"
expect 0 "a target whose reader is gone" "$PY" -c '
import os, sys
r, w = os.pipe()
os.close(r)
os.dup2(w, 3)
os.execv(sys.argv[1], [sys.argv[1], "-i", "in", "-o", "out", "-f", "--progress=json=3"])
' "$WEIR"
same in out "EPIPE on the target: the copy is whole"
has_msg "$TMP/err" "progress descriptor 3: write: Broken pipe" "EPIPE on the target is said"

# a target that takes part of a line and no more (a pipe of one page that
# nobody reads, and lines of more than a page): the line is given up within
# the bound, and SIGTERM is handled at once
mkfifo stalled in.fifo
exec 7<>stalled 8<>in.fifo   # a reader that never reads; an input that never ends
"$PY" -c '
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NONBLOCK)
fcntl.fcntl(fd, 1031, 4096)   # F_SETPIPE_SZ: one page
' stalled || fail "cannot shrink the pipe"
long=/dev$(printf '/.%.0s' $(seq 140))/null   # /dev/./././.../null, 288 bytes
outs=()
for i in $(seq 16); do outs+=(-o "$long"); done
"$WEIR" -i in.fifo "${outs[@]}" --progress=json=3 --interval 0.05 3>stalled 2>stall.err &
pid=$!
PIDS+=("$pid")
"$PY" - stalled <<'PYEOF' || fail "the progress target never filled"
import fcntl, os, struct, sys, termios, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NONBLOCK)
end = time.time() + 10
while time.time() < end:
    queued = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
    if queued >= 4096:
        sys.exit(0)
    time.sleep(0.02)
sys.exit("the pipe holds %d bytes" % queued)
PYEOF
kill -TERM "$pid"
wait_bounded "$pid" 5
exec 7<&- 8<&-
[ "$STATUS" -eq 143 ] || { cat stall.err; fail "SIGTERM with a stalled progress target: exit $STATUS"; }
ok "SIGTERM is handled while the progress target takes nothing"
has_msg stall.err "progress descriptor 3: write: its reader took only part of a line in 1 s" \
    "a line cut short is said"
[ "$(grep -c 'progress descriptor 3' stall.err)" -eq 1 ] || { cat stall.err; fail "said more than once"; }
ok "a stalled target is said once"

# descriptor 1 is the consumer's standard output: refused
expect 2 "--progress=json=1 with a consumer" bash -c \
    '"$0" -i "$1" --progress=json=1 -- cat >/dev/null' "$WEIR" in
has_msg "$TMP/err" "--progress=json=1: standard output is the consumer's" "says why"
expect 0 "--progress=json=1 with a producer" bash -c \
    '"$0" -q -o "$1" -f --progress=json=1 -- cat "$2" >"$3"' "$WEIR" out in p7.jsonl
same in out "a producer's data is whole beside --progress=json=1"
jcheck "json=1 beside a producer" p7.jsonl 0

# names are escaped: a quote, a newline, a control character, bytes that
# are not UTF-8, and UTF-8 as it is
expect 0 "an output named with a quote and a newline" bash -c \
    '"$0" -q -i "$1" -o "$2" -o "$3" -o "$4" --progress=json=3 3>"$5"' "$WEIR" in \
    $'a"b\nc' $'d\\e\001f' $'g\xff\xc3h\xc3\xa9' e.jsonl
jcheck "escaped names" e.jsonl 0 plain \
    '[o["name"] for o in end["outputs"]] == ["output a\"b\nc", "output d\\e\x01f", "output g\xff\xc3h\xe9"]'
grep -qF '"output a\"b\nc"' e.jsonl && grep -qF '"output d\\e\u0001f"' e.jsonl &&
    grep -qF "\"output g\\u00ff\\u00c3h$(printf '\xc3\xa9')\"" e.jsonl ||
    { cat e.jsonl; fail "the names are not escaped as documented"; }
ok "quotes, backslashes and controls are escaped, bad bytes are \\u00XX, UTF-8 is kept"

# standard error: only while the status line is off
expect 0 "--progress=json to stderr, not a terminal" "$WEIR" -i in -o /dev/null \
    --progress=json
jcheck "lines on standard error among messages" "$TMP/err" 0 mixed
summary_agrees "on standard error" "$TMP/err" "$TMP/err"
script -qfec "$WEIR -R 2M -i $TMP/in -o /dev/null --progress=json --interval 0.2" "$TMP/tty" \
    >/dev/null || fail "weir --progress=json on a terminal exited $?"
tr -d '\r' <"$TMP/tty" >"$TMP/tty.lines"
grep -q 'buf \[' "$TMP/tty.lines" && fail "the status line was drawn among the JSON lines"
jcheck "lines on a terminal's standard error, instead of the status line" "$TMP/tty.lines" 0 mixed \
    'len(lines) >= 3'
# both together: the status line on the terminal, the lines on descriptor 3
script -qfec "$WEIR -R 2M -i $TMP/in -o /dev/null --progress=json=3 --interval 0.2 3>$TMP/t3.jsonl" \
    "$TMP/tty" >/dev/null || fail "weir with a terminal and descriptor 3 exited $?"
tr '\r' '\n' <"$TMP/tty" >"$TMP/tty.lines"
[ "$(grep -c 'buf \[' "$TMP/tty.lines")" -ge 2 ] || fail "no status line beside --progress=json=3"
grep -q '^{' "$TMP/tty.lines" && fail "JSON on the terminal with --progress=json=3"
ok "the status line and the JSON lines run together"
jcheck "descriptor 3 beside the status line" t3.jsonl 0 plain 'len(lines) >= 3'

# SIGUSR1 asks for a line at once
"$WEIR" -q -R 1M -i in -o /dev/null --progress=json=3 --interval 1000 3>u.jsonl 2>u.err &
pid=$!
PIDS+=("$pid")
wait_for u.jsonl '"event":"start"' 10
kill -USR1 "$pid"
wait_for u.jsonl '"event":"progress"' 10
ok "SIGUSR1 writes a progress line at once"
kill -TERM "$pid"
wait_bounded "$pid" 20
[ "$STATUS" -eq 143 ] || fail "SIGTERM: exit $STATUS"
jcheck "stopped by SIGTERM" u.jsonl 143 plain '"SIGTERM" in end["message"]'
done_testing
