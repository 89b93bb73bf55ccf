/*
 * fuzz_sealed.c - libFuzzer target for the receiving side of an encrypted
 * connection after its handshake: the sealed-record transport
 * (transport_sealed.c, the code the reader runs) fed from a socket, and the
 * weir stream decoder behind it.  The keys are a fixed test key.
 *
 * An attacker cannot forge a tag, so random bytes alone would only reach the
 * first check.  The first input byte picks a mode: odd, the rest is taken
 * as it comes off the wire; even, the rest is plaintext that the target
 * seals itself into records (sizes and flags from the input), then flips,
 * cuts, duplicates or drops one (positions from the input): the fuzzer so
 * explores sealed streams that open, and the damage done to them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/seal.h"
#include "harness.h"
#include "transport/transport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WIRE_MAX (1 << 20)

static void test_keys(struct seal_session *k)
{
    memset(k, 0, sizeof *k);
    for (int i = 0; i < SEAL_BASE_BYTES; i++) {
        k->to_receiver.base[i] = (unsigned char)(i + 1);
        k->to_sender.base[i] = (unsigned char)(i + 101);
    }
    memset(k->to_receiver.iv, 0x5a, SEAL_IV_BYTES);
    memset(k->to_sender.iv, 0xa5, SEAL_IV_BYTES);
    k->epoch_records = 3;   /* cross epochs soon */
}

/* Mode even: seal data[..] as records, then damage one (op from input). */
static size_t build(const uint8_t *d, size_t n, unsigned char *wire, const struct seal_session *k)
{
    if (n < 4)
        return 0;
    unsigned chunk = (unsigned)d[0] * 7 + 1, op = d[1] % 5, where = d[2] | d[3] << 8;
    d += 4;
    n -= 4;
    struct sealer s;
    struct weir_error err;
    if (sealer_init(&s, &k->to_receiver, k->epoch_records, &err))
        return 0;
    size_t len = 0;
    uint64_t num = 0;
    size_t starts[256], lens[256];
    int nrec = 0;
    for (size_t off = 0; off < n && nrec < 256;) {
        size_t take = n - off < chunk ? n - off : chunk;
        if (len + take + SEAL_OVERHEAD > WIRE_MAX)
            break;
        bool last = off + take == n;
        starts[nrec] = len;
        lens[nrec] = seal_record(&s, num++, last ? SEAL_END : 0, d + off, take, wire + len);
        len += lens[nrec++];
        off += take;
    }
    sealer_free(&s);
    if (len == 0)
        return 0;
    int r = (int)(where % (unsigned)nrec);
    switch (op) {
    case 0:   /* flip a bit */
        wire[where % len] ^= (unsigned char)(1u << (d[0] % 8));
        break;
    case 1:   /* cut */
        len = where % len;
        break;
    case 2:   /* duplicate a record */
        if (len + lens[r] <= WIRE_MAX) {
            memmove(wire + starts[r] + lens[r], wire + starts[r], len - starts[r]);
            len += lens[r];
        }
        break;
    case 3:   /* drop a record */
        memmove(wire + starts[r], wire + starts[r] + lens[r], len - starts[r] - lens[r]);
        len -= lens[r];
        break;
    default:  /* leave it whole */
        break;
    }
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > WIRE_MAX)
        return 0;
    static unsigned char wire[WIRE_MAX];
    struct seal_session keys;
    test_keys(&keys);
    size_t len = data[0] & 1 ? size - 1 : build(data + 1, size - 1, wire, &keys);
    const unsigned char *bytes = data[0] & 1 ? data + 1 : wire;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 0;
    int big = WIRE_MAX + 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(sv[0], bytes + off, len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    close(sv[0]);
    struct transport t;
    struct weir_error err;
    transport_tcp(&t, sv[1], "input fuzz");
    if (transport_sealed(&t, &keys, false, 0, NULL, 0, &err)) {
        close(sv[1]);
        return 0;
    }
    /* everything the records hold, then the stream decoder over it */
    static unsigned char plain[WIRE_MAX];
    size_t plen = 0;
    atomic_bool stop = false;
    for (;;) {
        ssize_t r = t.ops->read(&t, plain + plen, sizeof plain - plen, 1000, &stop);
        if (r <= 0)
            break;
        plen += (size_t)r;
    }
    transport_close(&t, false, NULL, &err);
    uint8_t *out = NULL;
    size_t outlen = 0;
    if (harness_decode(plain, plen, 4096, &out, &outlen, &err) == 0)
        free(out);
    return 0;
}
