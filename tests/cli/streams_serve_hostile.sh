#!/bin/bash
# streams_serve_hostile.sh - a spread transfer (--streams) to a service
# (weir --serve) and to a receiver that may resume, against those who do
# not follow the script.  A relay of the test's own ($TMP/wp.py) holds a
# victim's joins so that its receiver gathers for as long as a case needs,
# logs the route its joiners' greetings name, and rewrites the route of an
# attacker's greeting (checksum made again), so that real weirs with real
# keys play the attackers.
#
# Service, while a spread transfer gathers: another client's valid key
# with the route and a stream header (no token); another client's key, and
# the victim's own key, joining with the route and their own (wrong)
# token; a key that is not in the file, with the route; a keyless greeting
# naming the route; a random route; a crowd of routed greetings that never
# finish their handshake.  Each is refused (the attacker's exit status,
# the service's log line), and the victim's transfer is whole.  Then a
# join with the route while the transfer runs, and one after its process
# ended.  A receiver that may resume: SIGTERM while it gathers; the
# sender killed (SIGKILL) while its joins are held after a break.  A
# fault a check finds is marked BUG: the test goes on and fails at its end.
# Loopback, port 0.
. "$(dirname "$0")/lib.sh"
# bug WHAT: a check that found a fault of weir; the test goes on (so that one
# run shows every such fault) and fails at its end
BUGS=()
bug() { echo "BUG: $*" >&2; BUGS+=("$*"); }
python_with socket python3
cd "$TMP" || exit 1

K=$TMP/keys
mkdir -p "$K" out
for c in nas1 nas2 stranger; do
    "$WEIR" -q --genkey "$K/$c.key" --key-id "$c" 2>/dev/null || fail "--genkey $c"
done
cat "$K/nas1.key" "$K/nas2.key" >"$K/clients.key"
chmod 600 "$K/clients.key"
gen big "$(sized 20000017 8000017)" random
# a consumer that reads only once its go file exists: a transfer held
# under way for as long as a check needs
cat >held.sh <<EOF
#!/bin/sh
while [ ! -e "$TMP/go" ]; do sleep 0.05; done
cat >"$TMP/out/held"
EOF
chmod +x held.sh

cat >wp.py <<'EOF'
# wp.py - a relay and a knocker for streams_serve_hostile.sh.
#   wp.py relay PORTFILE TARGETFILE LOG [hold=route|hold=join] [go=FILE]
#                [rewrite=FILE] [rewrite_all] [cut=FILE]
#     listens on 127.0.0.1:0 (its port goes to PORTFILE) and relays each
#     connection to the port TARGETFILE holds when it comes; logs each
#     sender's greeting ("conn I route R greeting HEX").  hold: the client's
#     bytes from its greeting on wait until go=FILE exists (a greeting with
#     a route, or a keyless join: a 'J' record after the greeting, whichever
#     attempt of the sender's it follows), logged "held I";
#     rewrite: the route of a greeting that has one (every sender's greeting
#     with rewrite_all) becomes the number in FILE, its checksum made again;
#     cut: when FILE appears, every connection is reset both ways (logged
#     "cut N"), FILE goes and the count starts again.
#   wp.py knock PORT GREETHEX ROUTE [nokey]: greet (GREETHEX, a sender's
#     greeting, with ROUTE; nokey: without the key's bits) once the
#     service greeted, print "reply TEXT" (the printable bytes of what came
#     back) or "closed"
#   wp.py flood PORT GREETHEX ROUTE N SRC GOFILE: N such greetings from
#     address SRC, each held open (no handshake) until GOFILE exists;
#     prints "flood ready"
import os, socket, struct, sys, threading, time
M = (1 << 64) - 1
SECRET = bytes.fromhex(   # XXH3's default secret, its first 64 bytes
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c")
def r64(b, o): return struct.unpack_from("<Q", b, o)[0]
def mix16(b, o, so):
    p = (r64(b, o) ^ r64(SECRET, so)) * (r64(b, o + 8) ^ r64(SECRET, so + 8))
    return (p & M) ^ (p >> 64)
def xxh3(b):   # XXH3-64, seed 0, for 17 to 32 bytes (a greeting's 24)
    n = len(b)
    acc = (n * 0x9E3779B185EBCA87 + mix16(b, 0, 0) + mix16(b, n - 16, 16)) & M
    acc ^= acc >> 37
    acc = (acc * 0x165667919E3779F9) & M
    return acc ^ (acc >> 32)
def routed(g, route, nokey=False):
    g = bytearray(g[:32])
    struct.pack_into("<I", g, 20, route)
    if nokey:
        struct.pack_into("<I", g, 16, struct.unpack_from("<I", g, 16)[0] & ~0x42)
    struct.pack_into("<Q", g, 24, xxh3(bytes(g[:24])))
    return bytes(g)
def read_n(s, n, secs=10):
    s.settimeout(secs)
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            break
        b += c
    return b
def route_of(g): return struct.unpack_from("<I", g, 20)[0]

def relay(argv):
    portfile, targetfile, logname = argv[:3]
    opt = dict(a.split("=", 1) if "=" in a else (a, "1") for a in argv[3:])
    lock = threading.Lock()
    state = {"n": 0, "conns": []}
    logf = open(logname, "a", buffering=1)
    def log(line):
        with lock:
            logf.write(line + "\n")
    def pump(src, dst):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                dst.sendall(b)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    def held(g):
        h = opt.get("hold", "")
        return route_of(g) != 0 if h == "route" else h == "join" and g[40:41] == b"J"
    def serve(c, i):
        try:
            u = socket.create_connection(("127.0.0.1", int(open(targetfile).read())))
        except OSError:
            log("conn %d upstream refused" % i)
            c.close()
            return
        with lock:
            state["conns"].append((c, u))
        threading.Thread(target=pump, args=(u, c), daemon=True).start()
        try:
            g = read_n(c, 32, 30)
            if len(g) == 32 and g[8:9] == b"G" and g[15:16] == b"S":
                rw = opt.get("rewrite")
                if rw and os.path.exists(rw) and (route_of(g) or "rewrite_all" in opt):
                    g = routed(g, int(open(rw).read()))
                log("conn %d route %d greeting %s" % (i, route_of(g), g.hex()))
                if opt.get("hold") == "join":
                    g += read_n(c, 9, 30)   # the next record's magic, length, type
                if held(g):
                    log("held %d" % i)
                    c.setblocking(False)
                    while not os.path.exists(opt["go"]):
                        time.sleep(0.02)
                        try:
                            b = c.recv(65536)
                            if b == b"":
                                raise OSError("the client closed while held")
                            g += b
                        except BlockingIOError:
                            pass
                    c.setblocking(True)
                    log("released %d" % i)
            c.settimeout(None)
            u.sendall(g)
            pump(c, u)
        except OSError as e:
            log("conn %d ended: %s" % (i, e))
            for s in (c, u):
                s.close()
    def cutter(cut):
        while True:
            if os.path.exists(cut):
                # the cut is logged as the count restarts, under the lock:
                # a connection numbered after it (a sender coming back at
                # once, its joins) is logged after it, however slowly the
                # old ones close
                with lock:
                    conns, state["conns"], state["n"] = state["conns"], [], 0
                    logf.write("cut %d\n" % len(conns))
                for pair in conns:
                    for s in pair:
                        try:
                            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                         struct.pack("ii", 1, 0))
                            s.shutdown(socket.SHUT_RD)
                        except OSError:
                            pass
                        s.close()
                os.unlink(cut)
            time.sleep(0.02)
    if "cut" in opt:
        threading.Thread(target=cutter, args=(opt["cut"],), daemon=True).start()
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    with open(portfile + ".new", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(portfile + ".new", portfile)
    while True:
        c, _ = ls.accept()
        with lock:
            i = state["n"]
            state["n"] += 1
        threading.Thread(target=serve, args=(c, i), daemon=True).start()

def knock(argv):
    s = socket.create_connection(("127.0.0.1", int(argv[0])), timeout=10)
    if len(read_n(s, 32)) != 32:
        print("closed")
        return
    s.sendall(routed(bytes.fromhex(argv[1]), int(argv[2]), "nokey" in argv[3:]))
    try:
        b = read_n(s, 4096, 15)
    except socket.timeout:
        print("silent")
        return
    except OSError:
        b = b""
    print("reply " + "".join(chr(x) if 32 <= x < 127 else "." for x in b) if b else "closed")

def flood(argv):
    port, g = int(argv[0]), routed(bytes.fromhex(argv[1]), int(argv[2]))
    socks = []
    for _ in range(int(argv[3])):
        s = socket.socket()
        s.bind((argv[4], 0))
        s.connect(("127.0.0.1", port))
        socks.append(s)
        if len(read_n(s, 32)) == 32:
            s.sendall(g)
    print("flood ready", flush=True)
    while not os.path.exists(argv[5]):
        time.sleep(0.05)

{"relay": relay, "knock": knock, "flood": flood}[sys.argv[1]](sys.argv[2:])
EOF

# relay NAME TARGET ARGS...: a relay (wp.py relay) to port TARGET, its log
# NAME.log; sets RPORT
relay() {
    local name=$1
    echo "$2" >"$name.target"
    shift 2
    rm -f "$name.port"
    "$PY" wp.py relay "$name.port" "$name.target" "$name.log" "$@" &
    PIDS+=($!)
    local i=0
    until [ -s "$name.port" ]; do
        i=$((i + 1)); [ $i -gt 200 ] && fail "the relay $name did not start"; sleep 0.05
    done
    RPORT=$(cat "$name.port")
}

# held_joins LOG N: wait until the relay whose log is LOG holds N
# connections since its last cut
held_joins() {
    local i=0
    until [ "$(sed -n '/^cut /h;/^cut /!H;${x;p}' "$1" 2>/dev/null | grep -c '^held ')" -ge "$2" ]; do
        i=$((i + 1)); [ $i -gt 400 ] && { cat "$1" >&2; fail "the relay holds fewer than $2"; }
        sleep 0.05
    done
}

# wait_exit PID WANT LABEL ERRFILE: PID ends (bounded) with WANT
wait_exit() {
    wait_bounded "$1" 30
    [ "$STATUS" -eq "$2" ] || { cat "$4" >&2; fail "$3: exit $STATUS, want $2"; }
    ok "$3 (exit $2)"
}

# prefix_of IN OUT LABEL: what OUT holds (maybe nothing) is the start of IN
prefix_of() {
    local n=0
    [ -e "$2" ] && n=$(stat -c %s "$2")
    [ "$n" -eq 0 ] || cmp -s -n "$n" "$1" "$2" || fail "$3: $2 is not a prefix of $1"
    ok "$3 ($n bytes, a prefix of what was sent)"
}

cat >serve.conf <<EOF
listen 127.0.0.1:0
key-file $K/clients.key
max-transfers 8
client nas1 target held -- $TMP/held.sh
client nas1 target home -- sh -c "cat > '$TMP/out/home'"
client nas2 target tank -- sh -c "cat > '$TMP/out/tank'"
client nas2 target tank2 -- sh -c "cat > '$TMP/out/tank2'"
client nas2 target tank3 -- sh -c "cat > '$TMP/out/tank3'"
EOF
"$WEIR" -v --serve serve.conf 2>slog &
SPID=$!
PIDS+=("$SPID")
wait_for slog "listening on" 10
SPORT=$(grep -o 'listening on [^:]*:[0-9]*' slog | head -n1 | grep -o '[0-9]*$')
[ -n "$SPORT" ] || fail "no port in: $(cat slog)"

# ---- the service, while a spread transfer gathers ---------------------------
relay v "$SPORT" hold=route go="$TMP/vgo"
"$WEIR" -q --key-file "$K/nas1.key" -O "127.0.0.1:$RPORT" --target held --streams 3 \
    -i big 2>verr &
VPID=$!
PIDS+=("$VPID")
held_joins v.log 2
ROUTE=$(awk '$3 == "route" && $4 != 0 {print $4; exit}' v.log)
GREET=$(awk '$3 == "route" && $4 != 0 {print $6; exit}' v.log)
[ -n "$ROUTE" ] && [ ${#GREET} -eq 64 ] || { cat v.log; fail "no route in the joiners' greetings"; }
ok "the victim's joins name route $ROUTE, and are held while its transfer gathers"
echo "$ROUTE" >route
relay a "$SPORT" rewrite="$TMP/route" rewrite_all   # every greeting names the route
APORT=$RPORT
relay j "$SPORT" rewrite="$TMP/route"               # only a joiner's greeting
JPORT=$RPORT
"$WEIR" -q --key-file "$K/nas2.key" -O "127.0.0.1:$APORT" --target tank -i big 2>a1.err &
A1=$!
"$WEIR" -q --key-file "$K/nas2.key" -O "127.0.0.1:$JPORT" --target tank2 --streams 2 \
    -i big 2>a2.err &
A2=$!
"$WEIR" -q --key-file "$K/nas1.key" -O "127.0.0.1:$JPORT" --target home --streams 2 \
    -i big 2>a3.err &
A3=$!
"$WEIR" -q --key-file "$K/stranger.key" -O "127.0.0.1:$APORT" --target tank -i big 2>a4.err &
A4=$!
"$PY" wp.py knock "$SPORT" "$GREET" "$ROUTE" nokey >a5.out 2>&1 &
A5=$!
"$PY" wp.py knock "$SPORT" "$GREET" 2654435761 >a6.out 2>&1 &
A6=$!
"$PY" wp.py flood "$SPORT" "$GREET" "$ROUTE" 40 127.0.0.2 "$TMP/vgo" >flood.out 2>&1 &
A7=$!
PIDS+=("$A1" "$A2" "$A3" "$A4" "$A5" "$A6" "$A7")
wait_exit "$A1" 5 "another client's key, the route and a stream header" a1.err
wait_exit "$A2" 5 "another client's key joining with the route and its own token" a2.err
wait_exit "$A3" 5 "the victim's own key joining with the route and another token" a3.err
wait_exit "$A4" 5 "a key the service does not have, with the route" a4.err
has_msg a4.err "the keys do not match (identity 'stranger'" "the stranger is told its key does not match"
wait_exit "$A5" 0 "a keyless greeting that names the route" a5.out
has_msg a5.out "a sender without a key: this receiver takes only encrypted connections" \
    "the keyless knocker is told it needs a key"
wait_exit "$A6" 0 "a random route" a6.out
has_msg a6.out "the transfer this sender comes back to is over here" \
    "the random route is told there is no such transfer"
wait_for flood.out "flood ready" 10
ok "40 routed greetings from 127.0.0.2 wait, their handshakes never begun"
[ "$(grep -c "it asked to join a transfer this listener does not have" slog)" -ge 2 ] ||
    { cat slog >&2; fail "the service's log does not refuse both joins with a wrong token"; }
ok "the transfer's process refuses both joins with a wrong token"
has_msg slog "the sender's key 'stranger' is not in the key file" "the service refuses the stranger's key"
# the header down another's route: refused as a header during the
# gathering would be, or (the gathering's listener knows no 'P' record) as
# a first record without a bare header
grep -qE "a transfer is under way here|no weir stream header in its first encrypted record" slog ||
    { cat slog >&2; fail "the service does not log the header sent down the route"; }
ok "the service refuses the header sent down the victim's route"
[ -e out/tank ] && fail "nas2's target tank ran for a header sent down another's route"
ok "no target ran for the header sent down the victim's route"
grep -q "comes over" slog && fail "the victim's transfer gathered before its joins were let go"
touch vgo
wait_for slog "the transfer comes over 3 connections" 15
ok "the victim's joins are let go and join after all that"
# ---- the service, while the spread transfer runs ------------------------------
# The victim's sender does not resume; its process keeps the handed-over
# socket and refuses what the service hands it there, between reads of
# the stream (at most twice a second, as a receiver that may resume
# does).  Its consumer is held, so no read comes: the join waits unheard
# until its own handshake time (--timeout 8) runs out, and fails.  (Found
# by this test: the process had closed its copy after the gathering, so
# such a join waited even while the stream flowed.)
"$WEIR" -q --key-file "$K/nas2.key" -O "127.0.0.1:$JPORT" --target tank3 --streams 2 \
    --timeout 8 -i big 2>a9.err &
A9=$!
PIDS+=("$A9")
wait_bounded "$A9" 30
[ "$STATUS" -eq 5 ] || { cat a9.err; fail "a join during the transfer: exit $STATUS, want 5"; }
ok "a join with the route while the spread transfer runs fails (exit 5)"
grep -Eq "no handshake within 8 s|the connection broke|refused" a9.err ||
    { cat a9.err; fail "the join during the transfer does not say why it failed"; }
ok "and says why"
touch go
wait_exit "$VPID" 0 "the victim's spread sender" verr
same big out/held "the victim's transfer through the service is whole"

# ---- the service, after the transfer's process ended -------------------------
wait_for slog "client nas1 target held: transfer from" 10
i=0
until grep -q "target held: transfer from .* ended" slog; do
    i=$((i + 1)); [ $i -gt 200 ] && { cat slog >&2; fail "the victim's process did not end"; }
    sleep 0.05
done
"$WEIR" -q --key-file "$K/nas2.key" -O "127.0.0.1:$JPORT" --target tank3 --streams 2 \
    -i big 2>a8.err &
A8=$!
PIDS+=("$A8")
wait_exit "$A8" 5 "a join with the route of a transfer whose process ended" a8.err
"$PY" wp.py knock "$SPORT" "$GREET" "$ROUTE" >a8.out 2>&1 ||
    fail "the knock on an ended transfer's route failed: $(cat a8.out)"
has_msg a8.out "the transfer this sender comes back to is over here (its process ended)" \
    "a greeting with the ended transfer's route is told it is over"
kill -0 "$SPID" 2>/dev/null || fail "the service is gone"
ok "the service still runs"

# ---- a receiver that may resume: SIGTERM while it gathers --------------------
listen rx3.out rx3.err -f -o out3 --reconnect 10
relay r3 "$LPORT" hold=join go="$TMP/r3go"
"$WEIR" -q --streams 3 --reconnect 10 -O "127.0.0.1:$RPORT" -i big 2>tx3.err &
TPID=$!
PIDS+=("$TPID")
held_joins r3.log 2
kill -TERM "$LPID"
wait_exit "$LPID" 143 "SIGTERM to a receiver that gathers" rx3.err
has_msg rx3.err "interrupted by SIGTERM" "the receiver says SIGTERM interrupted it"
[ "$(grep -vE '^weir: (listening on|no key and no allow-list|connection from)|^summary:' rx3.err |
      grep -c .)" -eq 1 ] || { cat rx3.err; fail "the receiver says more than its one line"; }
ok "the receiver says that one line, nothing else"
has_msg rx3.err "summary: INCOMPLETE" "its summary says INCOMPLETE"
touch r3go   # the held joins go on to a receiver that is gone
wait_exit "$TPID" 5 "the spread sender whose receiver was stopped while it gathered" tx3.err
has_msg tx3.err "the receiver closed the connection without an answer" "the sender says its receiver went without an answer"
prefix_of big out3 "what the stopped receiver wrote"

# ---- a receiver that may resume: the sender killed while its joins are held
# after a break --------------------------------------------------------------
listen rx2.out rx2.err -f -o out2 --reconnect 20 --timeout 3
touch r2go
relay r2 "$LPORT" hold=join go="$TMP/r2go" cut="$TMP/r2cut"
"$WEIR" -q --streams 3 --reconnect 20 -R 8M -O "127.0.0.1:$RPORT" -i big 2>tx2.err &
TPID=$!
PIDS+=("$TPID")
wait_for rx2.err "comes over 3 connections" 10
wait_size out2 1048576 20
rm -f r2go
touch r2cut
wait_for r2.log "cut " 10
held_joins r2.log 2
kill -KILL "$TPID"
wait_exit "$TPID" 137 "the sender killed while its joins are held after a break" tx2.err
wait_exit "$LPID" 5 "the receiver whose sender died while its joins were held" rx2.err
grep -q "the sender is back" rx2.err || { echo "--- r2.log:"; cat r2.log tx2.err; } >&2
has_msg rx2.err "the sender is back" "the receiver took its sender back after the break"
# (found by this test: the gathering's ETIMEDOUT was worded as the
# --reconnect window running out, "the sender did not come back within
# 20 s", seconds after it came back.)  A session that may resume gathers
# for twice the handshake time (--timeout 3), so that a sender that gives
# up on a join comes back before the receiver stops waiting
if grep -q "the sender's other connections did not all join within 6 s" rx2.err; then
    ok "the receiver says the other connections did not join"
else
    bug "the receiver whose sender came back says: $(grep -o 'the sender did not come back.*' rx2.err || tail -n2 rx2.err)"
fi
prefix_of big out2 "what the receiver wrote before the sender died"

if [ ${#BUGS[@]} -gt 0 ]; then
    printf 'BUG: %s\n' "${BUGS[@]}" >&2
    fail "${#BUGS[@]} fault(s) of weir found (marked BUG above)"
fi
done_testing
