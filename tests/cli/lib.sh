# lib.sh - shared helpers for weir's command-line tests.  Source it first.
#
# Every check either passes (ok N - what) or ends the test with FAIL and a
# non-zero status.  A test that ran no check fails too (done_testing).
# Waits are bounded loops; nothing sleeps its way to green.
set -u
: "${WEIR:?WEIR must name the weir binary}"
: "${TESTTOOL:?TESTTOOL must name the test tool}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-test.XXXXXX")
PIDS=()
CHECKS=0

cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# sized RELEASE SANITIZED: a test's size in this build.  The sanitizer and
# valgrind builds run every test, several times slower, so the largest
# sizes are cut there (the awkward small sizes never are); CI's total stays
# well under its hour as tests are added.
sized() { if [ -n "${WEIR_SANITIZED:-}" ]; then echo "$2"; else echo "$1"; fi; }
ok() { CHECKS=$((CHECKS + 1)); echo "ok $CHECKS - $*"; }
SKIPS=0
# on_linux WHAT: true on the Linux build; on the POSIX build (WEIR_PLATFORM,
# -Dplatform=posix) says that the check of WHAT needs Linux and is skipped
# (test.sh counts these lines as skipped, never as passed) and is false.
on_linux() {
    [ "${WEIR_PLATFORM:-linux}" = linux ] && return 0
    SKIPS=$((SKIPS + 1))
    echo "# skip (needs Linux): $*"
    return 1
}
done_testing() {
    [ "$CHECKS" -gt 0 ] || fail "the test ran no checks"
    if [ "$SKIPS" -gt 0 ]; then
        echo "# $CHECKS checks passed, $SKIPS skipped"
    else
        echo "# $CHECKS checks passed"
    fi
    exit 0
}

# gen FILE BYTES [random|zero|mixed|text]
gen() {
    local f=$1 n=$2 kind=${3:-random}
    case $kind in
    random) head -c "$n" /dev/urandom >"$f" ;;
    zero) head -c "$n" /dev/zero >"$f" ;;
    text) yes 'weir carries backups; every byte counts' | head -c "$n" >"$f" ;;
    mixed)
        { yes 'the quick brown fox 0123456789' | head -c $((n / 3))
          head -c $((n / 3)) /dev/urandom
          head -c $((n - 2 * (n / 3))) /dev/zero; } >"$f" ;;
    esac
    [ "$(stat -c %s "$f")" -eq "$n" ] || fail "gen $f: wrong size"
}

sum() { sha256sum <"$1" | cut -d' ' -f1; }

# flip_byte FILE OFFSET: flip the low bit of the byte at OFFSET, so that the
# byte always changes (writing a fixed value leaves it as it was one time in 256)
flip_byte() {
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    [ -n "$b" ] || fail "flip: $1 has no byte at $2"
    printf "\\$(printf %03o $((b ^ 1)))" |
        dd of="$1" bs=1 seek="$2" conv=notrunc status=none || fail "flip: cannot write $1"
}

# long_path MS [FAULT]: SHIM, a command prefix that runs a weir over a
# made-up long path (the fault shim's tcp_long, or FAULT: TCP_INFO says MS
# ms, and that the peer's window limited the connection all the time),
# under ASan too
long_path() {
    SHIM=(env ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"
          WEIR_FAULT="${2:-tcp_long}=$1" LD_PRELOAD="$FAULTSHIM")
}

# python_with MODULE PACKAGE: the python3 that imports MODULE into $PY
# (the first python3 on PATH may be one without Debian's modules), or fail
# naming the Debian package that scripts/deps.sh installs
python_with() {
    PY=
    local py
    for py in python3 /usr/bin/python3; do
        "$py" -c "import $1" 2>/dev/null && { PY=$py; return 0; }
    done
    fail "no python3 with $1 (scripts/deps.sh installs $2)"
}

# same A B LABEL: the two files have the same checksum
same() {
    [ -e "$2" ] || fail "$3: $2 was not written"
    [ "$(sum "$1")" = "$(sum "$2")" ] || fail "$3: $2 differs from $1"
    ok "$3"
}

# expect STATUS LABEL CMD...: run CMD (stderr to $TMP/err), check its status
expect() {
    local want=$1 label=$2
    shift 2
    "$@" 2>"$TMP/err"
    local got=$?
    [ "$got" -eq "$want" ] || { cat "$TMP/err" >&2; fail "$label: exit $got, want $want"; }
    ok "$label (exit $want)"
}

# has_msg FILE TEXT LABEL: FILE contains TEXT
has_msg() {
    grep -qF -- "$2" "$1" || { echo "--- $1:" >&2; cat "$1" >&2; fail "$3: no '$2'"; }
    ok "$3"
}

# wait_bounded PID SECS: wait for PID to exit, at most SECS; sets STATUS
wait_bounded() {
    local pid=$1 limit=$(($2 * 20)) i=0
    while kill -0 "$pid" 2>/dev/null; do
        i=$((i + 1))
        if [ "$i" -gt "$limit" ]; then
            kill -9 "$pid" 2>/dev/null
            fail "process $pid still running after $2 s"
        fi
        sleep 0.05
    done
    wait "$pid"
    STATUS=$?
}

# wait_for FILE TEXT SECS: wait until FILE contains TEXT
wait_for() {
    local limit=$(($3 * 20)) i=0
    until grep -qF -- "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ "$i" -gt "$limit" ] && { cat "$1" >&2; fail "no '$2' in $1 after $3 s"; }
        sleep 0.05
    done
}

# wait_size FILE BYTES SECS: wait until FILE holds more than BYTES
wait_size() {
    local limit=$(($3 * 20)) i=0
    until [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -gt "$2" ]; do
        i=$((i + 1))
        [ "$i" -gt "$limit" ] && fail "$1 did not grow past $2 bytes in $3 s"
        sleep 0.05
    done
}

# listen OUT ERR ARGS...: start weir -I 0 ARGS in the background;
# sets LPID and LPORT from its "listening on" line
listen() {
    local out=$1 err=$2
    shift 2
    rm -f "$err"   # never read a previous listener's port
    "$WEIR" -I 0 "$@" >"$out" 2>"$err" &
    LPID=$!
    PIDS+=("$LPID")
    wait_for "$err" "listening on" 10
    LPORT=$(grep -o 'listening on .*' "$err" | head -n1 | grep -o '[0-9]*$')
    [ -n "$LPORT" ] || fail "no port in: $(cat "$err")"
}

# cut_proxy TARGET CUTS EVERY MODE [GAP] [OPTIONS...]: start the fault proxy
# (testtool cutproxy) in front of TARGET; sets PPORT and PPID_.  Its output,
# "cut N at BYTES" and the like, is in $TMP/proxy.
cut_proxy() {
    rm -f "$TMP/proxy"   # never read the previous proxy's port
    "$TESTTOOL" cutproxy "$@" >"$TMP/proxy" &
    PPID_=$!
    PIDS+=("$PPID_")
    wait_for "$TMP/proxy" "proxy listening on" 10
    PPORT=$(grep -o 'listening on [0-9]*' "$TMP/proxy" | grep -o '[0-9]*$')
}

# weir_stream IN OUT [OPTIONS...]: OUT gets the weir stream that
# "weir OPTIONS -i IN" sends to another weir, as recorded between the two
# (-z writes files as one LZ4 frame; the weir stream travels only between
# two weirs), without the sender's greeting
weir_stream() {
    local in=$1 out=$2 px
    shift 2
    listen /dev/null "$TMP/ws.lerr" -q
    rm -f "$TMP/ws.proxy"   # never read the previous proxy's port (or its empty file)
    "$TESTTOOL" proxy "$LPORT" record 0 0 "$TMP/ws.rec" >"$TMP/ws.proxy" &
    px=$!
    PIDS+=("$px")
    wait_for "$TMP/ws.proxy" "proxy listening on" 10
    "$WEIR" -q "$@" -i "$in" -O "127.0.0.1:$(grep -o '[0-9]*$' "$TMP/ws.proxy")" \
        || fail "weir_stream: the sender exited $?"
    wait_bounded "$LPID" 20
    [ "$STATUS" -eq 0 ] || { cat "$TMP/ws.lerr" >&2; fail "weir_stream: the receiver exited $STATUS"; }
    wait "$px" || fail "weir_stream: the proxy failed"
    # the greeting (32 bytes) goes; so does the sender's word that it read
    # the answer ('D', 40 bytes after the trailer): the stream ends before
    local len=$(($(stat -c %s "$TMP/ws.rec") - 32))
    [ "$(tail -c 40 "$TMP/ws.rec" | od -An -c -j 8 -N 1 | tr -d ' ')" = D ] && len=$((len - 40))
    tail -c +33 "$TMP/ws.rec" | head -c "$len" >"$out"
}

# split_options ARGS...: the arguments before "--" go to the array SOPTS
# (a sender's options), those after it to ROPTS (a receiver's)
split_options() {
    SOPTS=() ROPTS=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do SOPTS+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    ROPTS=("$@")
}

# both_exit_0 LABEL SPID: the sender SPID and the listener LPID (started
# with listen) both end within 60 s, with status 0
both_exit_0() {
    wait_bounded "$2" 60
    local sst=$STATUS
    wait_bounded "$LPID" 60
    [ "$sst" -eq 0 ] && [ "$STATUS" -eq 0 ] ||
        { cat "$TMP/serr" "$TMP/lerr"; fail "$1: sender exit $sst, receiver exit $STATUS"; }
}

# bg CMD...: run in the background; sets BPID
bg() {
    "$@" &
    BPID=$!
    PIDS+=("$BPID")
}

# start_sshd: a throwaway sshd on a loopback port for this test (stopped at
# exit), with its ssh wrapper $TMP/sshd/ssh; sets HOST (user@127.0.0.1) and
# RWEIR, the weir the remote end runs, under a name of this test's own, so
# that pgrep finds only this test's remote weirs (others run beside it)
start_sshd() {
    local sshd
    sshd=$(dirname "${BASH_SOURCE[0]}")/../tools/sshd.sh
    trap 'bash "'"$sshd"'" stop "$TMP/sshd"; cleanup' EXIT
    bash "$sshd" start "$TMP/sshd" >"$TMP/sshd.port" 2>"$TMP/sshd.err" ||
        { cat "$TMP/sshd.err" >&2; fail "could not start a throwaway sshd (openssh-server)"; }
    ok "a throwaway sshd runs on 127.0.0.1:$(cat "$TMP/sshd.port")"
    HOST="$(id -un)@127.0.0.1"
    RWEIR=$TMP/weir
    ln -s "$WEIR" "$RWEIR"
}

# two_hosts NET: two network namespaces, $A (NET.1) and $B (NET.2), joined
# by a veth pair whose ends are $VA and $VB; both go when the test ends.
# NET is the first three numbers of a /24 no other test uses.
two_hosts() {
    [ "$(id -u)" -eq 0 ] || fail "network namespaces need root"
    A=weirA$$ B=weirB$$ VA=va$$ VB=vb$$
    trap 'ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; cleanup' EXIT
    ip netns add "$A" && ip netns add "$B" || fail "cannot create network namespaces"
    ip link add "$VA" netns "$A" type veth peer name "$VB" netns "$B" ||
        fail "cannot create a veth pair"
    ip -n "$A" addr add "$1.1/24" dev "$VA" && ip -n "$A" link set "$VA" up &&
        ip -n "$A" link set lo up || fail "cannot set up host A"
    ip -n "$B" addr add "$1.2/24" dev "$VB" && ip -n "$B" link set "$VB" up &&
        ip -n "$B" link set lo up || fail "cannot set up host B"
}
