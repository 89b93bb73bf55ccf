#!/bin/bash
# Purpose: behind a stalled consumer, a decoding weir holds close to -m bytes of
# data whatever block size the stream uses (weir -z -s 64k, the default, 4M, and
# .lz4 files of 64 KiB blocks), and its status line shows the true fill.
. "$(dirname "$0")/lib.sh"
gen "$TMP/t" $((96 << 20)) text
mib() {   # "32.9 MiB" -> whole MiB
    awk -v v="$1" -v u="$2" 'BEGIN { m = v; if (u == "KiB") m = v / 1024; if (u == "GiB") m = v * 1024; if (u == "B") m = 0; printf "%d", m }'
}
# held LABEL FILE ARGS...: decode FILE into a consumer that never reads;
# wait (bounded) until the total stops growing; check it and the fill
held() {
    local label=$1 file=$2
    shift 2
    rm -f "$TMP/st"
    # the consumer never reads; it ends when weir does (its pipe breaks)
    mkfifo "$TMP/never"
    { cat "$file" | "$WEIR" -d -m 32M "$@" 2>"$TMP/st" | { read -r _ <"$TMP/never"; }; } \
        >/dev/null 2>&1 &
    local job=$!
    PIDS+=("$job")
    local pid="" i=0 last=-1 now=0 line=""
    while [ -z "$pid" ] && [ "$i" -lt 100 ]; do
        pid=$(pgrep -n -f -- "-d -m 32M") ; i=$((i + 1)); sleep 0.05
    done
    [ -n "$pid" ] || fail "$label: weir did not start"
    PIDS+=("$pid")
    for i in $(seq 100); do
        sleep 0.2
        kill -USR1 "$pid" 2>/dev/null || fail "$label: weir is gone"
        sleep 0.05
        line=$(grep 'total' "$TMP/st" | tail -n1)
        now=$(echo "$line" | sed -n 's/.*total \([0-9.]*\) \([KMG]*i*B\).*/\1 \2/p')
        now=$(mib $now)
        [ "$now" -gt 24 ] && [ "$now" -eq "$last" ] && break
        last=$now
    done
    kill "$pid" 2>/dev/null
    : >"$TMP/never"   # lets the consumer go
    wait "$job" 2>/dev/null
    rm -f "$TMP/never"
    [ "$now" -ge 28 ] || fail "$label: the buffer held only $now MiB of -m 32M ($line)"
    ok "$label: holds $now MiB of data with -m 32M"
    local fill
    fill=$(echo "$line" | sed -n 's/.*buf \[[#.]*\] *\([0-9]*\)%.*/\1/p')
    [ -n "$fill" ] && [ "$fill" -ge 85 ] || fail "$label: status line fill '$fill' ($line)"
    ok "$label: the status line shows ${fill}% full"
}
"$WEIR" -q -z -s 64k <"$TMP/t" >"$TMP/z64k"
"$WEIR" -q -z <"$TMP/t" >"$TMP/z1m"
"$WEIR" -q -z -s 4M <"$TMP/t" >"$TMP/z4m"
lz4 -q -B4 -c "$TMP/t" >"$TMP/t.lz4"
held "weir -z -s 64k" "$TMP/z64k"
held "weir -z (1M blocks)" "$TMP/z1m"
held "weir -z -s 4M" "$TMP/z4m"
held "lz4 -B4 (64 KiB blocks)" "$TMP/t.lz4"
held "weir -z -s 64k, one worker" "$TMP/z64k" -T 1
done_testing
