/*
 * fuzz_stripe.c - libFuzzer target for the gathering end of a spread
 * stream (link/stripe.c, what a receiver runs on its connections when a
 * sender uses several): the chunk headers and their numbers, from up to
 * four connections (socket pairs), into a window of a few chunks.
 *
 * The first input byte picks the connections (1-4) and the window; the
 * second a mode.  Odd: the rest is pieces [connection, length, bytes]
 * written to the connections as they come (junk, mostly).  Even: the rest
 * is a stream the target cuts into well-formed chunks itself (sizes and
 * connections from the input), then damages one chunk's number, or none;
 * undamaged, what comes back must be the stream, byte for byte.
 */
#include <errno.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/sync.h"
#include "link/stripe.h"
#include "os/os.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void wake_handler(int sig)
{
    (void)sig;
}

static void setup_once(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = wake_handler;
    sigaction(SYNC_WAKE_SIGNAL, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void put(int fd, const void *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return;   /* the gathering end failed and left: the rest is moot */
        p = (const char *)p + w;
        n -= (size_t)w;
    }
}

/* Odd mode: pieces as they come. */
static void feed_raw(const uint8_t *d, size_t n, int *raw, int conns)
{
    size_t i = 0;
    while (i + 2 <= n) {
        int c = d[i] % conns;
        size_t len = d[i + 1];
        i += 2;
        if (len > n - i)
            len = n - i;
        put(raw[c], d + i, len);
        i += len;
    }
}

/* Even mode: the stream after 3 bytes (chunk size, connection stride, a
 * chunk to misnumber: 0 none) cut into chunks; true when undamaged. */
static bool feed_chunks(const uint8_t *d, size_t n, int *raw, int conns)
{
    if (n < 3)
        return true;
    size_t step = 1 + (size_t)d[0] * 3;
    unsigned stride = d[1], damage = d[2];
    d += 3;
    n -= 3;
    unsigned char hdr[CODEC_CHUNK_HEADER];
    uint64_t seq = 0;
    for (size_t off = 0; off < n; off += step, seq++) {
        size_t len = n - off < step ? n - off : step;
        uint64_t num = damage && seq + 1 == damage ? seq + (d[off] % 3) - 1 : seq;
        codec_chunk(hdr, num, (uint32_t)len);
        int c = (int)((seq * (stride | 1)) % (unsigned)conns);
        put(raw[c], hdr, sizeof hdr);
        put(raw[c], d + off, len);
    }
    return damage == 0 || damage > seq;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    setup_once();
    int conns = 1 + data[0] % 4;
    unsigned window = 2 + (data[0] >> 2) % 8;
    struct transport b[4], in;
    int raw[4];
    for (int i = 0; i < conns; i++) {
        int fds[2], big = 1 << 20;
        if (os_socketpair(fds) != 0)
            abort();
        setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
        raw[i] = fds[0];
        transport_tcp(&b[i], fds[1], "conn");
    }
    struct weir_error err;
    if (stripe_in(&in, b, conns, window, NULL, &err) != 0)
        abort();
    bool whole = true;
    if (data[1] & 1)
        feed_raw(data + 2, size - 2, raw, conns);
    else
        whole = feed_chunks(data + 2, size - 2, raw, conns);
    for (int i = 0; i < conns; i++)
        shutdown(raw[i], SHUT_WR);
    unsigned char *got = malloc(size + 1);
    size_t have = 0;
    ssize_t r;
    while (got && (r = in.ops->read(&in, got + have, size + 1 - have, 10000, NULL)) > 0)
        have += (size_t)r;
    if (!(data[1] & 1) && whole && size >= 5 && (have != size - 5 ||
                                                 memcmp(got, data + 5, have) != 0))
        { fprintf(stderr, "have %zu of %zu: %s\n", have, size - 5, stripe_why(&in)); abort(); }   /* a well-formed spread stream must come back whole */
    free(got);
    in.ops->abort(&in);
    in.ops->close(&in, false, NULL, &err);
    for (int i = 0; i < conns; i++)
        close(raw[i]);
    return 0;
}
