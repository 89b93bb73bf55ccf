/*
 * stripe.c - one transfer over several TCP connections: chunks dealt out
 * by a spreading end and put back in order by a gathering end.  See
 * stripe.h.
 *
 * The threads.  Each connection has a thread of its own that does nothing
 * but move chunks across it; the owner's thread (the output's writer, or
 * the engine's reader) calls writev or read, which only copies into or out
 * of chunk memory under the stripe's lock.  A thread blocks in its
 * connection's I/O with the lock released, so one stalled connection never
 * holds up the others or the owner.  They stop when the stripe is closed
 * or aborted: `quit` is set and the threads are signalled (the owner's
 * wake signal, which interrupts a blocked poll with EINTR) until each has
 * left; a connection is never shut down to wake a thread, since that would
 * show the peer a clean end.
 */
#include "link/stripe.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/sync.h"

#define QUEUE_PER_CONN 2          /* chunks waiting to be sent, per connection */
#define TICK_MS 100               /* how often a waiting owner looks at its stop flag */
#define SLOT (CODEC_CHUNK_HEADER + CODEC_CHUNK_MAX)

enum chunk_state { CHUNK_FREE, CHUNK_QUEUED, CHUNK_SENDING };

struct chunk {
    enum chunk_state state;
    uint64_t seq;
    uint32_t len;              /* bytes of the stream after the header */
    unsigned char *mem;        /* SLOT bytes */
};

struct conn {
    struct stripe *s;
    int index;
    struct transport t;
    pthread_t thread;
    bool started;
    bool running;              /* lock */
    bool ended;                /* lock: gathering, its peer ended it cleanly */
    uint64_t last;             /* its thread's: the last chunk number it carried */
    bool any;                  /* its thread's: it carried one */
    bool over;                 /* the owner's: its direction ended with its last record */
    bool let_go;               /* lock: spreading, its thread ended it before the stream's
                                  end (stripe_let_go) */
    bool waiting;              /* lock: it waits for the window with a chunk's header */
    uint64_t pending;          /* lock: that chunk's number */
};

struct stripe {
    bool out;                  /* spreading, else gathering */
    int n;
    struct conn c[CODEC_STREAMS_MAX];
    pthread_mutex_t lock;
    pthread_cond_t cv;
    atomic_bool quit;          /* the threads must leave */
    atomic_bool *stop;         /* the owner's */
    int timeout_ms;
    int err;                   /* lock: the first failure's errno; 0: none */
    char why[WEIR_ERROR_MAX];  /* lock: and in words */
    int running;               /* lock: threads not yet left */
    /* spreading */
    struct chunk *q;
    int nq;
    uint64_t next_seq;         /* the owner's: the next chunk's number */
    bool closing;              /* lock: no more chunks come */
    int carry;                 /* lock: connections from this one on take no more chunks */
    /* gathering: chunk seq lives in slot seq % window while it is held */
    unsigned window;
    unsigned char *store;      /* window * CODEC_CHUNK_MAX */
    uint32_t *have;            /* lock: its length once read whole; 0: not (yet) */
    bool *claimed;             /* lock: a thread reads into it */
    uint64_t expected;         /* lock: the next chunk the stream needs */
    size_t at;                 /* lock: bytes of it handed out */
    int live;                  /* lock: connections not yet ended */
    int waiting;               /* lock: of them, waiting with a chunk beyond the window */
};

static const struct transport_ops out_ops, in_ops;

/* ---- shared ---------------------------------------------------------------- */

/* What a failed read or write of a connection means, in words. */
static const char *cause(const struct conn *c, int err)
{
    if (c->t.sealed && err == EBADMSG)
        return "an encrypted record does not open (corrupt, forged, dropped, duplicated or "
               "reordered)";
    if (c->t.sealed && err == EPROTO)
        return "data after the end of the encrypted stream";
    if (c->t.sealed && err == EPIPE)
        return "the encrypted stream was cut short";
    return strerror(err);
}

/* The first failure, in words; every waiter is woken. */
static void fail_locked(struct stripe *s, const struct conn *c, int err, const char *what)
{
    if (s->err == 0) {
        s->err = err ? err : EIO;
        snprintf(s->why, sizeof s->why, "connection %d of %d: %s", c->index + 1, s->n,
                 what ? what : cause(c, s->err));
    }
    sync_broadcast(&s->cv);
}

static void fail(struct stripe *s, const struct conn *c, int err, const char *what)
{
    sync_lock(&s->lock);
    fail_locked(s, c, err, what);
    sync_unlock(&s->lock);
}

static void left(struct conn *c)
{
    struct stripe *s = c->s;
    sync_lock(&s->lock);
    c->running = false;
    s->running--;
    sync_broadcast(&s->cv);
    sync_unlock(&s->lock);
}

/* Signal the threads until every one has left (a signal that comes just
 * before a thread blocks is lost, so it is sent again), then join them. */
static void stop_threads(struct stripe *s)
{
    atomic_store(&s->quit, true);
    sync_lock(&s->lock);
    sync_broadcast(&s->cv);
    while (s->running > 0) {
        for (int i = 0; i < s->n; i++)
            if (s->c[i].running)
                sync_kill(s->c[i].thread, SYNC_WAKE_SIGNAL);
        struct timespec d = clock_deadline(0.02);
        sync_wait_until(&s->cv, &s->lock, &d);
    }
    sync_unlock(&s->lock);
    for (int i = 0; i < s->n; i++)
        if (s->c[i].started) {
            sync_join(s->c[i].thread);
            s->c[i].started = false;
        }
}

/* Each thread takes the wake signal (the process's handler interrupts a
 * blocked call with it) and nothing else. */
static void take_wake_signal(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SYNC_WAKE_SIGNAL);
    sync_sigmask(SIG_UNBLOCK, &set);
}

static void free_stripe(struct stripe *s)
{
    if (s->q)
        for (int i = 0; i < s->nq; i++)
            free(s->q[i].mem);
    free(s->q);
    free(s->store);
    free(s->have);
    free(s->claimed);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* A stripe with its lock and condition, or NULL. */
static struct stripe *new_stripe(void)
{
    struct stripe *s = calloc(1, sizeof *s);
    if (s) {
        s->carry = CODEC_STREAMS_MAX;
        sync_mutex_init(&s->lock);
        sync_cond_init(&s->cv);
    }
    return s;
}

/* What could not be allocated (s, if any, is freed): the connections are
 * closed, since they are the stripe's to close. */
static int no_memory(struct stripe *s, struct transport *conns, int n, struct weir_error *err)
{
    if (s)
        free_stripe(s);
    for (int i = 0; i < n; i++)
        transport_close(&conns[i], false, NULL, &(struct weir_error){0});
    return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "%s", conns[0].name);
}

static struct stripe *stripe_of(const struct transport *t)
{
    return t->stripe;
}

/* The errno of a failure, or ECANCELED once the owner stops. */
static int failed_locked(struct stripe *s)
{
    if (s->err)
        return s->err;
    if (s->stop && atomic_load(s->stop))
        return ECANCELED;
    return 0;
}

/* Wait on the stripe's condition until woken, a tick, or the deadline
 * (deadline_ms < 0: none): false once the deadline passed. */
static bool wait_tick(struct stripe *s, double deadline)
{
    double now = clock_now();
    double until = now + TICK_MS / 1000.0;
    if (deadline >= 0 && deadline < until)
        until = deadline;
    struct timespec d = clock_deadline(until - now > 0 ? until - now : 0);
    sync_wait_until(&s->cv, &s->lock, &d);
    return deadline < 0 || clock_now() < deadline;
}

/* Move the connections in and start their threads. */
static int start(struct stripe *s, struct transport *conns, int n, void *(*fn)(void *),
                 struct weir_error *err)
{
    s->n = n;
    for (int i = 0; i < n; i++) {
        s->c[i].s = s;
        s->c[i].index = i;
        s->c[i].t = conns[i];
        transport_none(&conns[i]);
    }
    s->live = n;
    for (int i = 0; i < n; i++) {
        sync_lock(&s->lock);
        s->c[i].running = true;
        s->running++;
        sync_unlock(&s->lock);
        if (sync_create(&s->c[i].thread, fn, &s->c[i], err) != 0) {
            sync_lock(&s->lock);
            s->c[i].running = false;
            s->running--;
            sync_unlock(&s->lock);
            return -1;
        }
        s->c[i].started = true;
    }
    return 0;
}

/* Close every connection: the first's result is the transport's. */
static int close_all(struct stripe *s, bool success, atomic_bool *stop, struct weir_error *err)
{
    int rc = 0;
    for (int i = s->n - 1; i >= 0; i--) {
        struct weir_error e;
        if (transport_close(&s->c[i].t, success, stop, i == 0 ? err : &e) != 0 && i == 0)
            rc = -1;
    }
    return rc;
}

/* The transport st becomes: the first connection's name and descriptor. */
static void become(struct transport *st, struct stripe *s, const struct transport_ops *ops)
{
    const struct transport *first = &s->c[0].t;
    transport_none(st);
    st->ops = ops;
    st->kind = TRANSPORT_TCP;
    st->fd = first->fd;
    st->status = first->status;
    st->is_socket = true;
    st->owned = true;
    snprintf(st->name, sizeof st->name, "%s", first->name);
    st->stripe = s;
    st->sealed_below = true;
    for (int i = 0; i < s->n; i++)
        st->sealed_below &= s->c[i].t.sealed != NULL;
}

int stripe_count(const struct transport *st)
{
    if (!st->stripe)
        return 1;
    struct stripe *s = stripe_of(st);
    sync_lock(&s->lock);
    int n = s->n;
    sync_unlock(&s->lock);
    return n;
}

int stripe_fd(const struct transport *st, int i)
{
    if (!st->stripe)
        return i == 0 ? st->fd : -1;
    struct stripe *s = stripe_of(st);
    sync_lock(&s->lock);
    int fd = i >= 0 && i < s->n ? s->c[i].t.fd : -1;
    sync_unlock(&s->lock);
    return fd;
}

struct transport *stripe_first(struct transport *st)
{
    return st->stripe ? &stripe_of(st)->c[0].t : st;
}

void stripe_hush(struct transport *st)
{
    if (st->stripe && !stripe_of(st)->out)
        stop_threads(stripe_of(st));
}

const char *stripe_why(const struct transport *st)
{
    if (!st->stripe)
        return "";
    struct stripe *s = stripe_of(st);
    sync_lock(&s->lock);
    const char *why = s->err ? s->why : "";
    sync_unlock(&s->lock);
    return why;
}

/* ---- spreading --------------------------------------------------------------- */

/* The oldest chunk waiting, taken for sending on c; NULL when the thread
 * must leave (a failure, quit, no more chunks come and none wait, or c
 * was let go). */
static struct chunk *take_chunk(struct stripe *s, const struct conn *c)
{
    sync_lock(&s->lock);
    for (;;) {
        struct chunk *oldest = NULL;
        for (int i = 0; i < s->nq; i++)
            if (s->q[i].state == CHUNK_QUEUED && (!oldest || s->q[i].seq < oldest->seq))
                oldest = &s->q[i];
        if (s->err || atomic_load(&s->quit) || (!oldest && s->closing) ||
            c->index >= s->carry) {
            sync_unlock(&s->lock);
            return NULL;
        }
        if (oldest) {
            oldest->state = CHUNK_SENDING;
            sync_unlock(&s->lock);
            return oldest;
        }
        sync_wait(&s->cv, &s->lock);
    }
}

/* Write the whole chunk (header and data) on the connection. */
static int send_chunk(struct stripe *s, struct conn *c, struct chunk *k)
{
    size_t total = CODEC_CHUNK_HEADER + k->len, done = 0;
    while (done < total) {
        struct iovec iov = {k->mem + done, total - done};
        ssize_t w = c->t.ops->writev(&c->t, &iov, 1, s->timeout_ms, &s->quit);
        if (w < 0)
            return -1;
        done += (size_t)w;
    }
    return 0;
}

/* A direction's end, once its chunks are sent: its END record when
 * sealed, then the half-close (n: the stripe's connections, for the
 * message; stop: the caller's). */
static int end_conn(struct stripe *s, struct conn *c, int n, atomic_bool *stop,
                    struct weir_error *err)
{
    struct transport *t = &c->t;
    if (t->sealed && !c->over) {
        transport_sealed_last(t);
        unsigned char nothing = 0;
        struct iovec none = {&nothing, 0};   /* an empty record */
        if (t->ops->writev(t, &none, 1, s->timeout_ms, stop) < 0)
            return error_sys(err, t->status, errno, "%s (connection %d of %d): write", t->name,
                             c->index + 1, n);
    }
    return t->ops->half_close(t, err);
}

/* c was let go while the stream runs: its chunks are sent, so it ends
 * (its peer reads a clean end), and the stripe fails if it cannot. */
static void leave_if_let_go(struct stripe *s, struct conn *c)
{
    sync_lock(&s->lock);
    bool ends = !s->err && !atomic_load(&s->quit) && c->index >= s->carry;
    int n = s->n;
    sync_unlock(&s->lock);
    if (!ends)
        return;
    struct weir_error e;
    int rc = end_conn(s, c, n, &s->quit, &e);
    int err = errno;
    sync_lock(&s->lock);
    c->let_go = true;
    if (rc != 0 && !atomic_load(&s->quit))
        fail_locked(s, c, err, NULL);
    sync_unlock(&s->lock);
}

static void *spread_main(void *arg)
{
    struct conn *c = arg;
    struct stripe *s = c->s;
    take_wake_signal();
    struct chunk *k;
    while ((k = take_chunk(s, c)) != NULL) {
        int rc = send_chunk(s, c, k);
        int err = errno;
        sync_lock(&s->lock);
        k->state = CHUNK_FREE;
        if (rc != 0 && !atomic_load(&s->quit))
            fail_locked(s, c, err, NULL);
        sync_broadcast(&s->cv);
        sync_unlock(&s->lock);
        if (rc != 0)
            break;
    }
    leave_if_let_go(s, c);
    left(c);
    return NULL;
}

/* A free chunk for the owner, waiting for one within timeout_ms; NULL
 * with errno. */
static struct chunk *free_chunk_locked(struct stripe *s, int timeout_ms)
{
    double deadline = timeout_ms < 0 ? -1 : clock_now() + timeout_ms / 1000.0;
    for (;;) {
        int err = failed_locked(s);
        if (err) {
            errno = err;
            return NULL;
        }
        for (int i = 0; i < s->nq; i++)
            if (s->q[i].state == CHUNK_FREE)
                return &s->q[i];
        if (!wait_tick(s, deadline)) {
            errno = ETIMEDOUT;
            return NULL;
        }
    }
}

static ssize_t out_writev(struct transport *t, const struct iovec *iov, int cnt, int timeout_ms,
                          atomic_bool *stop)
{
    struct stripe *s = stripe_of(t);
    s->stop = stop;
    sync_lock(&s->lock);
    struct chunk *k = free_chunk_locked(s, timeout_ms);
    if (!k) {
        sync_unlock(&s->lock);
        return -1;
    }
    k->state = CHUNK_SENDING;   /* the owner's while it fills it */
    sync_unlock(&s->lock);
    size_t len = 0;
    for (int i = 0; i < cnt && len < CODEC_CHUNK_MAX; i++) {
        size_t take = iov[i].iov_len < CODEC_CHUNK_MAX - len ? iov[i].iov_len
                                                             : CODEC_CHUNK_MAX - len;
        memcpy(k->mem + CODEC_CHUNK_HEADER + len, iov[i].iov_base, take);
        len += take;
    }
    sync_lock(&s->lock);
    if (len == 0) {
        k->state = CHUNK_FREE;
        sync_unlock(&s->lock);
        return 0;
    }
    k->seq = s->next_seq++;
    k->len = (uint32_t)len;
    codec_chunk(k->mem, k->seq, k->len);
    k->state = CHUNK_QUEUED;
    sync_broadcast(&s->cv);
    sync_unlock(&s->lock);
    return (ssize_t)len;
}

/* Every chunk sent (or a failure), then each connection ended. */
static int out_half_close(struct transport *t, struct weir_error *err)
{
    struct stripe *s = stripe_of(t);
    sync_lock(&s->lock);
    s->closing = true;
    sync_broadcast(&s->cv);
    int failed;
    /* the owner's stop ends the wait (a signal does not wake a condition) */
    while (s->running > 0 && !(failed = failed_locked(s)))
        wait_tick(s, -1);
    failed = failed_locked(s);
    sync_unlock(&s->lock);
    if (failed == ECANCELED && !s->err) {
        errno = ECANCELED;
        return -1;
    }
    if (failed) {
        errno = failed;
        return error_set(err, t->status, "%s: %s", t->name, s->why);
    }
    /* the threads have left: what they set is the owner's to read */
    for (int i = 0; i < s->n; i++)
        if (!s->c[i].let_go && end_conn(s, &s->c[i], s->n, s->stop, err) != 0)
            return -1;
    return 0;
}

int stripe_last_record(struct transport *st, const void *rec, size_t n, int timeout_ms,
                       atomic_bool *stop)
{
    struct transport *t = stripe_first(st);
    struct stripe *s = st->stripe;
    if (s) {
        /* every chunk out first: the threads are done with the connection
         * (and the lock orders their writes before this one) */
        sync_lock(&s->lock);
        for (;;) {
            bool busy = false;
            for (int i = 0; i < s->nq; i++)
                busy |= s->q[i].state != CHUNK_FREE;
            int err = failed_locked(s);
            if (err || !busy) {
                sync_unlock(&s->lock);
                if (err) {
                    errno = err;
                    return -1;
                }
                break;
            }
            wait_tick(s, -1);
        }
        s->c[0].over = true;
    }
    if (t->sealed)
        transport_sealed_last(t);
    return transport_write_all(t, rec, n, timeout_ms, stop);
}

static ssize_t first_read(struct transport *t, void *buf, size_t n, int timeout_ms,
                          atomic_bool *stop)
{
    struct transport *c = &stripe_of(t)->c[0].t;
    return c->ops->read(c, buf, n, timeout_ms, stop);
}

static int out_wait(struct transport *t, short events, int timeout_ms, atomic_bool *stop)
{
    struct transport *c = &stripe_of(t)->c[0].t;
    return c->ops->wait(c, events & ~POLLOUT, timeout_ms, stop);
}

static void both_abort(struct transport *t)
{
    struct stripe *s = stripe_of(t);
    stop_threads(s);
    for (int i = 0; i < s->n; i++)
        s->c[i].t.ops->abort(&s->c[i].t);
}

static int both_close(struct transport *t, bool success, atomic_bool *stop,
                      struct weir_error *err)
{
    struct stripe *s = stripe_of(t);
    if (!s)
        return 0;
    if (s->out && success) {
        /* whatever is still queued goes first */
        sync_lock(&s->lock);
        s->closing = true;
        sync_broadcast(&s->cv);
        while (s->running > 0 && !s->err && !(stop && atomic_load(stop)))
            wait_tick(s, -1);
        success = s->err == 0;
        sync_unlock(&s->lock);
    }
    stop_threads(s);
    int rc = close_all(s, success, stop, err);
    free_stripe(s);
    t->stripe = NULL;
    t->fd = -1;
    return rc;
}

static const struct transport_ops out_ops = {
    .read = first_read, .writev = out_writev, .wait = out_wait,
    .half_close = out_half_close, .abort = both_abort, .close = both_close,
};

/* Start the connections' threads (fn) and make st the stripe (ops); on
 * failure everything goes: threads, connections, memory. */
static int launch(struct transport *st, struct stripe *s, struct transport *conns, int n,
                  void *(*fn)(void *), const struct transport_ops *ops, struct weir_error *err)
{
    if (start(s, conns, n, fn, err) != 0) {
        stop_threads(s);
        close_all(s, false, NULL, &(struct weir_error){0});
        free_stripe(s);
        return -1;
    }
    become(st, s, ops);
    return 0;
}

int stripe_out(struct transport *st, struct transport *conns, int n, int timeout_ms,
               atomic_bool *halt, struct weir_error *err)
{
    struct stripe *s = new_stripe();
    if (s) {
        /* room for the chunks of every connection that may join later;
         * memory for those of the ones here */
        s->nq = QUEUE_PER_CONN * n;
        s->q = calloc(QUEUE_PER_CONN * CODEC_STREAMS_MAX, sizeof *s->q);
    }
    for (int i = 0; s && s->q && i < s->nq; i++)
        if (!(s->q[i].mem = malloc(SLOT)))
            break;
    if (!s || !s->q || !s->q[s->nq - 1].mem)
        return no_memory(s, conns, n, err);
    s->out = true;
    s->timeout_ms = timeout_ms;
    s->stop = halt;
    return launch(st, s, conns, n, spread_main, &out_ops, err);
}

/* ---- gathering --------------------------------------------------------------- */

/* Read exactly n bytes of the connection.  1 done, 0 a clean end before
 * the first byte, -1 errno (EPIPE: an end in the middle). */
static int read_exact(struct stripe *s, struct conn *c, unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = c->t.ops->read(&c->t, buf + got, n - got, -1, &s->quit);
        if (r < 0)
            return -1;
        if (r == 0) {
            if (got == 0)
                return 0;
            errno = EPIPE;
            return -1;
        }
        got += (size_t)r;
    }
    return 1;
}

/* Every connection still open waits with a chunk beyond the window in
 * hand, and none holds the chunk the stream needs: it can never come (an
 * honest sender never does this: a connection's chunks rise, so the one
 * the stream needs is at the head of the connection that carries it). */
static bool stalled_locked(const struct stripe *s)
{
    if (s->waiting < s->live || s->claimed[s->expected % s->window])
        return false;
    for (int i = 0; i < s->n; i++)
        if (s->c[i].waiting && s->c[i].pending < s->expected + s->window)
            return false;   /* woken, it goes on */
    return true;
}

/* A chunk's header arrived: whether it may be read now, checked against
 * what the connection and the stream had.  Waits while it lies beyond the
 * window.  0: read it into its slot (claimed); -1: the thread leaves. */
static int admit_chunk(struct stripe *s, struct conn *c, uint64_t seq)
{
    sync_lock(&s->lock);
    const char *bad = (c->any && seq <= c->last) ? "a chunk out of its connection's order"
                      : seq < s->expected       ? "a chunk the stream already has"
                      : NULL;
    c->waiting = true;
    c->pending = seq;
    s->waiting++;
    while (!bad && !s->err && !atomic_load(&s->quit) && seq >= s->expected + s->window) {
        if (stalled_locked(s))
            bad = "the chunk the stream needs is on no connection";
        else
            sync_wait(&s->cv, &s->lock);
    }
    s->waiting--;
    c->waiting = false;
    /* the stream may have moved past it while this thread waited: another
     * connection carried it */
    if (!bad && !s->err && seq < s->expected)
        bad = "a chunk the stream already has";
    if (!bad && seq < s->expected + s->window && s->claimed[seq % s->window])
        bad = "a chunk another connection carried";
    if (bad)
        fail_locked(s, c, EPROTO, bad);
    int rc = s->err || atomic_load(&s->quit) ? -1 : 0;
    if (rc == 0)
        s->claimed[seq % s->window] = true;
    sync_unlock(&s->lock);
    c->last = seq;
    c->any = true;
    return rc;
}

/* Read one chunk into its slot: 1 read, 0 the connection ended cleanly,
 * -1 the thread leaves (a failure is recorded). */
static int gather_one(struct stripe *s, struct conn *c)
{
    unsigned char hdr[CODEC_CHUNK_HEADER];
    uint64_t seq;
    uint32_t len;
    int r = read_exact(s, c, hdr, sizeof hdr);
    if (r <= 0) {
        if (r < 0 && !atomic_load(&s->quit))
            fail(s, c, errno, errno == EPIPE ? "the connection ended inside a chunk" : NULL);
        return r;
    }
    if (codec_parse_chunk(hdr, &seq, &len) != 0) {
        fail(s, c, EPROTO, "not a chunk of a weir stream");
        return -1;
    }
    if (admit_chunk(s, c, seq) != 0)
        return -1;
    size_t slot = seq % s->window;
    r = read_exact(s, c, s->store + slot * CODEC_CHUNK_MAX, len);
    if (r <= 0) {
        if (!atomic_load(&s->quit))
            fail(s, c, r == 0 ? EPIPE : errno, r == 0 || errno == EPIPE
                                                   ? "the connection ended inside a chunk"
                                                   : NULL);
        return -1;
    }
    sync_lock(&s->lock);
    s->have[slot] = len;
    sync_broadcast(&s->cv);
    sync_unlock(&s->lock);
    return 1;
}

static void *gather_main(void *arg)
{
    struct conn *c = arg;
    struct stripe *s = c->s;
    take_wake_signal();
    int r;
    while ((r = gather_one(s, c)) > 0) {
    }
    sync_lock(&s->lock);
    if (r == 0) {
        c->ended = true;
        s->live--;
        sync_broadcast(&s->cv);   /* a waiter may now see that nothing can come */
    }
    sync_unlock(&s->lock);
    left(c);
    return NULL;
}

/* Hand out what the stream has in order: the bytes copied, 0 when the
 * chunk it needs has not come. */
static size_t hand_out_locked(struct stripe *s, unsigned char *buf, size_t n)
{
    size_t slot = s->expected % s->window;
    uint32_t len = s->have[slot];
    if (len == 0)
        return 0;
    size_t take = len - s->at < n ? len - s->at : n;
    memcpy(buf, s->store + slot * CODEC_CHUNK_MAX + s->at, take);
    s->at += take;
    if (s->at == len) {
        s->have[slot] = 0;
        s->claimed[slot] = false;
        s->at = 0;
        s->expected++;
        sync_broadcast(&s->cv);
    }
    return take;
}

/* Every connection ended: the stream ends here, unless chunks beyond the
 * one it needs came (or are being read), which can then never be handed
 * out: a stream with a hole, refused. */
static int ended_locked(struct stripe *s)
{
    for (unsigned i = 0; i < s->window; i++)
        if (s->have[i] || s->claimed[i]) {
            if (s->err == 0) {
                s->err = EPROTO;
                snprintf(s->why, sizeof s->why, "chunk %llu of the stream never came, and "
                         "chunks after it did", (unsigned long long)s->expected);
            }
            return EPROTO;
        }
    return 0;
}

static ssize_t in_read(struct transport *t, void *buf, size_t n, int timeout_ms,
                       atomic_bool *stop)
{
    struct stripe *s = stripe_of(t);
    double deadline = timeout_ms < 0 ? -1 : clock_now() + timeout_ms / 1000.0;
    if (n == 0)
        return 0;
    s->stop = stop;
    sync_lock(&s->lock);
    for (;;) {
        size_t got = hand_out_locked(s, buf, n);
        int err = got ? 0 : failed_locked(s);
        if (!got && !err && s->live == 0)
            err = ended_locked(s);
        bool over = !got && !err && s->live == 0;
        if (got || err || over) {
            sync_unlock(&s->lock);
            errno = err;
            return got ? (ssize_t)got : err ? -1 : 0;
        }
        if (!wait_tick(s, deadline)) {
            sync_unlock(&s->lock);
            errno = ETIMEDOUT;
            return -1;
        }
    }
}

static int in_wait(struct transport *t, short events, int timeout_ms, atomic_bool *stop)
{
    struct stripe *s = stripe_of(t);
    if (events & POLLOUT) {
        struct transport *c = &s->c[0].t;
        return c->ops->wait(c, POLLOUT, timeout_ms, stop);
    }
    double deadline = timeout_ms < 0 ? -1 : clock_now() + timeout_ms / 1000.0;
    s->stop = stop;
    sync_lock(&s->lock);
    for (;;) {
        int err = failed_locked(s);
        if (s->have[s->expected % s->window] || err || s->live == 0) {
            sync_unlock(&s->lock);
            return 0;   /* a read will not block */
        }
        if (!wait_tick(s, deadline)) {
            sync_unlock(&s->lock);
            errno = ETIMEDOUT;
            return -1;
        }
    }
}

static ssize_t first_writev(struct transport *t, const struct iovec *iov, int cnt,
                            int timeout_ms, atomic_bool *stop)
{
    struct transport *c = &stripe_of(t)->c[0].t;
    return c->ops->writev(c, iov, cnt, timeout_ms, stop);
}

static int in_half_close(struct transport *t, struct weir_error *err)
{
    struct transport *c = &stripe_of(t)->c[0].t;
    return c->ops->half_close(c, err);
}

static const struct transport_ops in_ops = {
    .read = in_read, .writev = first_writev, .wait = in_wait,
    .half_close = in_half_close, .abort = both_abort, .close = both_close,
};

int stripe_in(struct transport *st, struct transport *conns, int n, unsigned window,
              atomic_bool *stop, struct weir_error *err)
{
    struct stripe *s = new_stripe();
    if (window < 2u * (unsigned)n)
        window = 2u * (unsigned)n;
    if (s) {
        s->window = window;
        s->store = malloc((size_t)window * CODEC_CHUNK_MAX);
        s->have = calloc(window, sizeof *s->have);
        s->claimed = calloc(window, sizeof *s->claimed);
    }
    if (!s || !s->store || !s->have || !s->claimed)
        return no_memory(s, conns, n, err);
    s->stop = stop;
    s->timeout_ms = -1;
    return launch(st, s, conns, n, gather_main, &in_ops, err);
}

/* ---- fewer connections, while it runs --------------------------------------------- */

int stripe_let_go(struct transport *st, int keep)
{
    struct stripe *s = st->stripe;
    if (!s || !s->out || keep < 1)
        return 0;
    sync_lock(&s->lock);
    int from = keep < s->carry ? keep : s->carry;
    int gone = from < s->n ? s->n - from : 0;
    if (gone > 0)
        s->carry = from;
    sync_broadcast(&s->cv);
    sync_unlock(&s->lock);
    return gone;
}

/* ---- a connection more, while it runs ------------------------------------------ */

/* Why a running stripe cannot take another connection now; NULL: it can. */
static const char *no_room_locked(const struct stripe *s)
{
    if (s->err || atomic_load(&s->quit))
        return "the transfer's connections failed or stopped";
    if (s->n >= CODEC_STREAMS_MAX)
        return "the transfer has all the connections it may have";
    if (s->out && s->closing)
        return "the stream has ended";
    if (s->carry < CODEC_STREAMS_MAX)
        return "the transfer let connections go: it needs no more";
    if (!s->out && s->live == 0)
        return "every connection of the transfer has ended";
    if (!s->out && 2u * (unsigned)(s->n + 1) > s->window)
        return "the buffer holds too few chunks for another connection (-m)";
    return NULL;
}

const char *stripe_room(struct transport *st)
{
    struct stripe *s = st->stripe;
    if (!s)
        return "the transfer is not spread";
    sync_lock(&s->lock);
    const char *bad = no_room_locked(s);
    sync_unlock(&s->lock);
    return bad;
}

int stripe_add(struct transport *st, struct transport *conn, struct weir_error *err)
{
    struct stripe *s = st->stripe;
    unsigned char *mem[QUEUE_PER_CONN] = {NULL};
    for (int i = 0; s->out && i < QUEUE_PER_CONN; i++)
        mem[i] = malloc(SLOT);
    sync_lock(&s->lock);
    const char *bad = no_room_locked(s);
    if (!bad && s->out && (!mem[0] || !mem[QUEUE_PER_CONN - 1]))
        bad = "no memory for its chunks";
    struct conn *c = bad ? NULL : &s->c[s->n];
    if (c) {
        *c = (struct conn){.s = s, .index = s->n, .t = *conn, .running = true};
        /* the thread is made under the lock: a stop that follows sees it
         * running and waits for it */
        if (sync_create(&c->thread, s->out ? spread_main : gather_main, c, err) != 0) {
            bad = "no thread for it";
            c->running = false;
        }
    }
    if (!bad) {
        c->started = true;
        s->running++;
        for (int i = 0; s->out && i < QUEUE_PER_CONN; i++) {
            s->q[s->nq++] = (struct chunk){.state = CHUNK_FREE, .mem = mem[i]};
            mem[i] = NULL;
        }
        s->live += !s->out;
        s->n++;
        transport_none(conn);
    }
    sync_unlock(&s->lock);
    for (int i = 0; i < QUEUE_PER_CONN; i++)
        free(mem[i]);
    if (!bad)
        return 0;
    transport_close(conn, false, NULL, &(struct weir_error){0});
    return error_set(err, WEIR_EXIT_NETWORK, "%s: no connection more: %s", st->name, bad);
}
