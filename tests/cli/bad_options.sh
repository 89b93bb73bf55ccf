#!/bin/bash
# Purpose: bad options are rejected before any I/O with a precise message and exit 2;
# mbuffer's tape and file-buffer options say "not supported".
. "$(dirname "$0")/lib.sh"
check() {   # check MESSAGE ARGS...
    local msg=$1
    shift
    "$WEIR" "$@" </dev/null >"$TMP/out" 2>"$TMP/err"
    local st=$?
    [ "$st" -eq 2 ] || { cat "$TMP/err"; fail "weir $*: exit $st, want 2"; }
    grep -qF -- "$msg" "$TMP/err" || { cat "$TMP/err"; fail "weir $*: no '$msg'"; }
    [ -s "$TMP/out" ] && fail "weir $*: wrote to stdout"
    ok "weir $* -> $msg"
}
check "unknown option '-x'" -x
check "unknown option '--frobnicate'" --frobnicate
check "option '-s' needs a value" -s
check "-s: '12q' is not a valid size" -s 12q
check "-m: '0': the buffer cannot be empty" -m 0
check "-m and -s: a buffer of 1048576 bytes holds fewer than 2 blocks of 2M" -m 1M -s 2M
check "-m: 64k holds fewer than 2 blocks of the default block size (1M)" -m 64k
check "-b: the buffer must hold at least 2 blocks" -b 1
check "larger than physical memory" -m 100T
check "-m: '150%' is not a percentage of memory" -m 150%
check "-P: '101' is not a percentage" -P 101
check "-p: 'x' is not a percentage" -p x
check "-r: '0' is not a positive rate" -r 0
check "-R: 'fast' is not a positive rate" -R fast
check "-i and -I both name an input" -i /dev/null -I 0
check "--bind needs -I" --bind 127.0.0.1
check "-O: '127.0.0.1' needs HOST:PORT" -O 127.0.0.1
check "-O: 'host:99999' has no valid port" -O host:99999
check "cannot send to port 0" -O host:0
check "-O: ':80' needs HOST:PORT" -O :80
check "-4 and -6 contradict each other" -4 -6
check "-q and -v contradict each other" -q -v
check "-z and -d contradict each other" -z -d
check "unexpected argument 'file'" file
check "-z with -I: compress on the sending side" -z -I 0
check "standard output is named more than once" -o - -o -
check "-T: '0' is not a whole number from 1 to 64" -T 0
check "--compress: '99' is not a whole number" --compress=99
check "--connect-timeout needs -O" --connect-timeout 5
check "--timeout: 'soon' is not a number of seconds" --timeout soon
check "-b: '0' is not a positive number of blocks" -b 0
check "-m, -s and -b together over-determine the buffer" -m 1M -s 1k -b 4
check "-n: not supported: weir has no tape volumes" -n 2
check "-A: not supported" -A cmd
check "-a: not supported" -a 5
check "-D: not supported" -D 1G
check "--tapeaware: not supported" --tapeaware
check "-t: not supported: weir has no file-backed buffers" -t
check "-T: not supported: weir has no file-backed buffers" -T /tmp/buf
check "--size: 'lots' is not a valid size" --size lots
check "--readahead: '0' is not a valid size" --readahead 0
check "--readahead: 'far' is not a valid size" --readahead far
"$WEIR" -h >"$TMP/help" || fail "-h exited $?"
has_msg "$TMP/help" "usage: weir" "-h prints usage on stdout"
"$WEIR" --version >"$TMP/ver" || fail "--version exited $?"
has_msg "$TMP/ver" "weir " "--version prints the version"
done_testing
