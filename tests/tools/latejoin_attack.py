#!/usr/bin/env python3
"""latejoin_attack.py - hostile peers for a weir receiver whose transfer
grows while it runs (--streams auto), for tests/cli/streams_join_hostile.sh.

Records are built as weir's codec builds them (src/format/codec.c): the
magic, a little-endian payload length, the type, and an XXH3-64 checksum
(libxxhash through ctypes) at the end.  Every wait is bounded.  Each mode
prints one or more lines saying what the receiver did.

  proxy LPORT_FILE TARGET_PORT TOKEN_FILE
      A relay on 127.0.0.1 (port 0; the port goes to LPORT_FILE) in front
      of the receiver, for every connection: an on-path reader.  It reads
      the first connection's receiver-to-sender bytes and writes the token
      of the first 'N' record it sees (hex) to TOKEN_FILE.  Runs until
      killed.
  flood HOST PORT N HOLD [GREET]
      N connections that say nothing (GREET=1: half a greeting; GREET=2: a
      whole greeting with the key bit, then no handshake), held HOLD
      seconds; prints "sent N greetings" (GREET > 0) once they are sent, then
      "open K" (still open at the end) and "greeted G".
  churn HOST PORT SECS KEEP
      For SECS, open connections as fast as the listener takes them, each
      sending half a greeting, at most KEEP open at a time (the oldest
      closed first); prints "churning" once KEEP are open, and "opened N".
  slowloris HOST PORT SECS
      A sender's greeting and a 'J' with a made-up token, one byte every
      0.2 s; prints "closed after S s, read: X" once the receiver ends it,
      or "still open after SECS s".
  join HOST PORT TOKENHEX PLAN [INDEX COUNT]
      Greeting and 'J' (TOKENHEX), then the answer ("joined", "refused:
      MSG", "closed", "no answer"); once joined, PLAN:
        hold      send nothing for 15 s (or until the receiver closes it)
        junk      bytes that are no chunk header
        huge      a chunk header whose length is 0xffffffff
        zero      a chunk header whose length is 0
        old       chunk 0 (the stream has long had it)
        far       a chunk 2^40 numbers on (beyond any window)
        next N    chunks N, N+1, ... N+63 of junk (the stream's future:
                  numbers the sender will also send)
        dribble   a chunk header (a far number) then one byte a second
      and then "held until closed after S s" or "held S s".
  resume HOST PORT TOKENHEX
      Greeting (resume bit) and 'R' with TOKENHEX (@FILE: the token FILE
      will hold; "waiting for the token" is printed first), then silence
      for 15 s;
      prints what the receiver said, or "held ...".
  header HOST PORT
      Greeting and a stream header: a new transfer on a listener that has
      one under way.
  keyless-on-keyed HOST PORT TOKENHEX
      A greeting without the key bit, then a 'J' in clear, to a keyed
      receiver.
"""
import ctypes
import os
import select
import socket
import struct
import sys
import threading
import time

MAGIC = 0x184D2A57
FEATURES = 0x1 | 0x4 | 0x80 | 0x100      # CODEC_FEATURES
STREAMS, GROW = 0x400, 0x800
WEIR_MARK = 0x04

_xx = ctypes.CDLL("libxxhash.so.0")
_xx.XXH3_64bits.restype = ctypes.c_uint64
_xx.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def seal(rec):
    return rec + struct.pack("<Q", _xx.XXH3_64bits(bytes(rec), len(rec)))


def record(typ, total, fill):
    """A record of total bytes (checksum included): magic, length, type."""
    b = bytearray(total - 8)
    struct.pack_into("<II", b, 0, MAGIC, total - 8)
    b[8] = ord(typ)
    fill(b)
    return seal(b)


def greeting(features):
    def fill(b):
        b[9:13] = b"WEIR"
        b[13] = 1
        b[14] = 1
        b[15] = ord("S")
        struct.pack_into("<I", b, 16, features)
    return record("G", 32, fill)


def join_rec(token, index, count):
    def fill(b):
        b[9] = index
        b[10] = count
        b[16:32] = token
    return record("J", 40, fill)


def header_rec():
    b = bytearray(24)
    struct.pack_into("<II", b, 0, MAGIC, 16)
    b[8] = ord("H")
    b[9:13] = b"WEIR"
    b[13] = 2
    struct.pack_into("<I", b, 16, 1 << 20)
    return bytes(b)


def chunk_hdr(seq, length):
    return b"WCHK" + struct.pack("<IQ", length, seq)


def connect(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, WEIR_MARK)
    s.settimeout(20)
    s.connect((host, int(port)))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0)
    return s


def read_exact(s, n, secs=20):
    buf = b""
    until = time.time() + secs
    while len(buf) < n:
        left = until - time.time()
        if left <= 0:
            return None
        r, _, _ = select.select([s], [], [], left)
        if not r:
            return None
        try:
            got = s.recv(n - len(buf))
        except OSError:
            return b"" if not buf else None
        if not got:
            return b""
        buf += got
    return buf


def read_record(s, secs=20):
    """(type, bytes) of the next record; ("", b"") the end; (None, None) none."""
    head = read_exact(s, 8, secs)
    if head is None:
        return None, None
    if head == b"":
        return "", b""
    magic, plen = struct.unpack("<II", head)
    if magic != MAGIC or plen > 1 << 20:
        return "?", head
    body = read_exact(s, plen, secs)
    if not body:
        return None, None
    return chr(body[0]), head + body


def status_msg(rec):
    n = struct.unpack_from("<I", rec, 12)[0]
    return rec[32:32 + n].decode(errors="replace")


def answer(s, secs=20):
    """What the receiver said to a join: a line."""
    while True:
        typ, rec = read_record(s, secs)
        if typ == "K":
            continue
        if typ is None:
            return "no answer"
        if typ == "":
            return "closed"
        if typ == "S":
            return "refused: " + status_msg(rec)
        return "other " + typ


def watch(s, secs, tick=None):
    """Read s for at most secs, a look every 0.2 s (tick(), when given,
    runs before each look); returns (closed, seconds, bytes read)."""
    got = b""
    t0 = time.time()
    while time.time() - t0 < secs:
        if tick:
            tick()
        r, _, _ = select.select([s], [], [], 0.2)
        if not r:
            continue
        try:
            b = s.recv(65536)
        except OSError:
            b = b""
        if not b:
            return True, time.time() - t0, got
        got += b
    return False, time.time() - t0, got


def held(s, secs):
    closed, took, _ = watch(s, secs)
    return ("held until closed after %.1f s" if closed else "held %.1f s") % took


def send_quiet(s, data):
    try:
        s.sendall(data)
        return True
    except OSError as e:
        print("write failed: %s" % e.strerror, flush=True)
        return False


def mode_join(host, port, tokenhex, plan, rest):
    index = int(rest[0]) if rest else 1
    count = int(rest[1]) if len(rest) > 1 else 2
    s = connect(host, port)
    typ, rec = read_record(s)
    if typ != "G":
        print("no greeting: %s" % (status_msg(rec) if typ == "S" else typ), flush=True)
        return 2
    s.sendall(greeting(FEATURES | STREAMS | GROW))
    s.sendall(join_rec(bytes.fromhex(tokenhex), index, count))
    what = answer(s)
    print("joined" if what == "other J" else what, flush=True)
    if what != "other J":
        return 0
    if plan == "hold":
        pass
    elif plan == "junk":
        send_quiet(s, b"this is no chunk of a weir stream" * 4)
    elif plan == "huge":
        send_quiet(s, chunk_hdr(5, 0xFFFFFFFF))
    elif plan == "zero":
        send_quiet(s, chunk_hdr(5, 0))
    elif plan == "old":
        send_quiet(s, chunk_hdr(0, 4096) + b"\xa5" * 4096)
    elif plan == "far":
        send_quiet(s, chunk_hdr(1 << 40, 4096) + b"\xa5" * 4096)
    elif plan.startswith("next"):
        first = int(plan.split(":")[1])
        for seq in range(first, first + 64):
            if not send_quiet(s, chunk_hdr(seq, 256 << 10) + b"\xa5" * (256 << 10)):
                break
    elif plan == "dribble":
        send_quiet(s, chunk_hdr(1 << 40, 1000))
        for _ in range(15):
            if not send_quiet(s, b"x"):
                break
            time.sleep(1)
    else:
        print("unknown plan", flush=True)
        return 2
    print(held(s, 15), flush=True)
    return 0


def mode_flood(host, port, n, hold, greet_half):
    socks, greeted = [], 0
    for _ in range(n):
        try:
            socks.append(connect(host, port))
        except OSError as e:
            print("connect failed: %s" % e, flush=True)
            break
    if greet_half:
        g = greeting(FEATURES | STREAMS)[:16] if greet_half == 1 else \
            greeting(FEATURES | STREAMS | GROW | 0x2 | 0x40 | 0x10)
        for s in socks:
            try:
                s.sendall(g)
            except OSError:
                pass
        print("sent %d greetings" % len(socks), flush=True)
    until = time.time() + hold
    open_ = set(socks)
    seen = set()
    while time.time() < until and open_:
        r, _, _ = select.select(list(open_), [], [], 0.2)
        for s in r:
            try:
                got = s.recv(4096)
            except OSError:
                got = b""
            if got:
                seen.add(s)
            else:
                open_.discard(s)
    greeted = len(seen)
    print("open %d" % len(open_), flush=True)
    print("greeted %d" % greeted, flush=True)
    for s in socks:
        s.close()
    return 0


def mode_churn(host, port, secs, keep):
    socks, opened = [], 0
    half = greeting(FEATURES | STREAMS)[:16]
    until = time.time() + secs
    while time.time() < until:
        if len(socks) >= keep:
            socks.pop(0).close()
        try:
            s = connect(host, port)
            s.setblocking(False)
            try:
                s.send(half)
            except OSError:
                pass
            socks.append(s)
            opened += 1
            if opened == keep:
                print("churning", flush=True)
        except OSError:
            time.sleep(0.01)
    for s in socks:
        s.close()
    print("opened %d" % opened, flush=True)
    return 0


def record_kinds(got):
    """The types of the whole records in got, a refusal's message after
    its 'S'."""
    kinds = []
    p = 0
    while p + 8 <= len(got):
        m, plen = struct.unpack_from("<II", got, p)
        if m != MAGIC:
            break
        kinds.append(chr(got[p + 8]))
        if chr(got[p + 8]) == "S":
            kinds.append("(" + status_msg(got[p:]) + ")")
        p += 8 + plen
    return kinds


def mode_slowloris(host, port, secs):
    s = connect(host, port)
    data = greeting(FEATURES | STREAMS | GROW) + join_rec(os.urandom(16), 1, 2)
    sent = [0]

    def one_byte():
        if sent[0] < len(data):
            try:
                s.send(data[sent[0]:sent[0] + 1])
            except OSError:
                pass
            sent[0] += 1

    closed, took, got = watch(s, secs, one_byte)
    if closed:
        print("closed after %.1f s, %d bytes sent, read: %s"
              % (took, sent[0], " ".join(record_kinds(got))), flush=True)
    else:
        print("still open after %d s" % secs, flush=True)
    return 0


def token_of(arg):
    """TOKENHEX, or @FILE: the token in FILE once it is there (20 s)."""
    if not arg.startswith("@"):
        return arg
    print("waiting for the token", flush=True)
    until = time.time() + 20
    while time.time() < until:
        try:
            with open(arg[1:]) as f:
                t = f.read().strip()
            if len(t) == 32:
                return t
        except OSError:
            pass
        time.sleep(0.002)
    raise SystemExit("no token in " + arg[1:])


def mode_resume(host, port, tokenhex):
    tokenhex = token_of(tokenhex)
    s = connect(host, port)
    typ, rec = read_record(s)
    if typ != "G":
        print("no greeting", flush=True)
        return 2
    def fill(b):
        b[16:32] = bytes.fromhex(tokenhex)
    s.sendall(greeting(FEATURES | STREAMS | GROW | 0x10 | 0x20) + record("R", 40, fill))
    typ, rec = read_record(s, 3)
    if typ is None:
        print(held(s, 15), flush=True)
    elif typ == "":
        print("closed", flush=True)
    else:
        print("answer " + typ + (": " + status_msg(rec) if typ == "S" else ""), flush=True)
        print(held(s, 15), flush=True)
    return 0


def mode_header(host, port):
    s = connect(host, port)
    typ, rec = read_record(s)
    if typ != "G":
        print("no greeting", flush=True)
        return 2
    s.sendall(greeting(FEATURES | STREAMS | GROW) + header_rec())
    print(answer(s), flush=True)
    return 0


def mode_keyless(host, port, tokenhex):
    s = connect(host, port)
    typ, rec = read_record(s)
    if typ != "G":
        print("no greeting", flush=True)
        return 2
    s.sendall(greeting(FEATURES | STREAMS | GROW) + join_rec(bytes.fromhex(tokenhex), 1, 2))
    what = answer(s)
    print("joined" if what == "other J" else what, flush=True)
    return 0


# ---- the on-path reader ---------------------------------------------------

def pump(src, dst, sniff, tokfile):
    buf = b""
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            if sniff is not None and not sniff["done"]:
                buf += b
                p = 32 if len(buf) >= 32 else None   # the receiver's greeting
                while p is not None and p + 8 <= len(buf):
                    m, plen = struct.unpack_from("<II", buf, p)
                    if m != MAGIC or p + 8 + plen > len(buf):
                        break
                    if chr(buf[p + 8]) == "N":
                        with open(tokfile + ".tmp", "w") as f:
                            f.write(buf[p + 16:p + 32].hex() + "\n")
                        os.rename(tokfile + ".tmp", tokfile)
                        sniff["done"] = True
                        break
                    p += 8 + plen
                if len(buf) > 1 << 16:
                    sniff["done"] = True
            dst.sendall(b)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def mode_proxy(portfile, target, tokfile):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    first = True
    while True:
        c, _ = ls.accept()
        c.settimeout(None)
        try:
            u = connect("127.0.0.1", target)
            u.settimeout(None)
        except OSError:
            c.close()
            continue
        sniff = {"done": False} if first else None
        first = False
        threading.Thread(target=pump, args=(c, u, None, None), daemon=True).start()
        threading.Thread(target=pump, args=(u, c, sniff, tokfile), daemon=True).start()


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    m = argv[1]
    if m == "proxy":
        return mode_proxy(argv[2], argv[3], argv[4])
    if m == "flood":
        return mode_flood(argv[2], argv[3], int(argv[4]), float(argv[5]),
                          int(argv[6]) if len(argv) > 6 else 0)
    if m == "churn":
        return mode_churn(argv[2], argv[3], float(argv[4]), int(argv[5]))
    if m == "slowloris":
        return mode_slowloris(argv[2], argv[3], float(argv[4]))
    if m == "join":
        return mode_join(argv[2], argv[3], argv[4], argv[5], argv[6:])
    if m == "resume":
        return mode_resume(argv[2], argv[3], argv[4])
    if m == "header":
        return mode_header(argv[2], argv[3])
    if m == "keyless-on-keyed":
        return mode_keyless(argv[2], argv[3], argv[4])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
