/*
 * test_stripe.c - a stream spread over several connections comes back in
 * order and whole, at awkward sizes and connection counts, with one
 * connection much slower than the others (so that chunks arrive out of
 * order and the window fills), also when some connections are let go
 * while it runs; and a gathering end refuses what is not
 * its stream: junk, a chunk out of its connection's order, one carried
 * twice, a connection that ends inside a chunk.  The connections are
 * socket pairs; nothing here is timed.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "base/sync.h"
#include "link/stripe.h"
#include "os/os.h"

static void wake_handler(int sig)
{
    (void)sig;
}

/* n socket pairs: a[i] the spreading ends, b[i] the gathering ends */
static void pairs(int n, struct transport *a, struct transport *b, int slow_sndbuf)
{
    for (int i = 0; i < n; i++) {
        int fds[2];
        CHECK(os_socketpair(fds) == 0, "socketpair: %s", strerror(errno));
        if (i == 0 && slow_sndbuf > 0) {
            setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &slow_sndbuf, sizeof slow_sndbuf);
            setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &slow_sndbuf, sizeof slow_sndbuf);
        }
        char name[32];
        snprintf(name, sizeof name, "conn %d", i);
        transport_tcp(&a[i], fds[0], name);
        transport_tcp(&b[i], fds[1], name);
    }
}

struct writer_arg {
    struct transport *t;
    const unsigned char *data;
    size_t len;
    uint32_t seed;
    int rc;
    size_t let_go_at;   /* once this much is written, only `keep` carry it (0: never) */
    int keep, gone;
};

static uint32_t next_rand(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* Write the data in pieces of awkward sizes, two iovecs at a time. */
static void *writer(void *arg)
{
    struct writer_arg *w = arg;
    size_t done = 0;
    w->rc = 0;
    while (done < w->len) {
        size_t want = 1 + next_rand(&w->seed) % (600u << 10);
        if (want > w->len - done)
            want = w->len - done;
        size_t first = want / 3;
        struct iovec iov[2] = {{(void *)(w->data + done), first},
                               {(void *)(w->data + done + first), want - first}};
        ssize_t r = w->t->ops->writev(w->t, iov, 2, 10000, NULL);
        if (r <= 0) {
            w->rc = -1;
            return NULL;
        }
        done += (size_t)r;
        if (w->let_go_at && done >= w->let_go_at && w->gone == 0)
            w->gone = stripe_let_go(w->t, w->keep);
    }
    struct weir_error e;
    if (w->t->ops->half_close(w->t, &e) != 0)
        w->rc = -1;
    return NULL;
}

/* n connections carry len bytes through a window of `window` chunks (one
 * of them slow: a send buffer of `slow` bytes, 0 none); once let_go_at
 * bytes are written (0: never), the first `keep` alone carry the rest. */
static void trip(int n, size_t len, unsigned window, int slow, size_t let_go_at, int keep)
{
    struct transport a[CODEC_STREAMS_MAX], b[CODEC_STREAMS_MAX], out, in;
    struct weir_error err;
    pairs(n, a, b, slow);
    CHECK(stripe_out(&out, a, n, 10000, NULL, &err) == 0, "stripe_out: %s", err.msg);
    CHECK(stripe_in(&in, b, n, window, NULL, &err) == 0, "stripe_in: %s", err.msg);
    CHECK(stripe_count(&out) == n && stripe_count(&in) == n, "%d connections", n);
    unsigned char *data = malloc(len + 1), *got = malloc(len + 1);
    CHECK(data && got, "memory");
    uint32_t s = (uint32_t)(len * 31 + (size_t)n);
    for (size_t i = 0; i < len; i++)
        data[i] = (unsigned char)next_rand(&s);
    struct writer_arg w = {.t = &out, .data = data, .len = len, .seed = (uint32_t)n,
                           .let_go_at = let_go_at, .keep = keep};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, writer, &w) == 0, "thread");
    size_t have = 0;
    for (;;) {
        size_t want = 1 + next_rand(&s) % (300u << 10);
        ssize_t r = in.ops->read(&in, got + have, want < len + 1 - have ? want : len + 1 - have,
                                 20000, NULL);
        CHECK(r >= 0, "%d connections, %zu bytes: read at %zu: %s (%s)", n, len, have,
              strerror(errno), stripe_why(&in));
        if (r == 0)
            break;
        have += (size_t)r;
        CHECK(have <= len, "more came than was sent");
    }
    pthread_join(th, NULL);
    CHECK(w.rc == 0, "%d connections, %zu bytes: the writer failed: %s", n, len,
          stripe_why(&out));
    CHECK(have == len && memcmp(data, got, len) == 0,
          "%d connections, %zu bytes, window %u: %zu came back, %s", n, len, window, have,
          have == len ? "different" : "short");
    CHECK(!let_go_at || w.gone == n - keep, "%d of %d let go after %zu bytes (%d)", n - keep, n,
          let_go_at, w.gone);
    CHECK(out.ops->close(&out, true, NULL, &err) == 0, "close out: %s", err.msg);
    CHECK(in.ops->close(&in, true, NULL, &err) == 0, "close in: %s", err.msg);
    free(data);
    free(got);
}

static void round_trip(int n, size_t len, unsigned window, int slow)
{
    trip(n, len, window, slow, 0, 0);
}

/* A gathering end of n connections fed by hand through raw[i]. */
static void gather_raw(int n, struct transport *in, int *raw)
{
    struct transport b[CODEC_STREAMS_MAX];
    struct weir_error err;
    for (int i = 0; i < n; i++) {
        int fds[2];
        CHECK(os_socketpair(fds) == 0, "socketpair");
        raw[i] = fds[0];
        transport_tcp(&b[i], fds[1], "conn");
    }
    CHECK(stripe_in(in, b, n, 8, NULL, &err) == 0, "stripe_in: %s", err.msg);
}

static void put_chunk(int fd, uint64_t seq, uint32_t len, unsigned char fill)
{
    unsigned char buf[CODEC_CHUNK_HEADER + 64];
    codec_chunk(buf, seq, len);
    memset(buf + CODEC_CHUNK_HEADER, fill, len);
    CHECK(write(fd, buf, CODEC_CHUNK_HEADER + len) == (ssize_t)(CODEC_CHUNK_HEADER + len),
          "write");
}

/* Read until the stream fails: the bytes handed out first, errno after. */
static size_t read_to_failure(struct transport *in, int *err)
{
    unsigned char buf[256];
    size_t total = 0;
    for (;;) {
        ssize_t r = in->ops->read(in, buf, sizeof buf, 5000, NULL);
        if (r <= 0) {
            *err = r == 0 ? 0 : errno;
            return total;
        }
        total += (size_t)r;
    }
}

static void refused(const char *what, void (*feed)(int *raw), size_t handed, int want_err,
                    const char *want_why)
{
    struct transport in;
    int raw[2], e;
    gather_raw(2, &in, raw);
    feed(raw);
    size_t got = read_to_failure(&in, &e);
    /* what came in order before the failure is handed out, but a failure
     * may stop the other connections before they read theirs: at most */
    CHECK((want_err ? got <= handed : got == handed) && e == want_err,
          "%s: %zu bytes then %s, wanted %zu then %s", what, got,
          strerror(e), handed, strerror(want_err));
    CHECK(!want_why || strstr(stripe_why(&in), want_why), "%s: why is \"%s\"", what,
          stripe_why(&in));
    struct weir_error err;
    in.ops->abort(&in);
    in.ops->close(&in, false, NULL, &err);
    close(raw[0]);
    close(raw[1]);
}

static void feed_junk(int *raw)
{
    put_chunk(raw[0], 0, 10, 'a');
    CHECK(write(raw[1], "0123456789abcdefgh", 18) == 18, "write");
}

static void feed_backwards(int *raw)
{
    put_chunk(raw[1], 0, 10, 'a');
    put_chunk(raw[0], 2, 10, 'c');
    put_chunk(raw[0], 1, 10, 'b');
}

static void feed_twice(int *raw)
{
    put_chunk(raw[0], 1, 10, 'b');
    put_chunk(raw[1], 1, 10, 'b');
}

static void feed_cut(int *raw)
{
    put_chunk(raw[0], 0, 10, 'a');
    unsigned char buf[CODEC_CHUNK_HEADER + 5];
    codec_chunk(buf, 1, 10);
    CHECK(write(raw[1], buf, sizeof buf) == (ssize_t)sizeof buf, "write");
    shutdown(raw[1], SHUT_WR);
}

static void feed_gap(int *raw)
{
    put_chunk(raw[0], 0, 10, 'a');
    put_chunk(raw[1], 2, 10, 'c');
    shutdown(raw[0], SHUT_WR);
    shutdown(raw[1], SHUT_WR);
}

static void feed_beyond(int *raw)
{
    put_chunk(raw[0], 1, 10, 'b');
    put_chunk(raw[1], 40, 10, 'x');   /* beyond the window of 8, and chunk 0 never comes */
    shutdown(raw[0], SHUT_WR);
}

static void feed_late(int *raw)
{
    put_chunk(raw[0], 0, 10, 'a');
    put_chunk(raw[1], 1, 10, 'b');
    put_chunk(raw[0], 2, 10, 'c');
    put_chunk(raw[1], 0, 10, 'a');   /* handed out already, or claimed */
    shutdown(raw[0], SHUT_WR);
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = wake_handler;
    sigaction(SYNC_WAKE_SIGNAL, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    static const size_t sizes[] = {1, 4095, CODEC_CHUNK_MAX - 1, CODEC_CHUNK_MAX + 1,
                                   (3u << 20) + 17, (9u << 20) + 4093};
    static const int counts[] = {1, 2, 3, 4, 7, 16};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++)
            round_trip(counts[i], sizes[j], 2u * (unsigned)counts[i], 4096);
    /* a wide window, and no slow connection */
    round_trip(4, (16u << 20) + 1, 256, 0);
    round_trip(8, (16u << 20) + 3, 16, 4096);
    /* connections let go while the stream runs end cleanly at the
     * gathering end, which goes on over the rest: whole */
    trip(8, (9u << 20) + 4093, 16, 4096, 1u << 20, 3);
    trip(4, (3u << 20) + 17, 8, 0, CODEC_CHUNK_MAX + 1, 1);
    trip(2, (3u << 20) + 17, 4, 4096, 1, 1);

    refused("junk on a connection", feed_junk, 10, EPROTO, "connection 2 of 2: not a chunk");
    refused("a chunk out of its connection's order", feed_backwards, 10, EPROTO,
            "out of its connection's order");
    refused("a chunk carried twice", feed_twice, 0, EPROTO, "another connection carried");
    refused("a connection that ends inside a chunk", feed_cut, 10, EPIPE,
            "connection 2 of 2: the connection ended inside a chunk");
    refused("every connection ended with a chunk missing", feed_gap, 10, EPROTO,
            "chunk 1 of the stream never came, and chunks after it did");
    refused("a chunk the stream had already", feed_late, 30, EPROTO, NULL);
    refused("a chunk beyond the window with the one needed nowhere", feed_beyond, 0, EPROTO,
            "connection 2 of 2: the chunk the stream needs is on no connection");
    CHECK_DONE();
}
