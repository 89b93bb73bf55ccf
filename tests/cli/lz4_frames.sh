#!/bin/bash
# Purpose: weir -z writes files and pipes as one standard LZ4 frame that every
# decoder reads whole: stock lz4 -d, python's one-shot lz4.frame.decompress(),
# its streaming decompressor and lz4.frame.open, and weir -d, at awkward sizes,
# block sizes (4k to 5M, split into 4 MiB LZ4 blocks), levels and worker counts;
# its header says independent blocks, block and content checksums, and the size
# of a regular-file input.  weir -d names every fault in such a frame (a flipped
# block, block checksum or content checksum, a cut, a false content size) with
# exit 6, reads legacy LZ4 (lz4 -l) alone, concatenated and among frames, and
# reads what lz4 writes; a frame without any checksum is said to be
# unverifiable, and a skippable frame with weir's own magic that is not weir's
# header or record is skipped like any other.
. "$(dirname "$0")/lib.sh"
command -v lz4 >/dev/null || fail "lz4 is not installed (scripts/deps.sh installs it)"
python_with lz4.frame python3-lz4

# pycheck FILE INPUT SIZE: python reads FILE whole, streaming and as a file,
# each to INPUT's bytes, and the frame's header says independent blocks, both
# checksums, and SIZE (0: no size)
cat >"$TMP/check.py" <<'EOF'
import hashlib, sys
import lz4.frame
path, want, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(path, 'rb').read()
def h(b):
    return hashlib.sha256(b).hexdigest()
info = lz4.frame.get_frame_info(data)
errs = []
if not info['block_checksum']:
    errs.append('no block checksums')
if not info['content_checksum']:
    errs.append('no content checksum')
if info['block_linked']:
    errs.append('linked blocks')
if info['content_size'] != size:
    errs.append('content size %d, want %d' % (info['content_size'], size))
if h(lz4.frame.decompress(data)) != want:
    errs.append('lz4.frame.decompress() returned other data')
d = lz4.frame.LZ4FrameDecompressor()
parts = [d.decompress(data[i:i + 65521]) for i in range(0, len(data), 65521)]
if not d.eof:
    errs.append('LZ4FrameDecompressor did not reach the end of the frame')
if h(b''.join(parts)) != want:
    errs.append('LZ4FrameDecompressor returned other data')
with lz4.frame.open(path) as f:
    if h(f.read()) != want:
        errs.append('lz4.frame.open() read other data')
if errs:
    print('; '.join(errs))
    sys.exit(1)
EOF
pycheck() {
    local why
    why=$("$PY" "$TMP/check.py" "$1" "$(sum "$2")" "$3" 2>&1) || fail "$4: python: $why"
    ok "$4: python reads it whole, streaming and as a file; the header is right"
}

# ---- every decoder reads weir -z files --------------------------------------
M=1048576
sets=("-z -s 4k -T1" "-z -s 64k -T2" "-z -T2" "-z -s 5M -T2" "--compress=9 -s 64k -T1"
      "--compress=9 -s 5M -T2")
for n in 0 1 65535 65536 $((M - 1)) $((M + 1)) $((5 * M + 3)); do
    gen "$TMP/in" "$n" mixed
    for opts in "${sets[@]}"; do
        # shellcheck disable=SC2086
        "$WEIR" -q $opts -i "$TMP/in" -f -o "$TMP/f.lz4" || fail "weir $opts, $n bytes: exit $?"
        lz4 -q -dc "$TMP/f.lz4" >"$TMP/out" || fail "lz4 -d of weir $opts, $n bytes"
        same "$TMP/in" "$TMP/out" "lz4 -d reads weir $opts of $n bytes"
        pycheck "$TMP/f.lz4" "$TMP/in" "$n" "weir $opts of $n bytes"
        "$WEIR" -q -d -i "$TMP/f.lz4" -f -o "$TMP/out" || fail "weir -d of weir $opts, $n bytes"
        same "$TMP/in" "$TMP/out" "weir -d reads weir $opts of $n bytes"
    done
done

# ---- pipes, standard output, a consumer, a connection beside a file ---------
gen "$TMP/in" 3000001 mixed
cat "$TMP/in" | "$WEIR" -q -z -s 64k | lz4 -q -dc >"$TMP/out"
[ "${PIPESTATUS[1]}${PIPESTATUS[2]}" = 00 ] || fail "cat | weir -z | lz4 -d: ${PIPESTATUS[*]}"
same "$TMP/in" "$TMP/out" "weir -z into a pipe, lz4 -d out of it"
cat "$TMP/in" | "$WEIR" -q -z >"$TMP/p.lz4" || fail "weir -z from a pipe"
pycheck "$TMP/p.lz4" "$TMP/in" 0 "weir -z from a pipe (no size in the header)"
"$WEIR" -q -z -i "$TMP/in" >"$TMP/s.lz4" || fail "weir -z to standard output"
pycheck "$TMP/s.lz4" "$TMP/in" 3000001 "weir -z to standard output"
{ dd bs=100 count=1 of=/dev/null status=none; "$WEIR" -q -z >"$TMP/o.lz4"; } <"$TMP/in" \
    || fail "weir -z from a file already read in part"
tail -c +101 "$TMP/in" >"$TMP/rest"
pycheck "$TMP/o.lz4" "$TMP/rest" 2999901 "weir -z of standard input, a file 100 bytes into it"
"$WEIR" -q -z -T2 -i "$TMP/in" -- sh -c "lz4 -q -dc >'$TMP/out'" || fail "weir -z -- lz4 -d"
same "$TMP/in" "$TMP/out" "weir -z into a consumer command that runs lz4 -d"
# one compression, two forms: a weir receiver (in clear and encrypted) gets
# the weir stream and a file beside it the frame, with blocks of one piece
# and of two (-s 5M: a 4 MiB and a 1 MiB LZ4 block)
"$WEIR" -q --genkey "$TMP/key" --key-id lz4 || fail "--genkey"
gen "$TMP/in5" $((5 * M + 3)) mixed
for opts in "-s 64k" "-s 5M" "-s 5M --key-file $TMP/key"; do
    key=; [ "${opts#*--key-file}" != "$opts" ] && key="--key-file $TMP/key"
    # shellcheck disable=SC2086
    listen "$TMP/recv" "$TMP/lerr" -q $key
    # shellcheck disable=SC2086
    "$WEIR" -q -z -T2 $opts -i "$TMP/in5" -f -o "$TMP/both.lz4" -O "127.0.0.1:$LPORT" \
        || fail "weir -z $opts -o FILE -O weir: exit $?"
    wait_bounded "$LPID" 20
    [ "$STATUS" -eq 0 ] || { cat "$TMP/lerr"; fail "the receiver exited $STATUS"; }
    same "$TMP/in5" "$TMP/recv" "weir -z $opts: a weir receiver gets the weir stream beside a file"
    pycheck "$TMP/both.lz4" "$TMP/in5" $((5 * M + 3)) "weir -z $opts: the file beside a weir connection"
done

# ---- weir -d names every fault in such a frame -------------------------------
gen "$TMP/in" 300000 mixed
"$WEIR" -q -z -s 64k -i "$TMP/in" -f -o "$TMP/z" || fail "-z"
len=$(stat -c %s "$TMP/z")
first=$(( $(od -An -tu4 -j 15 -N 4 "$TMP/z") & 0x7fffffff ))   # the first block's size
decode_fails() {   # decode_fails FILE LABEL TEXT: exit 6, the input and TEXT named
    "$WEIR" -q -d -i "$1" >"$TMP/out" 2>"$TMP/err"
    local st=$?
    [ "$st" -eq 6 ] || { cat "$TMP/err"; fail "$2: exit $st, want 6"; }
    grep -qF -- "input $1: " "$TMP/err" || { cat "$TMP/err"; fail "$2: the input is not named"; }
    grep -qF -- "$3" "$TMP/err" || { cat "$TMP/err"; fail "$2: no '$3'"; }
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || { cat "$TMP/err"; fail "$2: not one line"; }
    ok "$2: exit 6, '$3'"
}
flip() {   # flip OFFSET -> $TMP/f
    cp "$TMP/z" "$TMP/f"
    flip_byte "$TMP/f" "$1"
}
flip $((19 + first / 2)); decode_fails "$TMP/f" "a flipped byte in a block" \
    "LZ4 block 0 at byte 19: checksum mismatch"
flip $((19 + first + 1)); decode_fails "$TMP/f" "a flipped block checksum" \
    "LZ4 block 0 at byte 19: checksum mismatch"
flip $((len - 2)); decode_fails "$TMP/f" "a flipped content checksum" "content checksum mismatch"
flip 5; decode_fails "$TMP/f" "a flipped header byte" "corrupt LZ4 frame header"
cp "$TMP/z" "$TMP/f"; "$TESTTOOL" lz4size "$TMP/f" 300001 || fail "lz4size"
decode_fails "$TMP/f" "a content size one too large" "holds 300000 bytes, its header says 300001"
cp "$TMP/z" "$TMP/f"; "$TESTTOOL" lz4size "$TMP/f" 299999 || fail "lz4size"
decode_fails "$TMP/f" "a content size one too small" "holds 300000 bytes, its header says 299999"
: >"$TMP/t"
decode_fails "$TMP/t" "an empty file" "empty input"
for cut in 3 4 10 14 15 18 19 $((19 + first / 2)) $((19 + first + 2)) $((len - 8)) \
           $((len - 5)) $((len - 1)); do
    head -c "$cut" "$TMP/z" >"$TMP/t"
    decode_fails "$TMP/t" "cut at $cut of $len" "truncated LZ4 data"
done
# python agrees that those files are broken
"$PY" -c 'import lz4.frame, sys; lz4.frame.decompress(open(sys.argv[1], "rb").read())' \
    "$TMP/t" 2>/dev/null && fail "python read a cut file without an error"
ok "python's one-shot decompress rejects the cut file too"

# change_while_read IN OUT WANT OPTS CMD...: weir (with OPTS, a word list)
# reads a new 600000-byte IN slowly into OUT; once OUT has its first bytes,
# CMD changes IN; weir must exit WANT (its messages in $TMP/cerr)
change_while_read() {
    local in=$1 out=$2 want=$3 opts=$4
    shift 4
    gen "$in" 600000 random
    "$WEIR" -q $opts -s 64k -r 200k -i "$in" -f -o "$out" 2>"$TMP/cerr" &
    local pid=$!
    PIDS+=("$pid")
    wait_size "$out" 100 10
    "$@"
    wait_bounded "$pid" 20
    [ "$STATUS" -eq "$want" ] ||
        { cat "$TMP/cerr"; fail "$in changed while read (${opts:-no options}): exit $STATUS, want $want"; }
}
grow() { head -c 1000 /dev/urandom >>"$1"; }

# a regular file that changes while weir compresses it: the size in the
# header would lie, so weir fails (input, 3) and the frame is left unfinished
change_while_read "$TMP/grow" "$TMP/g.lz4" 3 -z grow "$TMP/grow"
has_msg "$TMP/cerr" "input $TMP/grow: the file changed while weir read it (601000 bytes read, " \
    "a growing input is named, with what was read"
has_msg "$TMP/cerr" "600000 when it was opened)" "and with its size when it was opened"
lz4 -q -t "$TMP/g.lz4" 2>/dev/null && fail "lz4 -t accepted the unfinished frame"
ok "the frame of a file that changed is left unfinished: lz4 -t rejects it"

# without -z, a file cut while weir reads it: the copy would hold neither
# what the file held when it was opened nor what it holds now, so weir
# fails (input, 3) rather than exit 0 with a short copy; a file that grows
# gives what it held at the end, as cat does
change_while_read "$TMP/cut" "$TMP/cut.out" 3 "" truncate -s 300000 "$TMP/cut"
has_msg "$TMP/cerr" "input $TMP/cut: the file changed while weir read it (" \
    "a file cut while read is named"
has_msg "$TMP/cerr" "600000 when it was opened)" "a file cut while read: with its size when opened"
change_while_read "$TMP/grow2" "$TMP/grow2.out" 0 "" grow "$TMP/grow2"
same "$TMP/grow2" "$TMP/grow2.out" "a file that grew while read, without -z: all of it"

# a file whose size the file system does not report (/proc) goes unsized
cat /proc/version >"$TMP/version"
"$WEIR" -q -z -i /proc/version -f -o "$TMP/v.lz4" || fail "weir -z -i /proc/version: exit $?"
pycheck "$TMP/v.lz4" "$TMP/version" 0 "a /proc file (no size in the header)"

# ---- legacy LZ4 (lz4 -l) -----------------------------------------------------
gen "$TMP/a" "$(sized 9000011 8400000)" mixed
gen "$TMP/b" 70001 text
lz4 -q -l -c "$TMP/a" >"$TMP/a.l4"
lz4 -q -l -c "$TMP/b" >"$TMP/b.l4"
for T in 1 2; do
    "$WEIR" -d -T $T -i "$TMP/a.l4" -f -o "$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; fail "legacy -T $T"; }
    same "$TMP/a" "$TMP/out" "weir -d -T $T reads a legacy file of two blocks"
done
has_msg "$TMP/err" "input $TMP/a.l4: legacy LZ4 data has no checksums; it cannot be verified" \
    "legacy input is said to be unverifiable"
[ "$(grep -c "legacy LZ4" "$TMP/err")" -eq 1 ] || fail "the warning came more than once"
ok "the warning comes once"
cat "$TMP/a.l4" "$TMP/b.l4" "$TMP/b.l4" >"$TMP/cat.l4"
"$WEIR" -q -d -i "$TMP/cat.l4" -f -o "$TMP/out" 2>"$TMP/err" || fail "concatenated legacy"
[ ! -s "$TMP/err" ] || { cat "$TMP/err"; fail "-q still warned"; }
ok "-q keeps the legacy warning quiet"
cat "$TMP/a" "$TMP/b" "$TMP/b" >"$TMP/want"
same "$TMP/want" "$TMP/out" "weir -d reads concatenated legacy streams"
lz4 -q -c "$TMP/b" >"$TMP/b.lz4"
{ cat "$TMP/b.l4" "$TMP/b.lz4"; printf '\x5a\x2a\x4d\x18\x03\x00\x00\x00abc'; cat "$TMP/a.l4"; } \
    >"$TMP/mix.l4"
cat "$TMP/b" "$TMP/b" "$TMP/a" >"$TMP/want"
"$WEIR" -q -d -T2 -i "$TMP/mix.l4" -f -o "$TMP/out" || fail "legacy, frame, skippable, legacy"
same "$TMP/want" "$TMP/out" "weir -d reads legacy + frame + skippable frame + legacy"
lz4 -q -l -c </dev/null >"$TMP/empty.l4"
[ "$(stat -c %s "$TMP/empty.l4")" -eq 4 ] || fail "lz4 -l of nothing is not the magic alone"
"$WEIR" -q -d -i "$TMP/empty.l4" -f -o "$TMP/out" || fail "an empty legacy stream"
[ ! -s "$TMP/out" ] || fail "an empty legacy stream decoded to bytes"
ok "an empty legacy stream decodes to nothing"
head -c $(( $(stat -c %s "$TMP/a.l4") / 2 )) "$TMP/a.l4" >"$TMP/t.l4"
decode_fails "$TMP/t.l4" "a legacy file cut inside a block" "truncated LZ4 data"
head -c 6 "$TMP/b.l4" >"$TMP/t.l4"
decode_fails "$TMP/t.l4" "a legacy file cut inside a block size" "truncated LZ4 data"
cp "$TMP/b.l4" "$TMP/t.l4"
printf '\xff\xff\xff\x00' | dd of="$TMP/t.l4" bs=1 seek=4 conv=notrunc status=none
decode_fails "$TMP/t.l4" "a legacy block size beyond LZ4's bound" "LZ4 legacy block of"
cp "$TMP/b.l4" "$TMP/t.l4"
printf '\x0a\x00\x00\x00' | dd of="$TMP/t.l4" bs=1 seek=4 conv=notrunc status=none
decode_fails "$TMP/t.l4" "a legacy block cut short by its size" "LZ4 legacy block"

# ---- what lz4 writes ---------------------------------------------------------
gen "$TMP/in" 3000001 mixed
for opts in "-B4 --content-size" "-B7 --content-size" "-BD" "-B4 -BD -BX" "-B5 -BX"; do
    # shellcheck disable=SC2086
    lz4 -q $opts -c "$TMP/in" >"$TMP/x.lz4" || fail "lz4 $opts"
    "$WEIR" -q -d -T2 -i "$TMP/x.lz4" -f -o "$TMP/out" || fail "weir -d of lz4 $opts: exit $?"
    same "$TMP/in" "$TMP/out" "weir -d reads lz4 $opts"
done

# ---- frames that carry no checksum at all ---------------------------------------
for opts in "--no-frame-crc" "--no-frame-crc -BD"; do
    # shellcheck disable=SC2086
    lz4 -q $opts -c "$TMP/in" >"$TMP/x.lz4" || fail "lz4 $opts"
    cat "$TMP/x.lz4" "$TMP/x.lz4" >"$TMP/xx.lz4"
    "$WEIR" -d -T2 -i "$TMP/xx.lz4" -f -o "$TMP/out" 2>"$TMP/err" ||
        { st=$?; cat "$TMP/err"; fail "weir -d of lz4 $opts: exit $st"; }
    cat "$TMP/in" "$TMP/in" >"$TMP/want"
    same "$TMP/want" "$TMP/out" "weir -d reads two frames of lz4 $opts"
    has_msg "$TMP/err" "input $TMP/xx.lz4: LZ4 frame at byte 0 has no checksums; it cannot be verified" \
        "lz4 $opts: a frame without checksums is said to be unverifiable"
    [ "$(grep -c "cannot be verified" "$TMP/err")" -eq 1 ] || { cat "$TMP/err"; fail "lz4 $opts: said more than once"; }
    ok "lz4 $opts: the warning comes once"
    "$WEIR" -q -d -i "$TMP/xx.lz4" -f -o "$TMP/out" 2>"$TMP/err" || fail "weir -q -d of lz4 $opts"
    [ ! -s "$TMP/err" ] || { cat "$TMP/err"; fail "-q still warned"; }
    ok "lz4 $opts: -q keeps the warning quiet"
done
for opts in "" "--no-frame-crc -BX" "-BD"; do
    # shellcheck disable=SC2086
    lz4 -q $opts -c "$TMP/in" >"$TMP/x.lz4" || fail "lz4 $opts"
    "$WEIR" -d -i "$TMP/x.lz4" -f -o "$TMP/out" 2>"$TMP/err" || fail "weir -d of lz4 $opts: exit $?"
    grep -q "cannot be verified" "$TMP/err" && { cat "$TMP/err"; fail "lz4 $opts has checksums, yet weir warned"; }
    ok "lz4 ${opts:-(defaults)}: checksums, no warning"
done

# ---- skippable frames that happen to bear weir's magic (0x184D2A57) -------------
lz4 -q -c "$TMP/b" >"$TMP/b.lz4"
{ printf '\x57\x2a\x4d\x18\x05\x00\x00\x00hello'; cat "$TMP/b.lz4"; } >"$TMP/s1.lz4"
"$WEIR" -q -d -i "$TMP/s1.lz4" -f -o "$TMP/out" 2>"$TMP/err" || { st=$?; cat "$TMP/err"; fail "a skippable frame of 5 bytes with weir's magic first: exit $st"; }
same "$TMP/b" "$TMP/out" "weir -d skips a first skippable frame with weir's magic"
{ printf '\x57\x2a\x4d\x18\x10\x00\x00\x00Hello, weir user'; cat "$TMP/b.lz4"
  printf '\x57\x2a\x4d\x18\x18\x00\x00\x00Backup of tank/fs @ 2026'; cat "$TMP/b.lz4"
  printf '\x57\x2a\x4d\x18\x00\x00\x00\x00'; } >"$TMP/s2.lz4"
cat "$TMP/b" "$TMP/b" >"$TMP/want"
"$WEIR" -q -d -i "$TMP/s2.lz4" -f -o "$TMP/out" 2>"$TMP/err" || { st=$?; cat "$TMP/err"; fail "skippable frames of 16, 24 and 0 bytes with weir's magic: exit $st"; }
same "$TMP/want" "$TMP/out" "weir -d skips weir-magic frames of 16 ('H...'), 24 ('B...') and 0 bytes"
lz4 -q -d -c "$TMP/s2.lz4" >"$TMP/out" || fail "lz4 -d of the same file"
same "$TMP/want" "$TMP/out" "lz4 -d reads the same file alike"
done_testing
