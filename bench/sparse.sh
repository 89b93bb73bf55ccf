#!/bin/bash
# bench/sparse.sh - a large sparse file over loopback, weir to weir.
#
#   bench/sparse.sh                       1 TiB holding 1 GiB in 64 KiB extents
#   SIZE=100G DATA=256M bench/sparse.sh   smaller
#   EXTENT=4K bench/sparse.sh             more, smaller extents
#   RUNS=5 MODES="plain z key" bench/sparse.sh
#
# The file is made with truncate and scattered writes (one extent in every
# SIZE/(DATA/EXTENT) stripe, at a pseudo-random 4 KiB-aligned place in it), so
# it takes DATA of disk, twice with its copy.  Each run drops the input's
# pages from the cache first (dd iflag=nocache), starts a receiver
# (weir -I PORT -o copy) and times the sender (weir -i F -O 127.0.0.1:PORT),
# which exits only once the receiver has flushed the copy to stable storage
# and said so.  Then the copy is checked: the same size, the same map of
# data extents and holes, the same bytes in every extent, and an allocation
# (stat %b) within 1% of the input's.  Modes: plain, z (-z), key (--key-file).
set -eu
cd "$(dirname "$0")/.."
SIZE=${SIZE:-1T}
DATA=${DATA:-1G}
EXTENT=${EXTENT:-64K}
RUNS=${RUNS:-3}
MODES=${MODES:-plain z key}
DIR=${DIR:-bench/data}
WEIR=${WEIR:-build/weir}
[ -x "$WEIR" ] || { meson setup build -Dbuildtype=release >/dev/null && ninja -C build >/dev/null; }
mkdir -p "$DIR"
in=$DIR/sparse.in
copy=$DIR/sparse.copy

bytes() { numfmt --from=iec "$1"; }
size=$(bytes "$SIZE"); data=$(bytes "$DATA"); extent=$(bytes "$EXTENT")
need=$(( 2 * data / 1024 + 1048576 ))
avail=$(df -k --output=avail "$DIR" | tail -n1)
[ "$avail" -gt "$need" ] || { echo "sparse.sh: $DIR has ${avail}k free, needs ${need}k" >&2; exit 1; }

make_input() {
    rm -f "$in"
    truncate -s "$size" "$in"
    python3 - "$in" "$size" "$data" "$extent" <<'EOF'
import os, random, sys
path, size, data, extent = sys.argv[1], *map(int, sys.argv[2:])
n = data // extent
stripe = size // n
rnd = random.Random(14)
block = os.urandom(extent)
fd = os.open(path, os.O_WRONLY)
for i in range(n):
    at = i * stripe + rnd.randrange(0, (stripe - extent) // 4096 + 1) * 4096
    os.pwrite(fd, block[i % 7:] + block[:i % 7], at)
os.fsync(fd)
os.close(fd)
EOF
}

# check: same size, same extents and holes, same data, allocation within 1%
check_copy() {
    python3 - "$in" "$copy" <<'EOF'
import hashlib, os, sys
def extents(path):
    fd = os.open(path, os.O_RDONLY)
    size, out, pos = os.fstat(fd).st_size, [], 0
    h = hashlib.sha256()
    while pos < size:
        try:
            d = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError:
            break
        e = os.lseek(fd, d, os.SEEK_HOLE)
        if out and out[-1][1] == d:
            out[-1] = (out[-1][0], e)
        else:
            out.append((d, e))
        os.lseek(fd, d, os.SEEK_SET)
        left = e - d
        while left:
            b = os.read(fd, min(left, 1 << 20))
            h.update(b)
            left -= len(b)
        pos = e
    st = os.fstat(fd)
    os.close(fd)
    return st.st_size, st.st_blocks, out, h.hexdigest()
a, b = extents(sys.argv[1]), extents(sys.argv[2])
print("  input: %d bytes, %d blocks allocated, %d extents" % (a[0], a[1], len(a[2])))
print("  copy:  %d bytes, %d blocks allocated, %d extents" % (b[0], b[1], len(b[2])))
ok = a[0] == b[0] and a[2] == b[2] and a[3] == b[3] and abs(a[1] - b[1]) <= a[1] / 100
print("  identical (size, extent map, data), allocation within 1%%: %s" % ("yes" if ok else "NO"))
sys.exit(0 if ok else 1)
EOF
}

key=$DIR/sparse.key
[ -f "$key" ] || "$WEIR" -q --genkey "$key" --key-id bench

run_one() {   # run_one MODE -> prints seconds
    local opts=() port lerr=$DIR/sparse.lerr
    case $1 in
    z) opts=(-z) ;;
    key) opts=(--key-file "$key") ;;
    esac
    sync "$in"; dd if="$in" iflag=nocache count=0 status=none
    rm -f "$copy" "$lerr"
    local kopt=()
    [ "$1" = key ] && kopt=(--key-file "$key")
    "$WEIR" -q -I 127.0.0.1:0 "${kopt[@]}" -o "$copy" 2>"$lerr" &
    local lpid=$!
    for _ in $(seq 100); do grep -q 'listening on' "$lerr" 2>/dev/null && break; sleep 0.05; done
    port=$(grep -o 'listening on .*' "$lerr" | grep -o '[0-9]*$')
    local t0 t1
    t0=$(date +%s.%N)
    "$WEIR" -q "${opts[@]}" -i "$in" -O "127.0.0.1:$port"
    t1=$(date +%s.%N)
    wait "$lpid"
    echo "$t1 - $t0" | bc
}

echo "# $SIZE holding $DATA in $EXTENT extents; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
[ -f "$in" ] && [ "$(stat -c %s "$in")" -eq "$size" ] && [ -f "$DIR/sparse.made" ] \
    && [ "$(cat "$DIR/sparse.made")" = "$SIZE $DATA $EXTENT" ] || {
    echo "making $in..."
    make_input
    echo "$SIZE $DATA $EXTENT" >"$DIR/sparse.made"
}
for mode in $MODES; do
    times=()
    for _ in $(seq "$RUNS"); do
        times+=("$(run_one "$mode")")
    done
    sorted=$(printf '%s\n' "${times[@]}" | sort -n)
    median=$(echo "$sorted" | sed -n "$(( (RUNS + 1) / 2 ))p")
    echo "$mode: median $median s of $RUNS runs ($(echo "$sorted" | tr '\n' ' '))"
    check_copy
done
rm -f "$copy"
