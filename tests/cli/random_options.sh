#!/bin/bash
# Purpose: no combination of -m -s -b -P -p -T -z -d -r -R hangs or changes a
# byte.  Random combinations run through pipes, -z | -d, .lz4 decoding and
# loopback TCP, each with a checksum on arrival and a time bound.
#
#   WEIR_RANDOM_SECS=N   how long to keep drawing combinations (default 20,
#                        less under the sanitizers); longer on demand
#   WEIR_RANDOM_SEED=S   replay one sequence (each run prints its seed)
. "$(dirname "$0")/lib.sh"
secs=${WEIR_RANDOM_SECS:-20}
[ -n "${WEIR_SANITIZED:-}" ] && secs=${WEIR_RANDOM_SECS:-12}
seed=${WEIR_RANDOM_SEED:-$(( $(date +%s) % 100000 ))}
RANDOM=$seed
echo "# seed $seed, $secs s (replay: WEIR_RANDOM_SEED=$seed)"
sizes=(0 1 15 16 17 1000 65535 65536 65537 1048577 3000000)
kinds=(random text mixed)
for k in "${kinds[@]}"; do gen "$TMP/src.$k" 3000000 "$k"; done
pick() { local a=("$@"); echo "${a[RANDOM % ${#a[@]}]}"; }

# buffer_opts: a valid random -m/-s/-b triple, -P, -p, -T, -r/-R
buffer_opts() {
    local s nb form opts=()
    s=$(pick 16 100 1000 4k 64k 1M 4M)
    nb=$(pick 2 3 4 7 16 100)
    local bytes
    case $s in *k) bytes=$(( ${s%k} * 1024 )) ;; *M) bytes=$(( ${s%M} << 20 )) ;; *) bytes=$s ;; esac
    [ $((bytes * nb)) -gt $((256 << 20)) ] && nb=2
    form=$(pick ms bs mb m)
    case $form in
    ms) opts+=(-m $((bytes * nb)) -s "$s") ;;
    bs) opts+=(-b "$nb" -s "$s") ;;
    mb) [ $((bytes * nb / nb)) -ge 16 ] && opts+=(-m $((bytes * nb)) -b "$nb") ;;
    m) opts+=(-m "$(pick 2M 8M 64M)") ;;
    esac
    [ $((RANDOM % 3)) -eq 0 ] && opts+=(-P "$(pick 0 1 50 90 99 100)")
    [ $((RANDOM % 3)) -eq 0 ] && opts+=(-p "$(pick 0 10 20 50 90 100)")
    [ $((RANDOM % 2)) -eq 0 ] && opts+=(-T "$(pick 1 2 3)")
    [ $((RANDOM % 5)) -eq 0 ] && opts+=(-r "$(pick 20M 60M)")
    [ $((RANDOM % 5)) -eq 0 ] && opts+=(-R "$(pick 20M 60M)")
    echo "${opts[@]}"
}

runs=0
end=$(( $(date +%s) + secs ))
while [ "$(date +%s)" -lt "$end" ]; do
    size=$(pick "${sizes[@]}")
    kind=$(pick "${kinds[@]}")
    head -c "$size" "$TMP/src.$kind" >"$TMP/in"
    a=$(buffer_opts)
    b=$(buffer_opts)
    mode=$(pick pass pass zd zd lz4 tcp tcpz)
    rm -f "$TMP/out"
    case $mode in
    pass) cmd="\"$WEIR\" -q $a <\"$TMP/in\" >\"$TMP/out\"" ;;
    zd) cmd="\"$WEIR\" -q -z $a <\"$TMP/in\" | \"$WEIR\" -q -d $b >\"$TMP/out\"" ;;
    lz4)
        # lz4 1.9.4 itself fails on some incompressible inputs with -B4
        # (dstMaxSize_tooSmall): draw again rather than test nothing
        lz4 -q -c $(pick -B4 -B5 -B6 -B7 '-B4 -BD' '-B4 -BX' '-B5 -BD') "$TMP/in" \
            >"$TMP/in.lz4" 2>/dev/null || continue
        cmd="\"$WEIR\" -q -d $b <\"$TMP/in.lz4\" >\"$TMP/out\"" ;;
    tcp|tcpz)
        z=; [ "$mode" = tcpz ] && z=-z
        # the previous run's listener file goes first: its port is stale
        cmd="rm -f \"$TMP/l\"; \"$WEIR\" -I 0 $b -o \"$TMP/out\" 2>\"$TMP/l\" & l=\$!;
             for i in \$(seq 200); do grep -q 'listening on' \"$TMP/l\" && break; sleep 0.05; done;
             port=\$(grep -o 'listening on .*' \"$TMP/l\" | grep -o '[0-9]*\$');
             \"$WEIR\" -q $z $a -i \"$TMP/in\" -O 127.0.0.1:\$port; s=\$?; wait \$l; r=\$?;
             [ \$s -eq 0 ] && [ \$r -eq 0 ]" ;;
    esac
    runs=$((runs + 1))
    if ! timeout -k 5 60 bash -o pipefail -c "$cmd" 2>"$TMP/err"; then
        cat "$TMP/err" >&2
        fail "run $runs ($mode, $size bytes of $kind) failed or hung: a='$a' b='$b' (seed $seed)"
    fi
    [ "$(sum "$TMP/in")" = "$(sum "$TMP/out")" ] ||
        fail "run $runs ($mode, $size bytes of $kind) changed the data: a='$a' b='$b' (seed $seed)"
done
ok "$runs random combinations, every one complete and identical"
done_testing
