#!/bin/bash
# run.sh - weir's benchmarks against the peers and the machine's limits.
#
#   bench/run.sh                 2 GiB of data, 5 runs of each side
#   SIZE=512M RUNS=3 bench/run.sh
#   CASES="pipe lz4" bench/run.sh   only some cases
#   OLD=<commit> bench/run.sh    every row against the weir built at <commit>
#
# With OLD set, every case that times weir against a reference times it
# against the old weir running the same command instead (its listener too),
# and the cases that print figures of their own (iperf3, CPU per GiB, RSS,
# the link test, latency) print them for both, marked new and old: the
# table's rows re-measured side by side, to show a change that should not
# move them did not.
#
# Each case runs weir and its reference command alternately (A B A B ...),
# because this machine is shared and its speed drifts; it reports the median
# wall time of each, their ratio (weir / reference; below 1 is faster), the
# target, and weir's peak RSS and CPU seconds (medians).  It installs what it
# needs and generates its data under bench/data.  The table is Markdown.
set -u
cd "$(dirname "$0")/.."
SIZE=${SIZE:-2G}
RUNS=${RUNS:-5}
CASES=${CASES:-"pipe pipe_mbuffer file sync tcp_nc tcp_mbuffer tcp_iperf lz4 lz4d lz4_tcp enc_ssh enc_plain enc_z enc_cpu ssh_z ssh_plain ssh_tunnel resume_cuts resume_cost resume_cost_pipe resume_cost_z resume_cost_key resume_noise resume_window rss latency link"}
bash scripts/deps.sh || exit 1
if [ ! -f build-bench/build.ninja ]; then
    meson setup build-bench -Dbuildtype=release >/dev/null || exit 1
fi
ninja -C build-bench >/dev/null || exit 1
W=$PWD/build-bench/weir
NEWW=$W
OLDW=
if [ -n "${OLD:-}" ]; then
    OLDT=$(mktemp -d "${TMPDIR:-/tmp}/weir-oldbench.XXXXXX")
    git archive "$OLD" | tar -x -C "$OLDT" || exit 1
    (cd "$OLDT" && meson setup build -Dbuildtype=release >/dev/null && ninja -C build weir >/dev/null) \
        || { echo "run.sh: could not build $OLD" >&2; exit 1; }
    OLDW=$OLDT/build/weir
    echo "# old weir: $OLD ($(git log -1 --format='%h %s' "$OLD" | cut -c1-60))" >&2
fi
TT=$PWD/build-bench/tests/testtool
bytes=$(numfmt --from=iec "$SIZE")
D=$PWD/bench/data
mkdir -p "$D"
T=$(mktemp -d)
trap 'pkill -P $$ 2>/dev/null; bash tests/tools/sshd.sh stop "$T/sshd" 2>/dev/null; rm -rf "$T" ${OLDT:+"$OLDT"}' EXIT
# a throwaway sshd on loopback for the ssh references
case " $CASES " in
*" enc_"* | *" ssh_"*)
    SSHPORT=$(bash tests/tools/sshd.sh start "$T/sshd") || exit 1
    SSH="$T/sshd/ssh -c aes128-gcm@openssh.com $(id -un)@127.0.0.1"
    # weir's --ssh cases, through the same sshd and cipher
    WSSH="--ssh $(id -un)@127.0.0.1 --rsh '$T/sshd/ssh -c aes128-gcm@openssh.com' --remote-weir $W"
    echo "# sshd on 127.0.0.1:$SSHPORT for the ssh references" >&2 ;;
esac
case " $CASES " in
*" enc_"* | *" ssh_"* | *" resume_cost_key "* | *" posix "*)
    "$W" -q --genkey "$T/bench.key" --key-id bench || exit 1
    KEY="--key-file $T/bench.key" ;;
esac

MIX=$D/mixed-$SIZE.bin
RND=$D/random-$SIZE.bin
# the link test and the latency need no data
if [ -n "$(echo " $CASES " | sed 's/ link / /g; s/ latency / /g' | tr -d ' ')" ]; then
if [ ! -f "$MIX" ]; then
    echo "# generating $SIZE of mixed data (a tar of /usr, repeated)" >&2
    while :; do tar cf - /usr 2>/dev/null || break; done | head -c "$bytes" >"$MIX"
fi
[ -f "$RND" ] || head -c "$bytes" /dev/urandom >"$RND"
[ -f "$MIX.lz4" ] || lz4 -q -1 -c "$MIX" >"$MIX.lz4"
cat "$MIX" "$RND" "$MIX.lz4" >/dev/null   # into the page cache
fi

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# timed SCRIPT: run bash SCRIPT under GNU time; append "wall rss_kib cpu" to $T/last
timed() {
    local s e
    s=$(date +%s%N)
    /usr/bin/time -o "$T/time" -f "%M %U %S" bash -c "$1" >/dev/null 2>"$T/stderr" \
        || { echo "# command failed: $1" >&2; sed 's/^/#   /' "$T/stderr" >&2; }
    e=$(date +%s%N)
    read -r rss u sy <"$T/time"
    awk -v us=$(( (e - s) / 1000 )) -v rss="$rss" -v u="$u" -v sy="$sy" \
        'BEGIN { printf "%.6f %d %.2f\n", us / 1e6, rss, u + sy }' </dev/null
}

# listener_weir -> sets LP (port); the listener runs in the background.
# With RCPU set it runs under GNU time, its CPU seconds going to $T/lcpu
# (run_case then compares the receivers' CPU too)
start_weir_listener() {
    rm -f "$T/l.err" "$T/lcpu"
    if [ -n "${RCPU:-}" ]; then
        /usr/bin/time -o "$T/lcpu" -f "%U %S" "$W" -q -I 0 -o /dev/null "$@" 2>"$T/l.err" &
    else
        "$W" -q -I 0 -o /dev/null "$@" 2>"$T/l.err" &
    fi
    for _ in $(seq 200); do grep -q "listening on" "$T/l.err" 2>/dev/null && break; sleep 0.01; done
    LP=$(grep -o 'listening on .*' "$T/l.err" | grep -o '[0-9]*$')
}

# Each case defines A (weir) and B (reference) as setup+command pairs.
run_case() {   # run_case NAME TARGET_TEXT
    local name=$1 target=$2 i
    : >"$T/a"; : >"$T/b"; : >"$T/ra"; : >"$T/rb"
    [ -n "$OLDW" ] && target="≈ 1.00" && name="$name: new weir vs old weir, same command"
    for i in $(seq "$RUNS"); do
        prep_a; timed "$A" >>"$T/a"; wait; receiver_cpu >>"$T/ra"
        if [ -n "$OLDW" ]; then prep_old; else prep_b; fi
        timed "$B" >>"$T/b"; wait; receiver_cpu >>"$T/rb"
    done
    local ta tb ra ca ci rc=""
    ta=$(cut -d' ' -f1 "$T/a" | median)
    tb=$(cut -d' ' -f1 "$T/b" | median)
    ra=$(cut -d' ' -f2 "$T/a" | median)
    ca=$(cut -d' ' -f3 "$T/a" | median)
    ci=$(interval "$T/a" "$T/b")
    if [ -s "$T/ra" ] && [ -s "$T/rb" ]; then
        # each end's CPU: the senders' (GNU time over the command) and the
        # receivers', as ratios with their intervals
        cut -d' ' -f3 "$T/a" >"$T/sa"; cut -d' ' -f3 "$T/b" >"$T/sb"
        rc="; CPU, sender $(ratio "$T/sa" "$T/sb") ($(interval "$T/sa" "$T/sb")),"
        rc="$rc receiver $(ratio "$T/ra" "$T/rb") ($(interval "$T/ra" "$T/rb"))"
    fi
    NAME=$name TARGET=$target CI=$ci RC=$rc awk -v ta="$ta" -v tb="$tb" -v ra="$ra" -v ca="$ca" \
        'BEGIN { printf "| %s | %.2f s | %.2f s | **%.2f** (%s) | %s | %.0f MiB, %.1f s%s |\n",
                 ENVIRON["NAME"], ta, tb, ta / tb, ENVIRON["CI"], ENVIRON["TARGET"], ra / 1024, ca,
                 ENVIRON["RC"] }' </dev/null
}

# prep_old: with OLD, the reference is A's command run by the old weir
# (prep_a's listener too)
prep_old() {
    local keep=$A
    W=$OLDW
    prep_a
    B=${A//$NEWW/$OLDW}
    W=$NEWW
    A=$keep
}

# receiver_cpu: the CPU seconds of the last listener started under RCPU
receiver_cpu() {
    [ -s "$T/lcpu" ] && awk '{ printf "%.2f\n", $1 + $2 }' "$T/lcpu"
    rm -f "$T/lcpu"
}

# ratio A B: the ratio of the medians of the first columns of files A and B
ratio() {
    awk -v a="$(cut -d' ' -f1 "$1" | median)" -v b="$(cut -d' ' -f1 "$2" | median)" \
        'BEGIN { printf "%.2f", a / b }' </dev/null
}

# resume_ab LABEL FROM "LISTENER-OPTIONS" "SENDER-OPTIONS" [A-OPTIONS]: what
# being able to resume costs when nothing breaks.  A sender reading FROM
# (file: -i F; pipe: cat F |) to a listener, both allowed to resume (or
# both with A-OPTIONS), against the same with --reconnect 0 on both ends;
# "nothing measurable" is the target, so three times RUNS runs a side, and
# each end's CPU beside the wall time
resume_ab() {
    RA_FROM=$2 RA_L=$3 RA_S=$4 RA_A=${5:-}
    prep_a() { start_weir_listener $RA_L $RA_A; A=$(weir_send "$RA_FROM" $RA_S $RA_A); }
    prep_b() { start_weir_listener $RA_L --reconnect 0; B=$(weir_send "$RA_FROM" $RA_S --reconnect 0); }
    RUNS=$((RUNS * 3)) RCPU=1 run_case "$1 ($((RUNS * 3)) runs each)" \
        "${RA_TARGET:-nothing measurable: 1.00 within the interval}"
}

# weir_send FROM OPTIONS...: the command of a weir sender of $MIX to the
# listener at LP, reading a regular file (FROM file) or a pipe (pipe)
weir_send() {
    local from=$1
    shift
    if [ "$from" = pipe ]; then
        echo "cat $MIX | $W -q $* -O 127.0.0.1:$LP"
    else
        echo "$W -q $* -O 127.0.0.1:$LP -i $MIX"
    fi
}

# interval A B: the 95% interval of the ratio of the medians of the wall
# times in files A and B (first column), by resampling each side's runs
# with replacement (a percentile bootstrap, fixed seed, 4000 rounds).  With
# few runs it is wide: it says how far this machine's noise alone moves the
# ratio.
interval() {
    python3 - "$1" "$2" <<'PY'
import random, statistics, sys
a, b = ([float(l.split()[0]) for l in open(f) if l.strip()] for f in sys.argv[1:3])
rng = random.Random(1)
r = sorted(statistics.median(rng.choices(a, k=len(a))) /
           statistics.median(rng.choices(b, k=len(b))) for _ in range(4000))
print(f"{r[100]:.2f}–{r[3899]:.2f}")
PY
}

echo "| case ($SIZE, median of $RUNS) | weir | reference | ratio (95% interval) | target | weir peak RSS, CPU |"
echo "|---|---|---|---|---|---|"
# ---- the cases: each prints its rows of the table ---------------------------

case_pipe() {
    prep_a() { :; }; prep_b() { :; }
    A="cat $MIX | $W -q | cat >/dev/null"
    B="cat $MIX | cat | cat >/dev/null"
    run_case "\`cat F \\| weir \\| cat\` vs \`cat \\| cat \\| cat\`" "≤ 1.05"
}

case_pipe_mbuffer() {
    prep_a() { :; }; prep_b() { :; }
    A="cat $MIX | $W -q | cat >/dev/null"
    B="cat $MIX | mbuffer -q -m 512M | cat >/dev/null"
    run_case "\`cat F \\| weir \\| cat\` vs \`cat \\| mbuffer -m 512M \\| cat\`" "≤ 0.70"
}

case_file() {
    prep_a() { :; }; prep_b() { :; }
    A="$W -q -i $MIX -o /dev/null"
    B="cat $MIX >/dev/null"
    run_case "\`weir -i F -o /dev/null\` vs \`cat F >/dev/null\`" "≤ 1.30"
}

case_sync() {
    # what the promise of durability costs: fdatasync of a file output
    # (and fsync of its directory) against --no-sync; each run starts
    # with nothing dirty, so neither side pays for the other's writeback
    prep_a() { rm -f "$D/sync.out"; sync; }; prep_b() { rm -f "$D/sync.out"; sync; }
    A="$W -q -i $MIX -o $D/sync.out"
    B="$W -q --no-sync -i $MIX -o $D/sync.out"
    run_case "\`weir -i F -o file\` (flushed) vs \`--no-sync\`" "cost, no target"
    rm -f "$D/sync.out"
}

case_tcp_nc() {
    prep_a() { start_weir_listener; A="$W -q -O 127.0.0.1:$LP -i $MIX"; }
    prep_b() {
        local p; p=$("$TT" freeport)
        nc -l 127.0.0.1 "$p" >/dev/null & "$TT" waitlisten "$p" 5
        B="nc -N 127.0.0.1 $p <$MIX"
    }
    run_case "loopback \`weir -O\` → \`weir -I\` vs \`nc\` → \`nc -l\`" "≤ 1.00"
}

case_tcp_mbuffer() {
    prep_a() { start_weir_listener; A="$W -q -O 127.0.0.1:$LP -i $MIX"; }
    prep_b() {
        local p; p=$("$TT" freeport)
        mbuffer -q -I "$p" -o /dev/null 2>/dev/null & "$TT" waitlisten "$p" 5
        B="mbuffer -q -i $MIX -O 127.0.0.1:$p 2>/dev/null"
    }
    run_case "loopback weir vs \`mbuffer -O\` → \`mbuffer -I\`" "≤ 0.60"
}

case_tcp_iperf() {
    # the machine's limit: iperf3's loopback throughput for the same bytes
    : >"$T/a"; : >"$T/ib"
    for i in $(seq "$RUNS"); do
        start_weir_listener
        timed "$W -q -O 127.0.0.1:$LP -i $MIX" >>"$T/a"; wait
        p=$("$TT" freeport)
        iperf3 -s -1 -p "$p" >/dev/null 2>&1 & "$TT" waitlisten "$p" 5
        iperf3 -c 127.0.0.1 -p "$p" -n "$bytes" -f k 2>/dev/null \
            | awk '/receiver/ {for (i=1;i<=NF;i++) if ($i ~ /Kbits/) print $(i-1)*1000/8}' >>"$T/ib"
        wait
    done
    ta=$(cut -d' ' -f1 "$T/a" | median)
    ib=$(median <"$T/ib")
    awk -v b="$bytes" -v ta="$ta" -v ib="$ib" 'BEGIN {
        printf "| loopback weir vs `iperf3` (the machine'"'"'s limit) | %.2f GB/s | %.2f GB/s | **%.2f** of it | ≥ 0.80 | |\n",
               b / ta / 1e9, ib / 1e9, b / ta / ib }' </dev/null
}

case_lz4() {
    prep_a() { :; }; prep_b() { :; }
    A="$W -q -z -T 2 -i $MIX -o /dev/null"
    B="lz4 -q -1 -c $MIX >/dev/null"
    run_case "\`weir -z -T 2\` vs \`lz4 -1\` (mixed)" "≤ 0.55"
    A="$W -q -z -T 2 -i $RND -o /dev/null"
    B="lz4 -q -1 -c $RND >/dev/null"
    run_case "\`weir -z -T 2\` vs \`lz4 -1\` (random)" "≤ 0.55"
    wz=$("$W" -q -z -i "$MIX" | wc -c); lz=$(stat -c %s "$MIX.lz4")
    awk -v a="$wz" -v b="$lz" 'BEGIN {
        printf "| compressed size, weir -z vs lz4 -1 (mixed) | %d B | %d B | **%.3f** | within 2%% | |\n",
               a, b, a / b }' </dev/null
}

case_lz4d() {
    prep_a() { :; }; prep_b() { :; }
    A="$W -q -d -i $MIX.lz4 -o /dev/null"
    B="lz4 -q -d -c $MIX.lz4 >/dev/null"
    run_case "\`weir -d\` vs \`lz4 -d\` of an lz4 file" "≤ 0.80"
    "$W" -q -z -i "$MIX" -f -o "$T/mix.z.lz4"
    A="$W -q -d -i $T/mix.z.lz4 -o /dev/null"
    B="lz4 -q -d -c $T/mix.z.lz4 >/dev/null"
    run_case "\`weir -d\` vs \`lz4 -d\` of a weir -z file" "≤ 0.80"
    rm -f "$T/mix.z.lz4"
}

case_lz4_tcp() {
    prep_a() { start_weir_listener; A="$W -q -z -O 127.0.0.1:$LP -i $MIX"; }
    prep_b() {
        local p; p=$("$TT" freeport)
        bash -c "mbuffer -q -I $p 2>/dev/null | lz4 -q -d -c >/dev/null" & "$TT" waitlisten "$p" 5
        B="lz4 -q -1 -c $MIX | mbuffer -q -O 127.0.0.1:$p 2>/dev/null"
    }
    run_case "\`weir -z -O\` → \`weir -I\` vs \`lz4 \\| mbuffer\` → \`mbuffer \\| lz4 -d\`" "≤ 0.60"
}

case_posix() {
    # the portable build (-Dplatform=posix: no splice, no pipe sizes,
    # signals looked for between pauses) against the Linux build
    if [ ! -f build-bench-posix/build.ninja ]; then
        meson setup build-bench-posix -Dbuildtype=release -Dplatform=posix >/dev/null || exit 1
    fi
    ninja -C build-bench-posix >/dev/null || exit 1
    WP=$PWD/build-bench-posix/weir
    prep_a() { :; }; prep_b() { :; }
    A="cat $MIX | $WP -q | cat >/dev/null"
    B="cat $MIX | $W -q | cat >/dev/null"
    run_case "POSIX build vs Linux build: \`cat F \\| weir \\| cat\`" "≤ 1.25"
    prep_a() { W=$WP start_weir_listener; A="$WP -q -O 127.0.0.1:$LP -i $MIX"; }
    prep_b() { start_weir_listener; B="$W -q -O 127.0.0.1:$LP -i $MIX"; }
    run_case "POSIX build vs Linux build: loopback \`weir -O\` → \`weir -I\`" "≤ 1.25"
    A="$WP -q -z -T 2 -i $MIX -o /dev/null"
    B="$W -q -z -T 2 -i $MIX -o /dev/null"
    prep_a() { :; }; prep_b() { :; }
    run_case "POSIX build vs Linux build: \`weir -z -T 2\` (mixed)" "≤ 1.25"
    prep_a() { W=$WP start_weir_listener $KEY; A="$WP -q $KEY -O 127.0.0.1:$LP -i $MIX"; }
    prep_b() { start_weir_listener $KEY; B="$W -q $KEY -O 127.0.0.1:$LP -i $MIX"; }
    run_case "POSIX build vs Linux build: keyed loopback" "≤ 1.25"
}

case_enc_ssh() {
    prep_a() { start_weir_listener $KEY; A="$W -q $KEY -O 127.0.0.1:$LP -i $MIX"; }
    prep_b() { B="$SSH 'cat >/dev/null' <$MIX"; }
    run_case "encrypted loopback \`weir --key-file\` vs \`ssh -c aes128-gcm 'cat >/dev/null'\`" "≤ 0.30"
}

case_enc_plain() {
    prep_a() { start_weir_listener $KEY; A="$W -q $KEY -O 127.0.0.1:$LP -i $MIX"; }
    prep_b() { start_weir_listener; B="$W -q -O 127.0.0.1:$LP -i $MIX"; }
    run_case "encrypted weir vs the same without a key" "≤ 2.0"
}

case_enc_z() {
    prep_a() { start_weir_listener $KEY; A="$W -q -z $KEY -O 127.0.0.1:$LP -i $MIX"; }
    prep_b() { B="lz4 -q -1 -c $MIX | $SSH 'lz4 -q -d -c >/dev/null'"; }
    run_case "\`weir -z --key-file\` vs \`lz4 -1 \| ssh -c aes128-gcm 'lz4 -d'\`" "≤ 0.35"
}

case_ssh_z() {
    # one command over ssh against syncoid's recipe, both pushing the same data
    prep_a() { A="$W -q -z $WSSH --remote 'cat >/dev/null' -i $MIX"; }
    prep_b() { B="lz4 -q -1 -c $MIX | mbuffer -q -s 128k -m 16M | $SSH 'mbuffer -q -s 128k -m 16M | lz4 -q -d -c >/dev/null'"; }
    run_case "\`weir -z --ssh\` push vs \`lz4 -1 | mbuffer | ssh -c aes128-gcm 'mbuffer | lz4 -d'\` (syncoid)" "≤ 0.35"
}

case_ssh_plain() {
    prep_a() { A="$W -q $WSSH --remote 'cat >/dev/null' -i $MIX"; }
    prep_b() { B="$SSH 'cat >/dev/null' <$MIX"; }
    run_case "\`weir --ssh\` push vs \`ssh -c aes128-gcm 'cat >/dev/null'\`" "≤ 0.35"
}

case_ssh_tunnel() {
    prep_a() { A="$W -q --ssh-tunnel $WSSH --remote 'cat >/dev/null' -i $MIX"; }
    prep_b() { B="$SSH 'cat >/dev/null' <$MIX"; }
    run_case "\`weir --ssh --ssh-tunnel\` vs \`ssh -c aes128-gcm 'cat >/dev/null'\`" "≤ 1.10"
}

case_resume_cuts() {
    # reconnecting: 5 resets in the transfer against none, both through
    # the cut proxy (a userspace relay, slower than loopback itself)
    start_cut_proxy() {   # start_cut_proxy CUTS: a listener behind the proxy; sets PP, PX
        start_weir_listener
        rm -f "$T/px"
        "$TT" cutproxy "$LP" "$1" $((bytes / 6)) reset >"$T/px" &
        PX=$!
        for _ in $(seq 200); do grep -q "listening on" "$T/px" 2>/dev/null && break; sleep 0.01; done
        PP=$(grep -o 'listening on [0-9]*' "$T/px" | grep -o '[0-9]*$')
    }
    prep_a() { start_cut_proxy 5; A="$W -q -O 127.0.0.1:$PP -i $MIX; kill $PX"; }
    prep_b() { start_cut_proxy 0; B="$W -q -O 127.0.0.1:$PP -i $MIX; kill $PX"; }
    run_case "weir through the cut proxy, 5 resets vs none" "≤ 1.30"
}

case_resume_cost() {
    # the held buffer, the confirmations, the first round trip: a
    # regular file is read again for what the receiver lacks, so its
    # sender holds nothing
    resume_ab "loopback weir (may resume) vs \`--reconnect 0\` on both ends" file "" ""
}

case_resume_cost_pipe() {
    # a pipe cannot be read again: the sender holds what is unconfirmed
    resume_ab "from a pipe: may resume (holds) vs \`--reconnect 0\` on both ends" pipe "" ""
}

case_resume_cost_z() {
    # -z: the compressed stream cannot be made again without compressing
    # again, so the sender holds it even from a regular file
    resume_ab "\`-z\`: may resume (holds) vs \`--reconnect 0\` on both ends" file "" "-z"
}

case_resume_cost_key() {
    # a key: sealed records carry no sums of their own to check a file
    # read again against, so the sender holds them
    resume_ab "\`--key-file\`: may resume (holds) vs \`--reconnect 0\` on both ends" file \
        "$KEY" "$KEY"
}

case_resume_window() {
    # a short --readahead beside a connection that may resume: the
    # reader must stay ahead of the hold, not level with it (it waited
    # for each confirmation: 4.8 times as long)
    prep_a() { start_weir_listener; A="$W -q --readahead 2M -O 127.0.0.1:$LP -i $MIX"; }
    prep_b() { start_weir_listener --reconnect 0; B="$W -q --readahead 2M --reconnect 0 -O 127.0.0.1:$LP -i $MIX"; }
    run_case "\`--readahead 2M\`, may resume vs \`--reconnect 0\` on both ends" "≤ 1.30"
}

case_resume_noise() {
    # the same command on both sides: the interval this machine's noise
    # alone gives a ratio, for resume_cost's
    resume_ab "noise: \`--reconnect 0\` vs itself, as resume_cost" file "" "" "--reconnect 0"
}

case_enc_cpu() {
    local t i c e   # c: a figure here, not the case (the loop's)
    # the sending side alone: its CPU seconds per GiB with one and two workers
    for t in 1 2; do
        : >"$T/cpu"
        for i in $(seq "$RUNS"); do
            start_weir_listener $KEY
            /usr/bin/time -o "$T/time" -f "%U %S %e" "$W" -q -T "$t" $KEY -O "127.0.0.1:$LP" -i "$MIX"
            wait
            awk -v b="$bytes" '{ printf "%.3f %.3f\n", ($1 + $2) / (b / 1073741824), $3 }' "$T/time" >>"$T/cpu"
        done
        c=$(cut -d' ' -f1 "$T/cpu" | median); e=$(cut -d' ' -f2 "$T/cpu" | median)
        printf '| encrypted sender, -T %s: CPU per GiB (wall) | %s s (%s s) | | | scales with -T | |\n' "$t" "$c" "$e"
    done
}

case_rss() {
    /usr/bin/time -o "$T/rss" -f %M bash -c "cat $MIX | $W -q -m 1G >/dev/null"
    awk -v s="$SIZE" -v r="$(cat "$T/rss")" 'BEGIN {
        printf "| peak RSS, %s through `weir -m 1G`, consumer keeps up | %.1f MiB | | | ≤ 64 MiB | |\n",
               s, r / 1024 }' </dev/null
}

case_link() {
    # a link test's one-way figures against iperf3's, side by side over
    # loopback, alternately: 128 KiB writes (iperf3's default length),
    # LDUR seconds each (default 2), with and against the way iperf3 -R
    # measures the other direction
    LDUR=${LDUR:-2}
    : >"$T/lo"; : >"$T/li"; : >"$T/io"; : >"$T/ii"
    for i in $(seq "$RUNS"); do
        start_weir_listener --allow-link-test
        lpid=$!
        "$W" -q --link-test -O "127.0.0.1:$LP" --duration "$LDUR" --sweep 128k \
            --progress=json="$T/lj" >/dev/null
        kill "$lpid" 2>/dev/null; wait
        for d in out in; do
            grep -o "\"direction\":\"$d\",\"figure\":{[^}]*" "$T/lj" \
                | grep -o '"rate":[0-9]*' | cut -d: -f2 >>"$T/l${d:0:1}"
        done
        for r in "" -R; do
            p=$("$TT" freeport)
            iperf3 -s -1 -p "$p" >/dev/null 2>&1 & "$TT" waitlisten "$p" 5
            iperf3 -c 127.0.0.1 -p "$p" -t "$LDUR" -l 128K $r -f k 2>/dev/null \
                | awk '/receiver/ {for (i=1;i<=NF;i++) if ($i ~ /Kbits/) print $(i-1)*1000/8}' \
                >>"$T/i$([ -z "$r" ] && echo o || echo i)"
            wait
        done
    done
    for d in o i; do
        echo "# link $d, bytes/s each run: weir $(tr '\n' ' ' <"$T/l$d")/ iperf3 $(tr '\n' ' ' <"$T/i$d")" >&2
        lw=$(median <"$T/l$d"); li=$(median <"$T/i$d")
        awk -v a="$lw" -v b="$li" -v d="$d" -v s="$LDUR" 'BEGIN {
            printf "| loopback `weir --link-test` %s vs `iperf3%s` (128 KiB writes, %s s) | %.2f GB/s | %.2f GB/s | **%.2f** | 0.90 to 1.10 | |\n",
                   d == "o" ? "out" : "in", d == "o" ? "" : " -R", s, a / 1e9, b / 1e9, a / b }' </dev/null
    done
}

case_latency() {
    lw=$("$TT" latency 50 "$W" -q)
    lc=$("$TT" latency 50 cat)
    printf '| first line out after it went in (median of 50) | %s µs | %s µs (cat) | | ≤ 10 ms | |\n' \
        "$lw" "$lc"
}

# one_case NAME: the rows of case NAME (case_NAME above); an unknown name prints none
one_case() {
    declare -F "case_$1" >/dev/null && "case_$1"
}

for c in $CASES; do
    case "${OLDW:+old} $c" in
    "old posix") echo "# posix: no old-weir form" >&2 ;;
    "old tcp_iperf" | "old enc_cpu" | "old rss" | "old link" | "old latency")
        # figures of their own: for the new weir, then the old
        one_case "$c" | sed 's/^| /| new: /'
        W=$OLDW
        one_case "$c" | sed 's/^| /| old: /'
        W=$NEWW ;;
    *) one_case "$c" ;;
    esac
done
