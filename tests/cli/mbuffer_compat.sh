#!/bin/bash
# Purpose: weir installed as mbuffer.  The command lines syncoid and znapzend
# build, and mbuffer's own tests 0, 1, 2, 3 and 7 (their arguments unchanged,
# only the ports picked free), work with weir on one end and a real mbuffer,
# socat or weir on the other; mbuffer's other options get weir's meaning or a
# refusal that says why; -W fails a stalled input, output or listener.
. "$(dirname "$0")/lib.sh"
REAL_MBUFFER=$(command -v mbuffer) || fail "mbuffer is not installed (scripts/deps.sh installs it)"
command -v socat >/dev/null || fail "socat is not installed (scripts/deps.sh installs it)"
mkdir "$TMP/bin"
ln -s "$(readlink -f "$WEIR")" "$TMP/bin/mbuffer"
MB=$TMP/bin/mbuffer
N=$(sized 52428800 8388608)   # 50 MiB of random data, as the issue asks (less under sanitizers)
gen "$TMP/in" "$N" random
md5() { md5sum <"$1" | cut -d' ' -f1; }
IN_MD5=$(md5 "$TMP/in")

# a free port for a peer that cannot pick its own (a real mbuffer -I)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait until something listens on PORT
wait_listening() {
    local i=0
    until ss -ltn "sport = :$1" | grep -q LISTEN; do
        i=$((i + 1)); [ "$i" -gt 200 ] && fail "nothing listens on port $1 after 10 s"
        sleep 0.05
    done
}
# mb_listen OUT ERR ARGS...: weir as mbuffer listening on a port it picks (-I HOST:0 or :0)
mb_listen() {
    local out=$1 err=$2
    shift 2
    rm -f "$err"
    "$MB" "$@" >"$out" 2>"$err" &
    LPID=$!
    PIDS+=("$LPID")
    wait_for "$err" "listening on" 10
    LPORT=$(grep -o 'listening on .*' "$err" | head -n1 | grep -o '[0-9]*$')
}

# the command line znapzend users could not run: "unknown option '-W'"
"$WEIR" -q -s 256k -W 600 -m 1G <"$TMP/in" >"$TMP/w.out" || fail "weir -q -s 256k -W 600 -m 1G exited $?"
same "$TMP/in" "$TMP/w.out" "weir takes znapzend's options (-W 600)"

# ---- mbuffer's own tests --------------------------------------------------
# test0: ./mbuffer -i test.tar -p10 | ./mbuffer -q -P 90 | openssl md5
got=$("$MB" -q -i "$TMP/in" -p10 | "$MB" -q -P 90 | md5sum | cut -d' ' -f1)
[ "$got" = "$IN_MD5" ] || fail "mbuffer test0: md5 $got"
ok "mbuffer test0 (-p10 | -P 90)"
# test1: ./mbuffer -i test.tar -f -o $@.tar -o /dev/null -H
"$MB" -i "$TMP/in" -f -o "$TMP/t1.tar" -o /dev/null -H 2>"$TMP/t1.err" || fail "mbuffer test1 exited $?"
same "$TMP/in" "$TMP/t1.tar" "mbuffer test1: the -o file"
has_msg "$TMP/t1.err" "md5 hash: $IN_MD5" "mbuffer test1: -H prints the data's md5"
# test2: ./mbuffer --pid -q -4 -I :7001 -o $@.tar -o - | openssl md5, fed by
#        ./mbuffer --pid -i test.tar -o /dev/null -4 -O localhost:7001 -H
rm -f "$TMP/t2.tar"
"$MB" --pid -q -4 -I :0 -o "$TMP/t2.tar" -o - 2>"$TMP/t2r.err" | md5sum >"$TMP/t2.md5" &
PIDS+=($!)
wait_for "$TMP/t2r.err" "listening on" 10
port=$(grep -o 'listening on .*' "$TMP/t2r.err" | grep -o '[0-9]*$')
"$MB" --pid -i "$TMP/in" -o /dev/null -4 -O "localhost:$port" -H 2>"$TMP/t2s.err" ||
    { cat "$TMP/t2s.err"; fail "mbuffer test2: the sender exited $?"; }
wait_for "$TMP/t2.md5" " -" 20
[ "$(cut -d' ' -f1 "$TMP/t2.md5")" = "$IN_MD5" ] || fail "mbuffer test2: md5 of the receiver's stdout"
same "$TMP/in" "$TMP/t2.tar" "mbuffer test2 (-4 -I :PORT, -O localhost:PORT, two outputs each)"
has_msg "$TMP/t2s.err" "PID is" "--pid prints the process id"
has_msg "$TMP/t2s.err" "md5 hash: $IN_MD5" "mbuffer test2: the sender's -H"
# test3: ./mbuffer --pid -q -6 -I :7002 | openssl md5, fed by
#        ./mbuffer --pid -i test.tar -o /dev/null -6 -O ::1:7002 -o $@.tar -H
rm -f "$TMP/t3.tar"
"$MB" --pid -q -6 -I :0 2>"$TMP/t3r.err" | md5sum >"$TMP/t3.md5" &
PIDS+=($!)
wait_for "$TMP/t3r.err" "listening on" 10
port=$(grep -o 'listening on .*' "$TMP/t3r.err" | grep -o '[0-9]*$')
"$MB" --pid -i "$TMP/in" -o /dev/null -6 -O "::1:$port" -o "$TMP/t3.tar" -H 2>"$TMP/t3s.err" ||
    { cat "$TMP/t3s.err"; fail "mbuffer test3: the sender exited $?"; }
wait_for "$TMP/t3.md5" " -" 20
[ "$(cut -d' ' -f1 "$TMP/t3.md5")" = "$IN_MD5" ] || fail "mbuffer test3: md5 of the receiver's stdout"
same "$TMP/in" "$TMP/t3.tar" "mbuffer test3 (-6, -O ::1:PORT is [::1]:PORT)"
# test7: ./mbuffer -P90 --md5 -i INSTALL -o /dev/null
"$MB" -P90 --md5 -i "$TMP/in" -o /dev/null 2>"$TMP/t7.err" || fail "mbuffer test7 exited $?"
has_msg "$TMP/t7.err" "md5 hash: $IN_MD5" "mbuffer test7 (-P90 --md5)"
"$WEIR" -q --hash sha256 -i "$TMP/in" -o /dev/null 2>"$TMP/sha.err" || fail "--hash sha256 exited $?"
has_msg "$TMP/sha.err" "sha256 hash: $(sha256sum <"$TMP/in" | cut -d' ' -f1)" "--hash sha256"

# ---- syncoid ----------------------------------------------------------------
# mbuffer [-R 100m|-r 50k] -q -s 128k -m 16M on both sides of an ssh pipe
got=$("$MB" -R 100m -q -s 128k -m 16M <"$TMP/in" | cat | "$MB" -q -s 128k -m 16M | md5sum | cut -d' ' -f1)
[ "$got" = "$IN_MD5" ] || fail "syncoid's pipe: md5 $got"
ok "syncoid: mbuffer -R 100m -q -s 128k -m 16M | ... | mbuffer -q -s 128k -m 16M"
got=$("$REAL_MBUFFER" -q -s 128k -m 16M <"$TMP/in" 2>/dev/null | "$MB" -q -s 128k -m 16M | md5sum | cut -d' ' -f1)
[ "$got" = "$IN_MD5" ] || fail "syncoid's pipe with a real mbuffer: md5 $got"
ok "syncoid: a real mbuffer on the sending side"
# direct mode: mbuffer -W 60 -I HOST:PORT -q -s 128k -m 16M, fed by
# socat - TCP:HOST:PORT,retry=60,interval=1
mb_listen "$TMP/sd.out" "$TMP/sd.err" -W 60 -I 127.0.0.1:0 -q -s 128k -m 16M
"$MB" -q -s 128k -m 16M <"$TMP/in" | socat - "TCP:127.0.0.1:$LPORT,retry=60,interval=1" \
    >"$TMP/socat.out" || fail "syncoid direct: socat exited $?"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/sd.err"; fail "syncoid direct: the receiver exited $STATUS"; }
same "$TMP/in" "$TMP/sd.out" "syncoid direct mode: socat into weir as mbuffer -W 60 -I HOST:PORT"
[ -s "$TMP/socat.out" ] && fail "the receiver wrote $(stat -c %s "$TMP/socat.out") bytes back into socat"
ok "a plain sender that speaks first is never greeted"

# ---- znapzend ---------------------------------------------------------------
# receiver: mbuffer -q -s 256k -W 600 -m 1G -4 -I PORT
# sender:   mbuffer -q -s 256k -W 600 -m 1G -O HOST:PORT, with user extras after
zrecv="-q -s 256k -W 600 -m 1G -4"
zsend="-q -s 256k -W 600 -m 1G"
# weir to weir: the verified stream and the end-to-end answer
mb_listen "$TMP/z1.out" "$TMP/z1.err" $zrecv -v 4 -I 0
"$MB" $zsend -O "127.0.0.1:$LPORT" -R 1M -R 1G <"$TMP/in" || fail "znapzend weir->weir: sender exited $?"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/z1.err"; fail "znapzend weir->weir: receiver exited $STATUS"; }
same "$TMP/in" "$TMP/z1.out" "znapzend: weir to weir (-R 1M -R 1G: the last wins)"
if on_linux "weir to weir as mbuffer speaks the weir stream (the kept SYN's mark)"; then
    grep -q "plain bytes" "$TMP/z1.err" && fail "znapzend weir->weir fell back to plain bytes"
    has_msg "$TMP/z1.err" "connection from 127.0.0.1" "znapzend: weir to weir speaks the weir stream"
fi
# a real mbuffer sender into weir
mb_listen "$TMP/z2.out" "$TMP/z2.err" $zrecv -I 0
"$REAL_MBUFFER" $zsend -O "127.0.0.1:$LPORT" <"$TMP/in" 2>/dev/null || fail "znapzend: real mbuffer sender exited $?"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/z2.err"; fail "znapzend mbuffer->weir: receiver exited $STATUS"; }
same "$TMP/in" "$TMP/z2.out" "znapzend: a real mbuffer sender into weir as mbuffer"
# weir into a real mbuffer receiver: plain bytes, after the greeting does not come
port=$(free_port)
"$REAL_MBUFFER" $zrecv -I "$port" >"$TMP/z3.out" 2>/dev/null &
rpid=$!
PIDS+=("$rpid")
wait_listening "$port"
"$MB" $zsend -O "127.0.0.1:$port" <"$TMP/in" || fail "znapzend weir->mbuffer: sender exited $?"
wait_bounded "$rpid" 30
[ "$STATUS" -eq 0 ] || fail "znapzend weir->mbuffer: the real mbuffer exited $STATUS"
same "$TMP/in" "$TMP/z3.out" "znapzend: weir as mbuffer into a real mbuffer (plain bytes)"
# -m N% and the last -m winning
got=$("$MB" -q -m 1G -m 1% <"$TMP/in" | md5sum | cut -d' ' -f1)
[ "$got" = "$IN_MD5" ] || fail "-m 1G -m 1%: md5 $got"
ok "-m N%, the last -m wins"
# under its own name weir never writes its stream into a plain receiver
port=$(free_port)
"$REAL_MBUFFER" -q -I "$port" >"$TMP/z4.out" 2>/dev/null &
rpid=$!
PIDS+=("$rpid")
wait_listening "$port"
expect 5 "weir (its own name) -O to a real mbuffer" "$WEIR" -q --timeout 2 -O "127.0.0.1:$port" -i "$TMP/in"
has_msg "$TMP/err" "does not seem to be weir" "weir -O to mbuffer: says why"
wait_bounded "$rpid" 20
[ -s "$TMP/z4.out" ] && fail "weir -O wrote $(stat -c %s "$TMP/z4.out") bytes into mbuffer -I"
ok "weir -O wrote nothing into mbuffer -I"

# plain bytes that begin like a weir record are still plain bytes, taken as they are
printf 'W*M\030plain data that begins with the weir magic\n' >"$TMP/wm"
cat "$TMP/in" >>"$TMP/wm"
mb_listen "$TMP/wm.out" "$TMP/wm.err" -q -I 0
nc -N 127.0.0.1 "$LPORT" <"$TMP/wm" >"$TMP/wm.back" || fail "nc exited $?"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/wm.err"; fail "plain bytes with the weir magic: exit $STATUS"; }
same "$TMP/wm" "$TMP/wm.out" "plain bytes that begin with weir's magic arrive unchanged"
[ -s "$TMP/wm.back" ] && fail "the listener wrote $(stat -c %s "$TMP/wm.back") bytes to a plain sender"
ok "nothing is written back to a plain sender"

# ---- mbuffer's other options --------------------------------------------------
expect 2 "-d under the name mbuffer" "$MB" -d -i "$TMP/in" -o /dev/null
has_msg "$TMP/err" "-d: not supported: under the name mbuffer" "-d is never decompress under mbuffer"
expect 2 "-u" "$MB" -u 10 -i "$TMP/in" -o /dev/null
has_msg "$TMP/err" "pace the output with -R" "-u: says why"
expect 2 "--append" "$MB" --append -o "$TMP/x" -i "$TMP/in"
expect 2 "--tcpbuffer" "$MB" --tcpbuffer 1M -i "$TMP/in" -o /dev/null
expect 2 "-A (tape)" "$MB" -A "echo next" -i "$TMP/in" -o /dev/null
has_msg "$TMP/err" "not supported: weir has no tape volumes" "-A: says why"
expect 2 "--hash with an unknown digest" "$WEIR" --hash nosuch -i "$TMP/in" -o /dev/null
expect 2 "-H with -z" "$WEIR" -H -z -i "$TMP/in" -o /dev/null
expect 2 "--hash md4 (named, but not available)" "$WEIR" --hash md4 -i "$TMP/in" -o /dev/null
expect 4 "-H with a failing output" "$WEIR" -q -H -i "$TMP/in" -o /dev/full
grep -q "hash:" "$TMP/err" && fail "-H printed a digest of a transfer that failed"
ok "-H says nothing of a transfer that failed"
"$MB" -q --tcptimeo 3000000 -i "$TMP/in" -o /dev/null || fail "--tcptimeo 3000000 (50 minutes) exited $?"
ok "--tcptimeo takes milliseconds beyond the seconds bound"
expect 2 "-v 7 under mbuffer" "$MB" -v 7 -i "$TMP/in" -o /dev/null
"$MB" -v 0 -i "$TMP/in" -o /dev/null 2>"$TMP/v0.err" || fail "-v 0 exited $?"
[ -s "$TMP/v0.err" ] && fail "mbuffer -v 0 printed: $(cat "$TMP/v0.err")"
ok "-v 0 under mbuffer prints nothing"
"$MB" -v 5 -c -L -Q --no-direct -0 --tcptimeo 5000 --truncate -i "$TMP/in" -o "$TMP/c.out" \
    2>"$TMP/v5.err" || { cat "$TMP/v5.err"; fail "-v 5 -c -L -Q --no-direct exited $?"; }
same "$TMP/in" "$TMP/c.out" "-c (O_DSYNC), -L (locked buffer), -Q, -0, --tcptimeo, --truncate"

# ---- -W, the watchdog -----------------------------------------------------------
# a stalled pipe input: a fifo this shell holds open and never writes (a
# pipeline's job would keep "wait" until its writer ended)
mkfifo "$TMP/silent"
exec 7<>"$TMP/silent"
"$WEIR" -q -W 1 -o "$TMP/wd1.out" <"$TMP/silent" 2>"$TMP/wd1.err" &
wpid=$!
PIDS+=("$wpid")
wait_bounded "$wpid" 15
exec 7>&-
[ "$STATUS" -eq 3 ] || fail "-W 1, silent input: exit $STATUS, want 3"
has_msg "$TMP/wd1.err" "watchdog (-W 1): input <stdin> sent nothing for 1 s" "-W: a stalled input is named"
# a listener nobody connects to
"$MB" -q -W 1 -I 127.0.0.1:0 >/dev/null 2>"$TMP/wd2.err" &
wpid=$!
PIDS+=("$wpid")
wait_bounded "$wpid" 15
[ "$STATUS" -eq 5 ] || fail "-W 1, nobody connects: exit $STATUS, want 5"
has_msg "$TMP/wd2.err" "watchdog (-W 1): no sender connected to" "-W: a listener nobody joined"
# an output that takes nothing
mkfifo "$TMP/fifo"
( exec sleep 30 ) <"$TMP/fifo" &
PIDS+=($!)
head -c 8M /dev/zero | "$WEIR" -q -W 1 -m 1M -s 64k -o "$TMP/fifo" 2>"$TMP/wd3.err" &
wpid=$!
PIDS+=("$wpid")
wait_bounded "$wpid" 15
[ "$STATUS" -eq 4 ] || fail "-W 1, stalled output: exit $STATUS, want 4"
has_msg "$TMP/wd3.err" "took nothing for 1 s" "-W: a stalled output is named"
# slow but moving is not stalled
head -c 3M /dev/zero | "$WEIR" -q -W 1 -R 1M >"$TMP/wd4.out" || fail "-W 1 with a slow, moving output exited $?"
[ "$(stat -c %s "$TMP/wd4.out")" -eq 3145728 ] || fail "-W 1 -R 1M: short output"
ok "-W 1 lets a slow transfer that keeps moving finish"
done_testing
