/*
 * pipeline.c - the threads of weir and how they share the buffer.
 *
 * The threads
 * -----------
 * One reader thread owns the input (stdin, a file, or the TCP connection it
 * accepts).  One writer thread per output owns that output (stdout, a file,
 * or the TCP connection it makes).  The main thread starts them, turns
 * signals into actions, redraws the status line, and joins them.  There is
 * one mutex, p->lock, and two condition variables: data_cv, on which writers
 * wait for data, and space_cv, on which the reader waits for a free block.
 *
 * The buffer
 * ----------
 * The buffer is nblocks blocks of -s bytes (pool.c), committed lazily.  Data
 * moves through a ring of slots indexed by sequence number (seq & mask): the
 * reader takes a free block, puts it in slot p->head and reads into it.
 * After every read() it publishes the new length under the lock and wakes
 * the writers, so a line typed into weir comes out at once rather than when
 * a block fills.  A block is sealed when it is full or the input ends.  The
 * reader writes only beyond the published length and the writers read only
 * below it, so the data itself is touched outside the lock; the lock orders
 * the length updates.
 *
 * Each writer has its own cursor (seq, off).  It takes the published range
 * of its current slot, writes it with the lock released, and advances.  A
 * block is released to the pool when every live output's cursor has passed
 * it (p->tail is the oldest slot still held).  Free blocks are reused
 * newest-first, so a consumer that keeps up keeps RSS small.
 *
 * Back-pressure
 * -------------
 * When no block is free, the reader waits on space_cv: the buffer is full
 * and the outputs set the pace.  With -p, it then waits until the fill has
 * dropped below the mark.  When a writer's cursor reaches the reader, it
 * waits on data_cv: the buffer is empty and the input sets the pace.  With
 * -P, writers also wait (the "gate") until the buffer is that full, each
 * time it has run empty, so a tape drive streams instead of shoe-shining.
 * The time spent empty and full is accounted at each transition and gives
 * the summary its verdict.
 *
 * Errors and shutdown
 * -------------------
 * A failed output is marked dead: it no longer holds blocks back, and the
 * others go on, unless --stop-on-error is given or no output is left.  Any
 * other failure, and SIGINT or SIGTERM, stops the pipeline: the first error
 * is recorded (the first error wins), p->stop is set under the lock, both
 * condition variables are broadcast, and the main thread sends each running
 * thread the wake-up signal (SIGUSR2, caught by an empty handler installed
 * without SA_RESTART) every 100 ms until it has exited.  A thread blocked in
 * read(), write(), poll() or a rate-limit sleep gets EINTR, sees p->stop and
 * returns.  No thread calls exit() and none is cancelled.  When every thread
 * has returned, main joins them, prints the summary and returns the first
 * error's exit status.  Each thread, as it ends, sends SIGUSR2 to the main
 * thread, which waits in sigtimedwait() and so learns at once.
 */
#include "weir/pipeline.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weir/endpoint.h"
#include "weir/io.h"
#include "weir/pool.h"
#include "weir/ratelimit.h"
#include "weir/stats.h"
#include "weir/sync.h"

#define WAKE_SIGNAL SIGUSR2
#define READ_MAX (1u << 20)    /* largest single read(); keeps publishing frequent */
#define KICK_INTERVAL 0.1

struct slot {
    uint32_t block;   /* pool index */
    bool sealed;      /* no more bytes will be added */
    size_t len;       /* bytes published */
};

struct output {
    struct pipeline *p;
    const struct output_spec *spec;
    struct endpoint ep;       /* owned by this writer once it runs */
    pthread_t thread;
    struct ratelimit rl;      /* this writer's -R bucket */
    /* guarded by p->lock: */
    bool running;
    bool dead;                /* failed; excluded from releasing blocks */
    uint64_t seq;             /* cursor: slot being written */
    size_t off;               /*         bytes of that slot already written */
    uint64_t bytes;           /* bytes written */
};

struct pipeline {
    const struct weir_options *o;
    struct weir_log *log;
    pthread_t main_thread;

    pthread_mutex_t lock;
    pthread_cond_t data_cv;   /* writers: data published, input ended, gate, stop */
    pthread_cond_t space_cv;  /* reader: block freed, stop */
    atomic_bool stop;         /* written under lock; read anywhere */

    struct pool pool;
    struct slot *ring;        /* guarded by lock */
    uint64_t mask;
    uint64_t head;            /* guarded by lock: next slot the reader creates */
    uint64_t tail;            /* guarded by lock: oldest slot still held */
    bool filling;             /* guarded by lock: slot head-1 is not sealed */
    bool input_done;          /* guarded by lock: no slot will be added */
    bool gate_open;           /* guarded by lock: -P allows writing */
    bool throttled;           /* guarded by lock: -p holds the reader back */
    uint64_t capacity;        /* bytes */

    /* statistics, guarded by lock */
    uint64_t in_bytes;
    uint64_t min_out;         /* bytes written by the slowest live output */
    double t_start;           /* 0 until the input is open */
    double empty_since;       /* < 0 when the buffer is not empty */
    double t_empty, t_full;

    /* errors, guarded by lock */
    bool failed;
    struct weir_error first;
    int running;              /* threads not yet returned */

    struct endpoint in_ep;    /* owned by the reader */
    struct tcp_listener listener;
    pthread_t reader;
    bool reader_running;      /* guarded by lock */
    struct ratelimit read_rl;
    struct output out[WEIR_MAX_OUTPUTS];
    int nout;
    int live;                 /* guarded by lock: outputs not dead */
};

/* ---- errors and stopping ------------------------------------------------ */

static void stop_locked(struct pipeline *p)
{
    atomic_store(&p->stop, true);
    sync_broadcast(&p->data_cv);
    sync_broadcast(&p->space_cv);
}

/* Record a fatal error (the first one wins) and stop everything. */
static void pipeline_fail(struct pipeline *p, const struct weir_error *e)
{
    sync_lock(&p->lock);
    bool cancelled = atomic_load(&p->stop);
    if (!p->failed) {
        p->failed = true;
        p->first = *e;
    }
    stop_locked(p);
    sync_unlock(&p->lock);
    /* errors caused by the stop itself are noise; real ones are all shown */
    if (!cancelled || strstr(e->msg, strerror(ECANCELED)) == NULL)
        log_msg(p->log, LOG_ERROR, "%s", e->msg);
}

/* ---- releasing blocks --------------------------------------------------- */

static void note_empty_locked(struct pipeline *p)
{
    uint64_t held = p->in_bytes - p->min_out;
    if (held == 0 && !p->input_done && p->empty_since < 0) {
        p->empty_since = clock_now();
        if (p->o->start_write_pct > 0)
            p->gate_open = false;    /* -P: wait for the mark again */
    }
}

/* Free every slot that all live outputs have passed. */
static void release_locked(struct pipeline *p)
{
    uint64_t min_seq = p->head, min_bytes = p->in_bytes;
    for (int i = 0; i < p->nout; i++) {
        struct output *o = &p->out[i];
        if (o->dead)
            continue;
        if (o->seq < min_seq)
            min_seq = o->seq;
        if (o->bytes < min_bytes)
            min_bytes = o->bytes;
    }
    p->min_out = min_bytes;
    bool freed = false;
    while (p->tail < min_seq) {
        struct slot *s = &p->ring[p->tail & p->mask];
        pool_release_locked(&p->pool, s->block);
        p->tail++;
        freed = true;
    }
    if (freed)
        sync_signal(&p->space_cv);
    note_empty_locked(p);
}

/* An output failed: it stops holding data; the pipeline stops if it must. */
static void output_fail(struct output *o, const struct weir_error *e)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    bool cancelled = atomic_load(&p->stop);
    if (!o->dead) {
        o->dead = true;
        p->live--;
    }
    if (!p->failed && !cancelled) {
        p->failed = true;
        p->first = *e;
    }
    if (p->live == 0 || p->o->stop_on_error)
        stop_locked(p);
    else
        release_locked(p);
    sync_unlock(&p->lock);
    if (!cancelled)
        log_msg(p->log, LOG_ERROR, "%s", e->msg);
}

/* ---- the reader --------------------------------------------------------- */

/* Wait for room to read into; false when stopping. */
static bool reader_reserve(struct pipeline *p, unsigned char **dst, size_t *cap)
{
    sync_lock(&p->lock);
    while (!atomic_load(&p->stop)) {
        if (p->filling) {
            struct slot *s = &p->ring[(p->head - 1) & p->mask];
            *dst = pool_data(&p->pool, s->block) + s->len;
            *cap = p->pool.block_size - s->len;
            sync_unlock(&p->lock);
            return true;
        }
        uint64_t held = p->in_bytes - p->min_out;
        if (p->throttled && held * 100 < p->capacity * (uint64_t)p->o->resume_read_pct)
            p->throttled = false;
        uint32_t idx;
        if (!p->throttled && pool_take_locked(&p->pool, &idx)) {
            struct slot *s = &p->ring[p->head & p->mask];
            s->block = idx;
            s->len = 0;
            s->sealed = false;
            p->head++;
            p->filling = true;
            continue;
        }
        /* the buffer is full: the outputs set the pace */
        if (p->o->resume_read_pct < 100)
            p->throttled = true;
        double t0 = clock_now();
        sync_wait(&p->space_cv, &p->lock);
        p->t_full += clock_now() - t0;
    }
    sync_unlock(&p->lock);
    return false;
}

static void reader_publish(struct pipeline *p, size_t n)
{
    sync_lock(&p->lock);
    struct slot *s = &p->ring[(p->head - 1) & p->mask];
    s->len += n;
    if (s->len == p->pool.block_size) {
        s->sealed = true;
        p->filling = false;
    }
    p->in_bytes += n;
    if (p->empty_since >= 0) {
        p->t_empty += clock_now() - p->empty_since;
        p->empty_since = -1;
    }
    if (!p->gate_open &&
        (p->in_bytes - p->min_out) * 100 >= p->capacity * (uint64_t)p->o->start_write_pct)
        p->gate_open = true;
    sync_broadcast(&p->data_cv);
    sync_unlock(&p->lock);
}

/* Input ended (or failed): seal the last slot and let the writers drain. */
static void reader_finish(struct pipeline *p)
{
    sync_lock(&p->lock);
    if (p->filling) {
        struct slot *s = &p->ring[(p->head - 1) & p->mask];
        s->sealed = true;
        p->filling = false;
    }
    p->input_done = true;
    p->gate_open = true;
    if (p->empty_since >= 0) {
        p->t_empty += clock_now() - p->empty_since;
        p->empty_since = -1;
    }
    sync_broadcast(&p->data_cv);
    sync_unlock(&p->lock);
}

static int reader_open(struct pipeline *p, struct weir_error *e)
{
    if (p->o->listen) {
        if (tcp_accept(&p->listener, p->o->accept_timeout, p->o->io_timeout, &p->stop,
                       p->log, &p->in_ep, e))
            return -1;
    }
    sync_lock(&p->lock);
    p->t_start = clock_now();
    p->empty_since = p->t_start;
    sync_unlock(&p->lock);
    return 0;
}

static int io_timeout_ms(const struct pipeline *p, const struct endpoint *ep)
{
    if (!ep->is_socket || p->o->io_timeout <= 0)
        return -1;
    return (int)(p->o->io_timeout * 1000);
}

static void reader_loop(struct pipeline *p)
{
    struct weir_error e;
    int tmo = io_timeout_ms(p, &p->in_ep);
    int status = p->in_ep.is_socket ? WEIR_EXIT_NETWORK : WEIR_EXIT_INPUT;
    for (;;) {
        unsigned char *dst;
        size_t cap;
        if (!reader_reserve(p, &dst, &cap))
            return;
        if (cap > READ_MAX)
            cap = READ_MAX;
        cap = ratelimit_chunk(&p->read_rl, cap);
        ssize_t n = io_read(p->in_ep.fd, dst, cap, tmo, &p->stop);
        if (n < 0) {
            if (errno == ECANCELED)
                return;
            if (errno == ETIMEDOUT)
                error_set(&e, status, "%s: no progress for %g s", p->in_ep.name,
                          p->o->io_timeout);
            else
                error_sys(&e, status, errno, "%s: read", p->in_ep.name);
            pipeline_fail(p, &e);
            return;
        }
        if (n == 0)
            return;
        reader_publish(p, (size_t)n);
        if (ratelimit_take(&p->read_rl, (size_t)n, &p->stop))
            return;
    }
}

static void thread_done(struct pipeline *p, bool *running_flag)
{
    sync_lock(&p->lock);
    *running_flag = false;
    p->running--;
    sync_unlock(&p->lock);
    pthread_kill(p->main_thread, WAKE_SIGNAL);
}

static void thread_unblock_wake(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, WAKE_SIGNAL);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static void *reader_main(void *arg)
{
    struct pipeline *p = arg;
    struct weir_error e;
    thread_unblock_wake();
    if (reader_open(p, &e) == 0)
        reader_loop(p);
    else
        pipeline_fail(p, &e);
    reader_finish(p);
    if (p->in_ep.is_socket && atomic_load(&p->stop) && p->failed) {
        /* tell a sending peer plainly that this end gave up */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(p->in_ep.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    if (endpoint_close(&p->in_ep, WEIR_EXIT_INPUT, &e))
        pipeline_fail(p, &e);
    thread_done(p, &p->reader_running);
    return NULL;
}

/* ---- the writers -------------------------------------------------------- */

/* 1: (*src, *n) is data to write; 0: everything is written; -1: stopping. */
static int writer_next(struct output *o, const unsigned char **src, size_t *n)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    int rc = -1;
    while (!atomic_load(&p->stop)) {
        if (o->seq < p->head) {
            struct slot *s = &p->ring[o->seq & p->mask];
            if (s->len > o->off && p->gate_open) {
                *src = pool_data(&p->pool, s->block) + o->off;
                *n = s->len - o->off;
                rc = 1;
                break;
            }
            if (s->sealed && o->off == s->len) {
                o->seq++;
                o->off = 0;
                release_locked(p);
                continue;
            }
        } else if (p->input_done) {
            rc = 0;
            break;
        }
        sync_wait(&p->data_cv, &p->lock);
    }
    sync_unlock(&p->lock);
    return rc;
}

static void writer_advance(struct output *o, size_t n)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    o->off += n;
    o->bytes += n;
    struct slot *s = &p->ring[o->seq & p->mask];
    if (s->sealed && o->off == s->len) {
        o->seq++;
        o->off = 0;
    }
    release_locked(p);
    sync_unlock(&p->lock);
}

static int writer_open(struct output *o, struct weir_error *e)
{
    if (o->spec->kind != OUTPUT_TCP)
        return 0;   /* files were opened by pipeline_create */
    return tcp_connect(o->spec, o->p->o, &o->p->stop, o->p->log, &o->ep, e);
}

/* 0: every byte was written; 1: failed, *e says why; -1: the pipeline stopped. */
static int writer_loop(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    int tmo = io_timeout_ms(p, &o->ep);
    int status = o->ep.is_socket ? WEIR_EXIT_NETWORK : WEIR_EXIT_OUTPUT;
    for (;;) {
        const unsigned char *src;
        size_t n;
        int r = writer_next(o, &src, &n);
        if (r <= 0)
            return r;
        n = ratelimit_chunk(&o->rl, n);
        ssize_t w = io_write(o->ep.fd, src, n, tmo, &p->stop);
        if (w < 0) {
            if (errno == ECANCELED)
                return -1;
            if (errno == ETIMEDOUT)
                error_set(e, status, "%s: no progress for %g s", o->ep.name,
                          p->o->io_timeout);
            else if (errno == EPIPE && !o->ep.is_socket)
                error_set(e, status, "%s: write: Broken pipe (the reader closed it early)",
                          o->ep.name);
            else
                error_sys(e, status, errno, "%s: write", o->ep.name);
            return 1;
        }
        writer_advance(o, (size_t)w);
        if (ratelimit_take(&o->rl, (size_t)w, &p->stop))
            return -1;
    }
}

static int writer_close(struct output *o, bool complete, struct weir_error *e)
{
    if (o->ep.fd < 0)
        return 0;
    int status = o->ep.is_socket ? WEIR_EXIT_NETWORK : WEIR_EXIT_OUTPUT;
    if (o->ep.is_socket) {
        if (!complete) {
            /* an abort must not look like a clean end to the peer */
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(o->ep.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        } else if (shutdown(o->ep.fd, SHUT_WR) != 0) {
            int err = errno;
            endpoint_close(&o->ep, status, e);
            return error_sys(e, status, err, "%s: shutdown", o->ep.name);
        }
    }
    return endpoint_close(&o->ep, status, e);
}

static void *writer_main(void *arg)
{
    struct output *o = arg;
    struct pipeline *p = o->p;
    struct weir_error e;
    thread_unblock_wake();
    int rc = writer_open(o, &e) ? 1 : writer_loop(o, &e);
    if (rc == 1 && !atomic_load(&p->stop))
        output_fail(o, &e);
    if (writer_close(o, rc == 0, &e) && rc == 0)
        output_fail(o, &e);
    thread_done(p, &o->running);
    return NULL;
}

/* ---- setup -------------------------------------------------------------- */

static void wake_handler(int sig)
{
    (void)sig;   /* its only job is to interrupt a blocking call with EINTR */
}

int pipeline_signals_block(struct weir_error *err)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    if (sigaction(SIGPIPE, &sa, NULL) != 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "sigaction SIGPIPE");
    sa.sa_handler = wake_handler;   /* no SA_RESTART: blocking calls return EINTR */
    sigemptyset(&sa.sa_mask);
    if (sigaction(WAKE_SIGNAL, &sa, NULL) != 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, errno, "sigaction SIGUSR2");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, WAKE_SIGNAL);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (rc != 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, rc, "pthread_sigmask");
    return 0;
}

static int open_outputs(struct pipeline *p, struct weir_error *err)
{
    const struct weir_options *o = p->o;
    static const struct output_spec stdout_spec = {.kind = OUTPUT_FILE, .path = "-"};
    p->nout = o->noutputs ? o->noutputs : 1;
    for (int i = 0; i < p->nout; i++) {
        struct output *out = &p->out[i];
        out->p = p;
        out->spec = o->noutputs ? &o->outputs[i] : &stdout_spec;
        endpoint_none(&out->ep);
        ratelimit_init(&out->rl, o->write_rate);
    }
    for (int i = 0; i < p->nout; i++) {
        struct output *out = &p->out[i];
        if (out->spec->kind == OUTPUT_FILE &&
            endpoint_open_output(out->spec->path, o->force, &out->ep, err))
            return -1;
    }
    p->live = p->nout;
    return 0;
}

int pipeline_create(const struct weir_options *o, struct weir_log *log,
                    struct pipeline **out, struct weir_error *err)
{
    struct pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "pipeline");
    p->o = o;
    p->log = log;
    p->main_thread = pthread_self();
    sync_mutex_init(&p->lock);
    sync_cond_init(&p->data_cv);
    sync_cond_init(&p->space_cv);
    atomic_init(&p->stop, false);
    endpoint_none(&p->in_ep);
    p->listener.fd = -1;
    p->empty_since = -1;
    p->gate_open = o->start_write_pct == 0;
    ratelimit_init(&p->read_rl, o->read_rate);
    *out = p;
    if (pool_init(&p->pool, (size_t)o->block, (uint32_t)o->nblocks, err))
        return -1;
    p->capacity = (uint64_t)o->block * o->nblocks;
    uint64_t ring = 1;
    while (ring < o->nblocks + 1)
        ring <<= 1;
    p->ring = calloc(ring, sizeof *p->ring);
    if (!p->ring)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "buffer: slot table");
    p->mask = ring - 1;
    if (open_outputs(p, err))
        return -1;
    if (o->listen) {
        if (tcp_listen(o, &p->listener, err))
            return -1;
        /* with port 0 the caller cannot know the port otherwise: say it even with -q */
        log_msg(log, strcmp(o->listen_port, "0") == 0 ? LOG_NOTICE : LOG_INFO,
                "listening on %s", p->listener.addr);
    } else if (endpoint_open_input(o->input_path, &p->in_ep, err)) {
        return -1;
    }
    return 0;
}

void pipeline_destroy(struct pipeline *p)
{
    if (!p)
        return;
    struct weir_error ignored;
    tcp_listener_close(&p->listener);
    endpoint_close(&p->in_ep, WEIR_EXIT_INPUT, &ignored);
    for (int i = 0; i < p->nout; i++)
        endpoint_close(&p->out[i].ep, WEIR_EXIT_OUTPUT, &ignored);
    pool_destroy(&p->pool);
    free(p->ring);
    free(p);
}

/* ---- the main thread ---------------------------------------------------- */

static void pipeline_snapshot(struct pipeline *p, struct stats_snapshot *s)
{
    memset(s, 0, sizeof *s);
    sync_lock(&p->lock);
    double now = clock_now();
    s->elapsed = p->t_start > 0 ? now - p->t_start : 0;
    s->in_bytes = p->in_bytes;
    s->out_bytes = p->min_out;
    s->data_bytes = p->in_bytes;
    s->held = p->in_bytes - p->min_out;
    s->capacity = p->capacity;
    s->t_empty = p->t_empty + (p->empty_since >= 0 ? now - p->empty_since : 0);
    s->t_full = p->t_full;
    s->expect = p->o->expect_size;
    sync_unlock(&p->lock);
}

static void start_threads(struct pipeline *p)
{
    sync_lock(&p->lock);
    p->running = 1 + p->nout;
    p->reader_running = true;
    for (int i = 0; i < p->nout; i++)
        p->out[i].running = true;
    sync_unlock(&p->lock);
    sync_create(&p->reader, reader_main, p);
    for (int i = 0; i < p->nout; i++)
        sync_create(&p->out[i].thread, writer_main, &p->out[i]);
}

/* Send the wake-up signal to every thread still running. */
static void kick_threads(struct pipeline *p)
{
    sync_lock(&p->lock);
    if (p->reader_running)
        pthread_kill(p->reader, WAKE_SIGNAL);
    for (int i = 0; i < p->nout; i++)
        if (p->out[i].running)
            pthread_kill(p->out[i].thread, WAKE_SIGNAL);
    sync_unlock(&p->lock);
}

static void interrupt(struct pipeline *p, int sig)
{
    struct weir_error e;
    error_set(&e, WEIR_EXIT_SIGNAL + sig, "interrupted by %s",
              sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
    pipeline_fail(p, &e);
}

struct status_state {
    struct stats_snapshot prev;
    double next;         /* monotonic time of the next redraw */
};

static void draw_status(struct pipeline *p, struct status_state *st, bool whole_line)
{
    struct stats_snapshot now;
    char line[256];
    pipeline_snapshot(p, &now);
    stats_status_line(&st->prev, &now, line, sizeof line);
    if (whole_line)
        log_status_line(p->log, line);
    else
        log_status(p->log, line);
    st->prev = now;
}

/* Wait for signals and thread ends until every thread has returned. */
static void main_loop(struct pipeline *p)
{
    const double interval = 0.5;
    bool live_status = p->log->tty && !p->o->quiet;
    struct status_state st = {.next = clock_now() + interval};
    double last_kick = 0;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, WAKE_SIGNAL);
    pipeline_snapshot(p, &st.prev);
    for (;;) {
        sync_lock(&p->lock);
        bool done = p->running == 0;
        sync_unlock(&p->lock);
        if (done)
            return;
        double now = clock_now();
        double wait = live_status ? st.next - now : 1.0;
        if (atomic_load(&p->stop)) {
            if (now - last_kick >= KICK_INTERVAL) {
                kick_threads(p);
                last_kick = now;
            }
            wait = KICK_INTERVAL;
        }
        if (wait < 0.001)
            wait = 0.001;
        struct timespec ts = {.tv_sec = (time_t)wait,
                              .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
            interrupt(p, sig);
        else if (sig == SIGUSR1)
            draw_status(p, &st, true);
        if (live_status && clock_now() >= st.next) {
            draw_status(p, &st, false);
            st.next = clock_now() + interval;
        }
    }
}

int pipeline_run(struct pipeline *p)
{
    start_threads(p);
    main_loop(p);
    sync_join(p->reader);
    for (int i = 0; i < p->nout; i++)
        sync_join(p->out[i].thread);
    struct stats_snapshot s;
    pipeline_snapshot(p, &s);
    log_status_end(p->log);
    if (!p->o->quiet) {
        char line[512];
        stats_summary(&s, !p->failed, line, sizeof line);
        log_status_line(p->log, line);
    }
    return p->failed ? p->first.status : WEIR_EXIT_OK;
}
