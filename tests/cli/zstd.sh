#!/bin/bash
# Purpose: weir --zstd compresses on every worker and writes a stream that is
# a zstd file: stock zstd -d, python's zstandard (streaming, across frames)
# and libarchive (bsdtar) read it, at awkward sizes, block sizes and every
# level, to a file, a pipe and a consumer command; weir -d reads it back
# verified, holes included (a sparse file's holes stay holes for weir and
# are zeros for zstd).  Between two weirs --zstd carries the same blocks,
# with and without a key, and resumes after cuts.  weir -d also reads any
# zstd encoder's data (one frame, several, concatenated files), and names
# every fault with exit 6: a cut inside a frame, a flipped byte in weir's
# zstd blocks and in plain zstd data, a window larger than -m; a
# decompression bomb stays inside -m.  --adapt round-trips too, moves its
# level up when the output is slow, stores when the output is faster than
# its lowest level, and stores random data.  Closed standard
# streams, the same file in and out, a full disk, SIGTERM halfway and an
# empty input end with their message and status.  Bad levels and
# ranges, and -z with --zstd, are usage errors (exit 2).
. "$(dirname "$0")/lib.sh"
command -v zstd >/dev/null || fail "zstd is not installed (scripts/deps.sh installs it)"
command -v bsdtar >/dev/null || fail "bsdtar is not installed (scripts/deps.sh: libarchive-tools)"
python_with zstandard python3-zstandard

# readers FILE INPUT LABEL: zstd -d, python (a streaming reader across
# frames) and weir -d each give INPUT's bytes back from FILE
readers() {
    local f=$1 in=$2 label=$3
    zstd -q -d -c "$f" >"$TMP/back.zstd" || fail "$label: zstd -d refused it"
    same "$in" "$TMP/back.zstd" "$label: zstd -d reads it"
    "$PY" - "$f" "$TMP/back.py" <<'EOF' || fail "$label: python zstandard refused it"
import sys, zstandard
with open(sys.argv[1], 'rb') as f, open(sys.argv[2], 'wb') as out:
    r = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        out.write(b)
EOF
    same "$in" "$TMP/back.py" "$label: python zstandard reads it"
    "$WEIR" -q -d -i "$f" -o "$TMP/back.weir" -f || fail "$label: weir -d refused it"
    same "$in" "$TMP/back.weir" "$label: weir -d reads it"
}

# 1. files at awkward sizes, block sizes and levels
gen "$TMP/mixed" "$(sized 9000001 3000001)" mixed
for spec in "1:default:" "4095:-s 4k:" "1048577:-s 1M:--zstd=1" "mixed:-s 64k:--zstd=-5" \
            "mixed:-s 5M:--zstd=19" "mixed:-T 1 -s 256k:--zstd=9"; do
    IFS=: read -r size opts level <<<"$spec"
    [ -n "$level" ] || level=--zstd
    if [ "$size" = mixed ]; then in=$TMP/mixed; else in=$TMP/in.$size; gen "$in" "$size"; fi
    [ "$opts" = default ] && opts=
    # shellcheck disable=SC2086
    expect 0 "$level $opts, $(stat -c %s "$in") bytes, to a file" \
        "$WEIR" -q $level $opts -i "$in" -o "$TMP/f.zst" -f
    readers "$TMP/f.zst" "$in" "$level $opts"
done
# every level, from the fastest to the slowest, at an awkward size
gen "$TMP/lv" 300007 mixed
for level in -100 -50 -10 -5 -1 $(seq 1 19); do
    "$WEIR" -q --zstd="$level" -s 64k -i "$TMP/lv" -o "$TMP/lv.zst" -f ||
        fail "--zstd=$level: exit $?"
    zstd -q -d -c "$TMP/lv.zst" | cmp -s - "$TMP/lv" || fail "--zstd=$level: zstd -d differs"
    "$WEIR" -q -d -i "$TMP/lv.zst" | cmp -s - "$TMP/lv" || fail "--zstd=$level: weir -d differs"
done
ok "every level from -100 to 19 round-trips through zstd -d and weir -d"
# the level shows: a higher level, a smaller file
"$WEIR" -q --zstd=1 -i "$TMP/mixed" -o "$TMP/l1.zst" -f || fail "--zstd=1"
"$WEIR" -q --zstd=12 -i "$TMP/mixed" -o "$TMP/l12.zst" -f || fail "--zstd=12"
[ "$(stat -c %s "$TMP/l12.zst")" -lt "$(stat -c %s "$TMP/l1.zst")" ] ||
    fail "--zstd=12 is no smaller than --zstd=1"
ok "level 12 writes a smaller file than level 1"

# 2. a pipe and a consumer command; libarchive reads a tar through it
tar cf "$TMP/t.tar" -C "$(dirname "$0")" . 2>/dev/null || fail "tar"
"$WEIR" -q --zstd -i "$TMP/t.tar" | zstd -q -d -c >"$TMP/pipe.out" || fail "--zstd to a pipe"
same "$TMP/t.tar" "$TMP/pipe.out" "--zstd to a pipe, zstd -d after it"
expect 0 "--zstd with a consumer command" \
    "$WEIR" -q --zstd -i "$TMP/t.tar" -- sh -c "cat >'$TMP/cmd.zst'"
readers "$TMP/cmd.zst" "$TMP/t.tar" "--zstd to a command"
[ "$(bsdtar -tf "$TMP/cmd.zst" | sort | sum /dev/stdin)" = \
  "$(tar tf "$TMP/t.tar" | sort | sum /dev/stdin)" ] || fail "bsdtar lists other files"
ok "libarchive (bsdtar) lists the tar inside"

# 3. holes: a sparse file's holes are records for weir, zeros for zstd
truncate -s 0 "$TMP/sparse"
truncate -s "$(sized 40M 12M)" "$TMP/sparse"
head -c 1000001 /dev/urandom | dd of="$TMP/sparse" bs=4096 seek=700 conv=notrunc status=none
head -c 333333 "$TMP/mixed" | dd of="$TMP/sparse" bs=4096 seek=2000 conv=notrunc status=none
expect 0 "--zstd of a sparse file" "$WEIR" -q --zstd -i "$TMP/sparse" -o "$TMP/sp.zst" -f
[ "$(stat -c %s "$TMP/sp.zst")" -lt 2000000 ] || fail "the holes took room in the .zst"
ok "the holes take almost no room in the .zst"
readers "$TMP/sp.zst" "$TMP/sparse" "a sparse file"
[ "$(du -k "$TMP/back.weir" | cut -f1)" -lt 4000 ] || fail "weir -d wrote the holes as data"
ok "weir -d leaves the holes as holes"
expect 0 "--zstd --sparse finds zeros in a pipe" \
    sh -c "cat '$TMP/sparse' | '$WEIR' -q --zstd --sparse -o '$TMP/sp2.zst' -f"
readers "$TMP/sp2.zst" "$TMP/sparse" "--sparse from a pipe"

# 4. between two weirs, with and without a key, holes included
for keyed in no yes; do
    key=()
    if [ "$keyed" = yes ]; then
        "$WEIR" -q --genkey "$TMP/k" --key-id z || fail "--genkey"
        key=(--key-file "$TMP/k")
    fi
    for in in "$TMP/mixed" "$TMP/sparse"; do
        listen "$TMP/l.out" "$TMP/l.err" -v "${key[@]}" -o "$TMP/recv" -f
        expect 0 "--zstd to a weir (key: $keyed, $(basename "$in"))" \
            "$WEIR" -q --zstd "${key[@]}" -O "127.0.0.1:$LPORT" -i "$in"
        wait_bounded "$LPID" 30
        [ "$STATUS" -eq 0 ] || { cat "$TMP/l.err" >&2; fail "the receiver exited $STATUS"; }
        same "$in" "$TMP/recv" "the receiver wrote it whole (key: $keyed)"
        has_msg "$TMP/l.err" "zstd" "the receiver's summary names zstd"
    done
done
# a connection cut twice under --zstd, from a file (read again) and from a
# pipe (held in the buffer): the stream resumes, whole
for from in file pipe; do
    listen "$TMP/l.out" "$TMP/l.err" -v -o "$TMP/recv" -f
    cut_proxy "$LPORT" 2 "$(sized 3000000 1000000)" reset
    if [ "$from" = file ]; then
        expect 0 "--zstd through two cuts, from a $from" \
            "$WEIR" -q --zstd -O "127.0.0.1:$PPORT" -i "$TMP/mixed"
    else
        expect 0 "--adapt through two cuts, from a $from" \
            sh -c "cat '$TMP/mixed' | '$WEIR' -q --adapt -O '127.0.0.1:$PPORT'"
    fi
    wait_bounded "$LPID" 30
    [ "$STATUS" -eq 0 ] || { cat "$TMP/l.err" >&2; fail "the receiver exited $STATUS"; }
    same "$TMP/mixed" "$TMP/recv" "resumed from a $from: the receiver wrote it whole"
    grep -q "cut 1" "$TMP/proxy" || fail "the proxy cut nothing"
    ok "the proxy cut the connection"
done
# --raw to a plain socket: the bytes are a zstd file
socat -u TCP-LISTEN:0,bind=127.0.0.1,reuseaddr OPEN:"$TMP/raw.zst",creat,trunc \
    2>"$TMP/socat.err" &
SPID=$!
PIDS+=("$SPID")
for _ in $(seq 100); do
    RPORT=$(ss -ltnp 2>/dev/null | grep "pid=$SPID," | grep -o '127.0.0.1:[0-9]*' | cut -d: -f2)
    [ -n "$RPORT" ] && break
    sleep 0.05
done
[ -n "$RPORT" ] || fail "socat did not listen"
expect 0 "--zstd --raw to socat" "$WEIR" -q --zstd --raw -O "127.0.0.1:$RPORT" -i "$TMP/mixed"
wait_bounded "$SPID" 10
readers "$TMP/raw.zst" "$TMP/mixed" "--zstd --raw to socat"

# 5. any zstd encoder's data: one frame, several, concatenated files, frames
# that declare their size (decoded in parallel), pzstd's
zstd -q -f -3 "$TMP/mixed" -o "$TMP/plain.zst" || fail "zstd"
expect 0 "weir -d of zstd's own file" "$WEIR" -q -d -i "$TMP/plain.zst" -o "$TMP/p.out" -f
same "$TMP/mixed" "$TMP/p.out" "weir -d of zstd's own file gives the data"
zstd -q -f -1 -B65536 "$TMP/t.tar" -o "$TMP/t.zst" || fail "zstd"
cat "$TMP/plain.zst" "$TMP/t.zst" "$TMP/f.zst" >"$TMP/cat.zst"
cat "$TMP/mixed" "$TMP/t.tar" >"$TMP/cat.want"
zstd -q -d -c "$TMP/f.zst" >>"$TMP/cat.want" || fail "zstd -d"
expect 0 "weir -d of concatenated zstd files" \
    sh -c "'$WEIR' -q -d <'$TMP/cat.zst' >'$TMP/cat.out'"
same "$TMP/cat.want" "$TMP/cat.out" "concatenated zstd files come back whole"
# frames that declare their size (python's one-shot compress, 1 MiB each)
# go whole to the workers; pzstd puts a skippable frame before each of its
# frames, which declare no size and are decoded in order
"$PY" - "$TMP/mixed" "$TMP/py.zst" >"$TMP/py.frames" <<'EOF' || fail "python could not write frames"
import sys, zstandard
data = open(sys.argv[1], "rb").read()
c = zstandard.ZstdCompressor(level=3, write_checksum=True)
with open(sys.argv[2], "wb") as f:
    for i in range(0, len(data), 1 << 20):
        frame = c.compress(data[i:i + (1 << 20)])
        print(f.tell(), len(frame))
        f.write(frame)
EOF
for t in 1 2; do
    expect 0 "weir -d -T $t of frames that declare their size" \
        "$WEIR" -q -d -T "$t" -i "$TMP/py.zst" -o "$TMP/py.out" -f
    same "$TMP/mixed" "$TMP/py.out" "weir -d -T $t of frames that declare their size: whole"
done
pzstd -q -p 2 -3 "$TMP/mixed" -o "$TMP/pz.zst" -f || fail "pzstd"
expect 0 "weir -d of pzstd's file (a skippable frame first)" \
    sh -c "'$WEIR' -q -d <'$TMP/pz.zst' >'$TMP/pz.out'"
same "$TMP/mixed" "$TMP/pz.out" "weir -d of pzstd's file gives the data"
cat "$TMP/pz.zst" "$TMP/py.zst" "$TMP/plain.zst" "$TMP/py.zst" >"$TMP/all.zst"
cat "$TMP/mixed" "$TMP/mixed" "$TMP/mixed" "$TMP/mixed" >"$TMP/all.want"
expect 0 "weir -d of frames of every kind, concatenated" \
    "$WEIR" -q -d -i "$TMP/all.zst" -o "$TMP/all.out" -f
same "$TMP/all.want" "$TMP/all.out" "frames of every kind come back whole, in order"
# the frame that holds the middle of the data: random bytes, so that every
# bit counts (a flipped bit in a frame of repeated text may be one the
# decoder never reads: zstd -d gives the same bytes)
read -r off len < <(sed -n "$(($(stat -c %s "$TMP/mixed") / 2 / 1048576 + 1))p" "$TMP/py.frames")
cp "$TMP/py.zst" "$TMP/pyflip.zst"
flip_byte "$TMP/pyflip.zst" $((off + len / 2))
expect 6 "a flipped byte in a frame that declares its size" \
    "$WEIR" -q -d -i "$TMP/pyflip.zst" -o /dev/null
has_msg "$TMP/err" "corrupt zstd data: the frame at byte $off does not decode" \
    "the frame is named by its byte"
head -c $((off + len / 2)) "$TMP/py.zst" >"$TMP/pycut.zst"
expect 6 "a cut inside a frame that declares its size" \
    "$WEIR" -q -d -i "$TMP/pycut.zst" -o /dev/null
has_msg "$TMP/err" "truncated zstd data at byte $((off + len / 2))" "the cut is named by its byte"

# 6. faults, each exit 6 with the cause named
head -c $(($(stat -c %s "$TMP/plain.zst") / 2)) "$TMP/plain.zst" >"$TMP/cut.zst"
expect 6 "a zstd file cut inside a frame" "$WEIR" -q -d -i "$TMP/cut.zst" -o /dev/null
has_msg "$TMP/err" "truncated zstd data" "the cut is named"
cp "$TMP/plain.zst" "$TMP/flip.zst"
flip_byte "$TMP/flip.zst" $(($(stat -c %s "$TMP/flip.zst") / 2))
expect 6 "a flipped byte in zstd's data" "$WEIR" -q -d -i "$TMP/flip.zst" -o /dev/null
has_msg "$TMP/err" "zstd data" "the corrupt zstd data is named"
"$WEIR" -q --zstd -i "$TMP/mixed" -o "$TMP/w.zst" -f || fail "--zstd"
cp "$TMP/w.zst" "$TMP/wflip.zst"
flip_byte "$TMP/wflip.zst" $(($(stat -c %s "$TMP/w.zst") / 3))
expect 6 "a flipped byte in weir's zstd block" "$WEIR" -q -d -i "$TMP/wflip.zst" -o /dev/null
grep -qE "checksum mismatch|does not decode|malformed|corrupt" "$TMP/err" ||
    { cat "$TMP/err" >&2; fail "the flipped block is not named"; }
ok "the flipped block is named"
head -c $(($(stat -c %s "$TMP/w.zst") - 40)) "$TMP/w.zst" >"$TMP/wcut.zst"
expect 6 "weir's zstd file without its trailer" "$WEIR" -q -d -i "$TMP/wcut.zst" -o /dev/null
has_msg "$TMP/err" "no trailer" "the missing end is named"
head -c 3000000 /dev/urandom >"$TMP/r3"
# from a pipe, whose size zstd cannot know: the frame keeps its 32 MiB window
zstd -q --long=25 -c <"$TMP/r3" >"$TMP/long.zst" || fail "zstd --long"
expect 6 "a window larger than -m" "$WEIR" -q -d -m 4M -i "$TMP/long.zst" -o /dev/null
has_msg "$TMP/err" "window larger than the 4 MiB the buffer allows" "the window is named"
# a decompression bomb: gigabytes of zeros in a few kilobytes; weir decodes
# it in its buffer's memory (its resident size stays far below the data)
head -c "$(sized 2000000000 300000000)" /dev/zero | zstd -q -c >"$TMP/bomb.zst" || fail "zstd"
/usr/bin/time -f '%M' -o "$TMP/rss" "$WEIR" -q -d -m 16M -i "$TMP/bomb.zst" -o /dev/null ||
    fail "weir -d of the bomb"
[ "$(tail -n 1 "$TMP/rss")" -lt 200000 ] || fail "the bomb took $(tail -n 1 "$TMP/rss") KiB"
ok "a decompression bomb decodes within -m ($(tail -n 1 "$TMP/rss") KiB resident)"
expect 0 "the same with -m 64M" "$WEIR" -q -d -m 64M -i "$TMP/long.zst" -o "$TMP/long.out" -f
same "$TMP/r3" "$TMP/long.out" "a long window within -m decodes"

# 7. --adapt: round trips; a slow output moves the level up; a fast one
# makes it store; random data is stored, not compressed
for spec in "1:" "65537:-s 4k" "mixed:-T 1 -s 256k" "mixed:-s 3M"; do
    IFS=: read -r size opts <<<"$spec"
    if [ "$size" = mixed ]; then in=$TMP/mixed; else in=$TMP/in.$size; gen "$in" "$size"; fi
    # shellcheck disable=SC2086
    expect 0 "--adapt $opts, $(stat -c %s "$in") bytes" \
        "$WEIR" -q --adapt $opts -i "$in" -o "$TMP/a.zst" -f
    readers "$TMP/a.zst" "$in" "--adapt $opts"
done
# a slow output behind a small buffer, for some seconds: the outputs are the
# bottleneck, the workers idle
cat "$TMP/mixed" "$TMP/mixed" "$TMP/mixed" >"$TMP/mixed3"
expect 0 "--adapt=1:12 to a slow output" "$WEIR" -q --adapt=1:12 -m 2M -s 256k \
    -R "$(sized 3M 1M)" -i "$TMP/mixed3" -o "$TMP/slow.zst" -f --progress=json=3 3>"$TMP/slow.json"
readers "$TMP/slow.zst" "$TMP/mixed3" "--adapt to a slow output"
tail -n 1 "$TMP/slow.json" | grep -q '"levels_used":\[1,\([2-9]\|1[0-2]\)\]' ||
    { tail -n 1 "$TMP/slow.json" >&2; fail "--adapt did not move the level up for a slow output"; }
ok "--adapt moved the level up for a slow output (the end line says which levels)"
# an output faster than the slowest level compresses: storing delivers more.
# Words of random syllables compress by more than three at level 19, at a
# megabyte or so a second; a small buffer keeps the input going beyond the
# first intervals
awk 'BEGIN { srand(7); split("ka lo mi ne su ra te vo pi gu de ba zo fe ri wa no xu ly qe", s, " ")
             for (;;) printf "%s%s%s ", s[int(rand() * 20) + 1], s[int(rand() * 20) + 1],
                                        rand() < 0.1 ? "\n" : "" }' 2>/dev/null |
    head -c 12000000 >"$TMP/words"
expect 0 "--adapt=19:19 to a fast output" "$WEIR" -q --adapt=19:19 -s 256k -m 2M \
    -i "$TMP/words" -o "$TMP/fast.zst" -f --progress=json=3 3>"$TMP/fast.json"
readers "$TMP/fast.zst" "$TMP/words" "--adapt=19:19 to a fast output"
tail -n 1 "$TMP/fast.json" | grep -q '"level":null.*"stored":true' ||
    { tail -n 1 "$TMP/fast.json" >&2; fail "--adapt=19:19 waited on level 19 instead of storing"; }
[ "$(stat -c %s "$TMP/fast.zst")" -gt $(($(stat -c %s "$TMP/words") / 2)) ] ||
    fail "--adapt=19:19 to a fast output stored too little (the output waited on level 19)"
ok "--adapt stores rather than make a fast output wait on its slowest level"
gen "$TMP/rand" "$(sized 30000000 8000000)"
expect 0 "--adapt of random data" "$WEIR" -q --adapt -s 256k -i "$TMP/rand" -o "$TMP/rand.zst" -f \
    --progress=json=3 3>"$TMP/rand.json"
readers "$TMP/rand.zst" "$TMP/rand" "--adapt of random data"
tail -n 1 "$TMP/rand.json" | grep -q '"stored":true' || fail "random data was not stored"
[ "$(stat -c %s "$TMP/rand.zst")" -lt $(($(stat -c %s "$TMP/rand") * 101 / 100)) ] ||
    fail "stored random data grew by more than 1%"
ok "random data is stored, and grows by less than 1%"
listen "$TMP/l.out" "$TMP/l.err" -v -o "$TMP/recv" -f
expect 0 "--adapt to a weir" "$WEIR" -q --adapt -O "127.0.0.1:$LPORT" -i "$TMP/rand"
wait_bounded "$LPID" 30
[ "$STATUS" -eq 0 ] || { cat "$TMP/l.err" >&2; fail "the receiver exited $STATUS"; }
same "$TMP/rand" "$TMP/recv" "--adapt to a weir: the receiver wrote it whole"

# 8. usage
expect 2 "--zstd=0" "$WEIR" --zstd=0 -i "$TMP/r3" -o /dev/null
has_msg "$TMP/err" "--zstd: 0 is no level" "--zstd=0 is named"
expect 2 "--zstd=20" "$WEIR" --zstd=20 -i "$TMP/r3" -o /dev/null
expect 2 "--zstd=-101" "$WEIR" --zstd=-101 -i "$TMP/r3" -o /dev/null
expect 2 "-z with --zstd" "$WEIR" -z --zstd -i "$TMP/r3" -o /dev/null
has_msg "$TMP/err" "-z and --zstd contradict each other" "-z with --zstd is named"
expect 2 "--zstd with -d" "$WEIR" --zstd -d -i "$TMP/r3" -o /dev/null
has_msg "$TMP/err" "--zstd and -d contradict each other" "--zstd with -d is named"
for bad in 5 3:1 0:5 -101:3 x:y :; do
    expect 2 "--adapt=$bad" "$WEIR" --adapt="$bad" -i "$TMP/r3" -o /dev/null
done
expect 2 "--adapt with --zstd=5" "$WEIR" --adapt --zstd=5 -i "$TMP/r3" -o /dev/null
has_msg "$TMP/err" "--zstd=LEVEL and --adapt contradict" "--adapt with a fixed level is named"
expect 0 "--adapt with --zstd (no level)" "$WEIR" -q --adapt --zstd -i "$TMP/r3" -o /dev/null

# 9. a careless user: closed standard streams, the same file both ways, a
# full disk, a signal halfway, an empty input to -d
expect 4 "--zstd to a closed stdout" sh -c "'$WEIR' -q --zstd -i '$TMP/mixed' >&-"
has_msg "$TMP/err" "standard output is closed" "a closed stdout is named"
expect 3 "--adapt from a closed stdin" sh -c "'$WEIR' -q --adapt -o '$TMP/c.zst' -f <&-"
has_msg "$TMP/err" "standard input is closed" "a closed stdin is named"
expect 0 "--zstd with stderr closed" sh -c "'$WEIR' -q --zstd -i '$TMP/mixed' -o '$TMP/c.zst' -f 2>&-"
zstd -q -d -c "$TMP/c.zst" >"$TMP/c.out" || fail "zstd -d refused the file written with stderr closed"
same "$TMP/mixed" "$TMP/c.out" "with stderr closed the file is whole"
cp "$TMP/mixed" "$TMP/m2"
expect 2 "--zstd with the same file in and out" "$WEIR" -q --zstd -i "$TMP/m2" -o "$TMP/m2" -f
has_msg "$TMP/err" "are the same file" "the same file is named"
same "$TMP/mixed" "$TMP/m2" "the input was left alone"
expect 4 "--adapt to a full disk" "$WEIR" -q --adapt -i "$TMP/mixed" -o /dev/full
has_msg "$TMP/err" "output /dev/full: write: No space left on device" "the full disk is named"
expect 4 "-d of a zstd file to a full disk" "$WEIR" -q -d -i "$TMP/c.zst" -o /dev/full
has_msg "$TMP/err" "No space left on device" "the full disk is named (-d)"
rm -f "$TMP/term.zst"
"$WEIR" -q --adapt -R 1M -i "$TMP/mixed" -o "$TMP/term.zst" -f 2>"$TMP/t.err" &
tpid=$!
wait_size "$TMP/term.zst" 1 30
kill -TERM "$tpid"
wait_bounded "$tpid" 30
[ "$STATUS" -eq 143 ] || { cat "$TMP/t.err" >&2; fail "--adapt under SIGTERM: exit $STATUS, want 143"; }
has_msg "$TMP/t.err" "interrupted by SIGTERM" "--adapt under SIGTERM exits 143 and says so"
: >"$TMP/empty"
expect 6 "-d of an empty input" "$WEIR" -q -d -i "$TMP/empty" -o /dev/null
has_msg "$TMP/err" "empty input: no weir stream, LZ4 or zstd data" "an empty input is named"
done_testing
