#!/bin/bash
# Purpose: holes travel as holes.  A regular file is read by its data extents
# and a regular-file output gets the same holes: at the start, in the middle,
# at the end (its size set at the end), a file that is all hole, extents
# smaller than a block and across block boundaries; the copy is identical and
# takes the same space.  --sparse makes zeros from a pipe holes; a pipe or an
# appending output is written the zeros.  -z files and pipes stay one LZ4 frame
# that stock lz4 -d reads whole, zeros and all.  Over TCP, with -z and with a
# key, the holes cross as records; a recorded stream with holes decodes with
# weir -d, and its cuts and flips are exit 6 with a message.  ftruncate and
# SEEK_DATA failing, and a file system without SEEK_DATA, are handled.
. "$(dirname "$0")/lib.sh"
: "${FAULTSHIM:?FAULTSHIM must name the fault shim}"
command -v lz4 >/dev/null || fail "lz4 is not installed (scripts/deps.sh installs it)"

blocks() { sync "$1"; stat -c %b "$1"; }

# sparse FILE SIZE [OFFSET:LENGTH ...]: FILE of SIZE bytes, holes everywhere
# but at the random data written at each OFFSET
sparse() {
    local f=$1 size=$2 at len
    shift 2
    rm -f "$f"
    truncate -s "$size" "$f"
    for x in "$@"; do
        at=${x%:*}
        len=${x#*:}
        head -c "$len" /dev/urandom | dd of="$f" bs=64k seek="$at" oflag=seek_bytes \
            conv=notrunc status=none
    done
    sync "$f"
}

# alike IN COPY LABEL: the same bytes, and the same space taken (a block of
# slack for the file system's own bookkeeping)
alike() {
    same "$1" "$2" "$3: identical"
    local a b
    a=$(blocks "$1")
    b=$(blocks "$2")
    [ "$b" -le $((a + 8)) ] && [ "$b" -ge $((a - 8)) ] \
        || fail "$3: the copy takes $b blocks, the input $a"
    ok "$3: the copy takes $b blocks, the input $a"
}

# the file system here must have holes for the checks to mean anything
truncate -s 1M "$TMP/probe"
[ "$(blocks "$TMP/probe")" -eq 0 ] || fail "$TMP is on a file system without holes"

sparse "$TMP/start" 3M 2097152:1048576
sparse "$TMP/middle" 5M 0:1048576 4194304:1048576
sparse "$TMP/end" 9M 0:65536
sparse "$TMP/all" 7M
sparse "$TMP/small" 1M 5000:100 8190:10 65535:2 700000:4096
sparse "$TMP/straddle" 3M 4000:9000 1048570:20 2097150:300000
for f in start middle end all small straddle; do
    expect 0 "$f: -i FILE -o COPY" "$WEIR" -i "$TMP/$f" -o "$TMP/$f.copy"
    alike "$TMP/$f" "$TMP/$f.copy" "$f"
done
has_msg "$TMP/err" "of which" "the summary counts the holes apart"
"$WEIR" -i "$TMP/all" -f -o "$TMP/all.copy" 2>"$TMP/err"
has_msg "$TMP/err" "summary: 7.00 MiB, of which 7.00 MiB holes, in" "all hole: all of it holes"
[ "$(stat -c %s "$TMP/end.copy")" -eq 9437184 ] && ok "a trailing hole keeps the copy's size"

# two outputs at once, and a digest, which is taken over the zeros
expect 0 "two outputs" "$WEIR" -i "$TMP/straddle" -o "$TMP/two.a" -o "$TMP/two.b"
alike "$TMP/straddle" "$TMP/two.a" "two outputs, the first"
alike "$TMP/straddle" "$TMP/two.b" "two outputs, the second"
expect 0 "-H over holes" "$WEIR" -H -i "$TMP/middle" -o /dev/null
has_msg "$TMP/err" "md5 hash: $(md5sum <"$TMP/middle" | cut -d' ' -f1)" "-H: the digest of the zeros too"
# the output is the input: refused, the file untouched
before=$(sum "$TMP/middle")
expect 2 "the output is the input" "$WEIR" -f -i "$TMP/middle" -o "$TMP/middle"
[ "$(sum "$TMP/middle")" = "$before" ] && [ "$(blocks "$TMP/middle")" -eq 4096 ] \
    && ok "the output is the input: the file is untouched, holes and all"

# standard output that is a file, and one opened for appending: an append
# lands at the end whatever weir seeks, so it is written the zeros
expect 0 "stdout to a file" sh -c '"$0" -i "$1" >"$2"' "$WEIR" "$TMP/middle" "$TMP/out1"
alike "$TMP/middle" "$TMP/out1" "stdout to a file"
printf 'head' >"$TMP/out2"
expect 0 "stdout appending" sh -c '"$0" -i "$1" >>"$2"' "$WEIR" "$TMP/middle" "$TMP/out2"
{ printf 'head'; cat "$TMP/middle"; } >"$TMP/want2"
same "$TMP/want2" "$TMP/out2" "appending: the zeros are written after what was there"
[ "$(blocks "$TMP/out2")" -ge 10000 ] && ok "appending: the zeros take their space"

# a pipe gets the zeros; a pipe read with --sparse gives the holes back
expect 0 "a pipe output" sh -c '"$0" -i "$1" | cat >"$2"' "$WEIR" "$TMP/middle" "$TMP/piped"
same "$TMP/middle" "$TMP/piped" "a pipe output: the zeros arrive"
expect 0 "--sparse on a pipe" sh -c 'cat "$1" | "$0" --sparse -o "$2"' "$WEIR" \
    "$TMP/straddle" "$TMP/sp.copy"
alike "$TMP/straddle" "$TMP/sp.copy" "--sparse on a pipe"
expect 0 "a pipe without --sparse" sh -c 'cat "$1" | "$0" -o "$2"' "$WEIR" "$TMP/middle" \
    "$TMP/nosp.copy"
same "$TMP/middle" "$TMP/nosp.copy" "a pipe without --sparse: identical"
[ "$(blocks "$TMP/nosp.copy")" -ge 10000 ] && ok "a pipe without --sparse: zeros stay data"
gen "$TMP/zeros" 3000000 zero
expect 0 "--sparse on allocated zeros" "$WEIR" --sparse -i "$TMP/zeros" -o "$TMP/zeros.copy"
same "$TMP/zeros" "$TMP/zeros.copy" "--sparse: allocated zeros: identical"
[ "$(blocks "$TMP/zeros.copy")" -eq 0 ] && ok "--sparse: allocated zeros become a hole"
gen "$TMP/mixed" 2000000 mixed
expect 0 "--sparse on mixed data" sh -c 'cat "$1" | "$0" --sparse -s 64k -o "$2"' "$WEIR" \
    "$TMP/mixed" "$TMP/mixed.copy"
same "$TMP/mixed" "$TMP/mixed.copy" "--sparse on mixed data: identical"

# durability: -c writes with O_DSYNC; the size is set and synced at the end
expect 0 "-c (O_DSYNC)" "$WEIR" -c -i "$TMP/end" -o "$TMP/end.dsync"
alike "$TMP/end" "$TMP/end.dsync" "-c"
expect 2 "--sparse with -d" "$WEIR" --sparse -d -i "$TMP/end"
has_msg "$TMP/err" "--sparse with -d" "--sparse with -d says why"

# -z: one LZ4 frame, the holes as compressed zeros, for stock lz4
expect 0 "-z to a file" "$WEIR" -z -i "$TMP/straddle" -o "$TMP/s.lz4"
lz4 -q -d -c "$TMP/s.lz4" >"$TMP/s.lz4.out" || fail "lz4 -d: exit $?"
same "$TMP/straddle" "$TMP/s.lz4.out" "-z file: stock lz4 -d reads the holes as zeros"
[ "$(stat -c %s "$TMP/s.lz4")" -lt 400000 ] && ok "-z file: the zeros compress"
expect 0 "-z to a pipe" sh -c '"$0" -z -i "$1" | lz4 -q -d -c >"$2"' "$WEIR" "$TMP/all" \
    "$TMP/all.lz4.out"
same "$TMP/all" "$TMP/all.lz4.out" "-z pipe, all hole: stock lz4 -d"
expect 0 "-z --sparse from a pipe" sh -c 'cat "$1" | "$0" -z --sparse -s 64k | lz4 -q -d -c >"$2"' \
    "$WEIR" "$TMP/middle" "$TMP/mid.lz4.out"
same "$TMP/middle" "$TMP/mid.lz4.out" "-z --sparse pipe: stock lz4 -d"
expect 0 "weir -d of the -z file" "$WEIR" -d -i "$TMP/s.lz4" -o "$TMP/s.d"
same "$TMP/straddle" "$TMP/s.d" "weir -d of the -z file"
listen "$TMP/raw.lz4" "$TMP/raw.lerr" --raw -q
expect 0 "-z --raw -O" "$WEIR" -q -z --raw -i "$TMP/middle" -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 20
lz4 -q -d -c "$TMP/raw.lz4" >"$TMP/raw.out" || fail "lz4 -d of the --raw frame: exit $?"
same "$TMP/middle" "$TMP/raw.out" "-z --raw connection: stock lz4 -d"

# weir to weir: the holes cross as records, in clear, compressed, encrypted
KEY=$TMP/key
"$WEIR" -q --genkey "$KEY" --key-id t || fail "--genkey"
tcp_case() {   # tcp_case LABEL FILE [SENDER OPTIONS...]
    local label=$1 f=$2 kopt=()
    shift 2
    for a in "$@"; do [ "$a" = --key-file ] && kopt=(--key-file "$KEY"); done
    listen /dev/null "$TMP/l.err" "${kopt[@]}" -f -o "$TMP/tcp.copy"
    expect 0 "$label: sender" "$WEIR" -q "$@" -i "$TMP/$f" -O "127.0.0.1:$LPORT"
    wait_bounded "$LPID" 30
    [ "$STATUS" -eq 0 ] || { cat "$TMP/l.err"; fail "$label: receiver exit $STATUS"; }
    alike "$TMP/$f" "$TMP/tcp.copy" "$label"
}
tcp_case "over TCP" straddle
has_msg "$TMP/l.err" "holes" "the receiver counts the holes apart"
tcp_case "over TCP, all hole" all
tcp_case "over TCP with -z" middle -z
tcp_case "over TCP with -z, small extents" small -z -s 4k
tcp_case "over TCP with a key" middle --key-file "$KEY"
tcp_case "over TCP with a key and -z" straddle --key-file "$KEY" -z
tcp_case "over TCP with a key, one worker" end --key-file "$KEY" -T 1
listen /dev/null "$TMP/l.err" -f -o "$TMP/tcp.copy"
expect 0 "--sparse pipe over TCP" sh -c 'cat "$1" | "$0" -q --sparse -O "$2"' "$WEIR" \
    "$TMP/middle" "127.0.0.1:$LPORT"
wait_bounded "$LPID" 30
alike "$TMP/middle" "$TMP/tcp.copy" "--sparse pipe over TCP"
listen /dev/null "$TMP/l.err" --raw --sparse -f -o "$TMP/tcp.copy"
expect 0 "--raw sender of zeros" "$WEIR" -q --raw -i "$TMP/zeros" -O "127.0.0.1:$LPORT"
wait_bounded "$LPID" 30
same "$TMP/zeros" "$TMP/tcp.copy" "-I --raw --sparse: plain bytes, identical"
[ "$(blocks "$TMP/tcp.copy")" -eq 0 ] && ok "-I --raw --sparse: zeros from a plain sender become a hole"
rm -f "$TMP/lp.err"
{ "$WEIR" -I 0 2>"$TMP/lp.err" | cat >"$TMP/tcp.piped"; } &
PIDS+=($!)
pipe_rx=$!
wait_for "$TMP/lp.err" "listening on" 10
expect 0 "receiver into a pipe" "$WEIR" -q -i "$TMP/end" -O \
    "127.0.0.1:$(grep -o 'listening on .*' "$TMP/lp.err" | grep -o '[0-9]*$')"
wait_bounded "$pipe_rx" 30
same "$TMP/end" "$TMP/tcp.piped" "a receiver writing a pipe writes the zeros"

# a recorded stream with holes: weir -d decodes it; cuts and flips are exit 6
weir_stream "$TMP/middle" "$TMP/ws"
holes_at=$(LC_ALL=C grep -obUaP '\x57\x2a\x4d\x18\x20\x00\x00\x00\x5a' "$TMP/ws" | cut -d: -f1)
z=$(echo "$holes_at" | head -n1)
[ -n "$z" ] || fail "the recorded stream has no hole record"
ok "the recorded stream carries hole records (at $(echo $holes_at))"
[ "$(od -An -tu1 -j 13 -N 1 "$TMP/ws" | tr -d ' ')" -eq 2 ] && ok "its header says version 2"
expect 0 "weir -d of a stream with holes" "$WEIR" -d -i "$TMP/ws" -o "$TMP/ws.out"
alike "$TMP/middle" "$TMP/ws.out" "weir -d of a stream with holes"
decode_fails() {   # decode_fails FILE LABEL TEXT
    "$WEIR" -q -d -i "$1" -f -o "$TMP/dout" 2>"$TMP/err"
    local st=$?
    [ "$st" -eq 6 ] || { cat "$TMP/err"; fail "$2: exit $st, want 6"; }
    has_msg "$TMP/err" "$3" "$2: exit 6, '$3'"
}
len=$(stat -c %s "$TMP/ws")
for cut in $((z + 4)) $((z + 20)) $((z + 39)) $((z + 40)) $((len - 1)); do
    head -c "$cut" "$TMP/ws" >"$TMP/cut"
    decode_fails "$TMP/cut" "cut at $cut (hole record at $z)" "truncated weir stream"
done
flip() {   # flip OFFSET -> $TMP/f
    cp "$TMP/ws" "$TMP/f"
    flip_byte "$TMP/f" "$1"
}
flip $((z + 17)); decode_fails "$TMP/f" "a flipped hole length" "checksum mismatch"
flip $((z + 24)); decode_fails "$TMP/f" "a flipped hole number" "checksum mismatch"
flip $((z + 9)); decode_fails "$TMP/f" "a flipped reserved byte" "checksum mismatch"
cp "$TMP/ws" "$TMP/v1"
printf '\001' | dd of="$TMP/v1" bs=1 seek=13 conv=notrunc status=none
decode_fails "$TMP/v1" "a hole in a version 1 stream" "hole record in a version 1 weir stream"
weir_stream "$TMP/straddle" "$TMP/wsz" -z -s 64k
expect 0 "weir -d of a -z stream with holes" "$WEIR" -d -i "$TMP/wsz" -o "$TMP/wsz.out"
alike "$TMP/straddle" "$TMP/wsz.out" "weir -d of a -z stream with holes"
# a connection cut right after the first hole record
listen /dev/null "$TMP/l.err" --reconnect 0 -f -o "$TMP/cutc"
"$TESTTOOL" proxy "$LPORT" cut $((32 + z + 40)) >"$TMP/proxy" &
PIDS+=($!)
wait_for "$TMP/proxy" "proxy listening on" 10
"$WEIR" -q -i "$TMP/middle" -O "127.0.0.1:$(grep -o '[0-9]*$' "$TMP/proxy")" 2>"$TMP/serr"
sst=$?
wait_bounded "$LPID" 30
[ "$STATUS" -eq 6 ] && [ "$sst" -ne 0 ] || { cat "$TMP/l.err" "$TMP/serr"; fail "cut after a hole: receiver $STATUS, sender $sst"; }
has_msg "$TMP/l.err" "truncated weir stream" "a connection cut after a hole: receiver exit 6, sender $sst"

# faults: the size cannot be set; the holes cannot be looked for; a file
# system that cannot say where its holes are (everything is read)
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0"
shim() { WEIR_FAULT=$1 LD_PRELOAD=$FAULTSHIM "${@:2}"; }
expect 4 "ftruncate fails" shim ftruncate_efbig=1 "$WEIR" -i "$TMP/end" -f -o "$TMP/ft"
has_msg "$TMP/err" "output $TMP/ft: ftruncate to 9437184 bytes" "ftruncate failing is named"
expect 3 "SEEK_DATA fails" shim seek_data_eio=1 "$WEIR" -i "$TMP/end" -f -o "$TMP/sd"
has_msg "$TMP/err" "input $TMP/end: lseek (looking for its holes): Input/output error" \
    "SEEK_DATA failing is named"
expect 0 "no SEEK_DATA" shim seek_data_einval=1 "$WEIR" -i "$TMP/middle" -f -o "$TMP/sd"
same "$TMP/middle" "$TMP/sd" "no SEEK_DATA: everything is read, and the copy is identical"
done_testing
