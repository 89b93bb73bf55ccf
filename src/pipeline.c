/*
 * pipeline.c - the threads of weir and how they share the buffer.
 *
 * The threads
 * -----------
 * One reader thread owns the input (stdin, a file, or the TCP connection it
 * accepts).  One writer thread per output owns that output (stdout, a file,
 * or the TCP connection it makes); a writer that sends a weir stream over
 * TCP has a back-channel thread that reads the receiver's answer.  With -z,
 * or when a weir stream is being decoded, -T worker threads transform
 * blocks.  The main thread starts them all, turns signals into actions,
 * redraws the status line, joins them, answers a weir sender, and prints the
 * summary.  There is one mutex, p->lock, and three condition variables:
 * data_cv (writers wait for data), space_cv (the reader waits for a free
 * block) and job_cv (workers wait for a job).
 *
 * The buffer
 * ----------
 * The buffer is nblocks blocks carved from one lazily committed reservation
 * (pool.c).  What the outputs will write flows through a ring of slots
 * indexed by sequence number (seq & mask).  Without a transform, the reader
 * takes a free block, puts it in slot p->head and reads into it; after every
 * read() it publishes the new length under the lock and wakes the writers,
 * so a line typed into weir comes out at once, not when a block fills.  The
 * reader writes only beyond the published length and writers read only
 * below it, so data is copied outside the lock; the lock orders the lengths.
 *
 * With a transform, the reader fills a staging block (raw data for -z, a
 * compressed payload when decoding), creates a pending slot for the result
 * and queues a job.  A worker takes the job, takes an output block, encodes
 * or decodes into it, releases the staging block, and makes the slot
 * present.  Jobs finish in any order; p->ready is the first slot not yet
 * present, and writers never pass it, so blocks leave in sequence order.
 * The reader takes a block only while enough stay free for the output
 * blocks that queued jobs were promised (p->out_reserved), so workers never
 * wait for memory and the pipeline cannot deadlock on a full buffer.
 *
 * A plain LZ4 frame of independent blocks is decoded the same way, but its
 * content checksum is one XXH32 over the whole frame, so a content cursor
 * (p->content_seq, p->content_off) hashes the present slots in order
 * behind the workers.  Whichever thread makes data present and finds the
 * cursor idle does the hashing, with the lock dropped; the cursor holds
 * slots back from release like an output, and the reader waits for it at
 * the frame's end before it judges the checksum.
 *
 * Each writer has its own cursor (seq, off).  It takes the published range
 * of its slot, writes it with the lock released, and advances.  A block is
 * released when every live output's cursor has passed it (p->tail is the
 * oldest slot still held).  Free blocks are reused newest-first, so a
 * consumer that keeps up keeps RSS small.
 *
 * Back-pressure
 * -------------
 * When no block is free the reader waits on space_cv: the buffer is full
 * and the outputs set the pace.  With -p it then waits until the fill drops
 * below the mark.  A regular-file input also waits once it holds
 * --readahead worth of blocks (p->read_window): a file can be read later,
 * so weir does not copy more of it than it needs.  When every writer has
 * caught up it waits on data_cv: the buffer is empty and the input sets the
 * pace.  With -P writers also wait (the "gate") until the buffer is that
 * full, each time it has run empty.  Time spent empty and full is accounted
 * at each transition and gives the summary its verdict.
 *
 * Errors and shutdown
 * -------------------
 * A failed output is marked dead: it stops holding blocks back and the
 * others go on, unless --stop-on-error is given or none is left.  Any other
 * failure, and SIGINT or SIGTERM, stops the pipeline: the first error is
 * recorded (the first error wins), p->stop is set under the lock, every
 * condition variable is broadcast, and the main thread sends each running
 * thread the wake-up signal (SIGUSR2, caught by an empty handler installed
 * without SA_RESTART) every 100 ms until it has returned.  A thread blocked
 * in read(), write(), poll() or a rate-limit sleep gets EINTR, sees the stop
 * flag and returns.  No thread calls exit() and none is cancelled.  Each
 * thread, as it returns, sends SIGUSR2 to the main thread, which waits in
 * sigtimedwait() and so learns at once.
 */
#include "weir/pipeline.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline_int.h"
#include "weir/io.h"
#include "weir/stats.h"
#include "weir/sync.h"

#define KICK_INTERVAL 0.1
#define DRAIN_SECS 5.0        /* how long a receiver keeps reading after it answered */
#define TRIM_INTERVAL 0.5     /* how often cold free blocks give their pages back */
#define TRIM_KEEP 16          /* the most recently freed blocks stay hot */
#define TRIM_BATCH 64         /* bounds the time the lock is held for it */

/* ---- errors and stopping ------------------------------------------------ */

void stop_locked(struct pipeline *p)
{
    atomic_store(&p->stop, true);
    for (int i = 0; i < p->nout; i++)
        atomic_store(&p->out[i].halt, true);
    sync_broadcast(&p->data_cv);
    sync_broadcast(&p->space_cv);
    sync_broadcast(&p->job_cv);
}

void pipeline_fail(struct pipeline *p, const struct weir_error *e)
{
    sync_lock(&p->lock);
    bool already = atomic_load(&p->stop);
    if (!p->failed) {
        p->failed = true;
        p->first = *e;
    }
    stop_locked(p);
    sync_unlock(&p->lock);
    if (!already)
        log_msg(p->log, LOG_ERROR, "%s", e->msg);
}

void output_fail(struct output *o, const struct weir_error *e)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    bool cancelled = atomic_load(&p->stop);
    bool first_time = !o->dead;
    if (!o->dead) {
        o->dead = true;
        p->live--;
    }
    atomic_store(&o->halt, true);
    if (!p->failed && !cancelled) {
        p->failed = true;
        p->first = *e;
    }
    if (p->live == 0 || p->o->stop_on_error)
        stop_locked(p);
    else
        release_locked(p);
    sync_broadcast(&p->data_cv);
    sync_unlock(&p->lock);
    if (!cancelled && first_time)
        log_msg(p->log, LOG_ERROR, "%s", e->msg);
}

/* ---- the buffer --------------------------------------------------------- */

void release_locked(struct pipeline *p)
{
    uint64_t min_seq = p->ready, min_bytes = p->queued_bytes;
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
    if (p->content_on && p->content_seq < min_seq)
        min_seq = p->content_seq;
    bool freed = false;
    while (p->tail < min_seq) {
        pool_release_locked(&p->pool, p->ring[p->tail & p->mask].block);
        p->tail++;
        freed = true;
    }
    /* a throttled reader (-p) watches the fill, which every write lowers */
    if (freed || p->throttled)
        sync_broadcast(&p->space_cv);
}

void advance_ready_locked(struct pipeline *p)
{
    uint64_t before = p->ready;
    while (p->ready < p->head && p->ring[p->ready & p->mask].present) {
        struct slot *s = &p->ring[p->ready & p->mask];
        if (p->encode && s->raw_len) {
            p->chain = codec_chain(p->chain, s->hash, s->raw_len);
            p->chain_total += s->raw_len;
        }
        p->ready++;
    }
    if (p->ready != before) {
        sync_broadcast(&p->data_cv);
        sync_broadcast(&p->space_cv);   /* the -z reader waits for the last job */
    }
}

bool wait_settled_locked(struct pipeline *p)
{
    while (p->ready != p->head && !atomic_load(&p->stop))
        sync_wait(&p->space_cv, &p->lock);   /* advance_ready_locked broadcasts */
    return !atomic_load(&p->stop);
}

void content_catch_up_locked(struct pipeline *p)
{
    if (!p->content_on || p->content_busy)
        return;
    p->content_busy = true;
    bool moved = false;
    while (p->content_seq < p->ready && !atomic_load(&p->stop)) {
        struct slot *s = &p->ring[p->content_seq & p->mask];
        size_t from = p->content_off, to = s->len;
        if (from == to) {
            if (!s->sealed)
                break;
            p->content_seq++;
            p->content_off = 0;
            moved = true;
            continue;
        }
        /* the cursor holds the slot: it stays put while the lock is dropped */
        const unsigned char *data = pool_data(&p->pool, s->block);
        sync_unlock(&p->lock);
        stream_content_add(&p->content, data + from, to - from);
        sync_lock(&p->lock);
        p->content_off = to;
        moved = true;
    }
    p->content_busy = false;
    /* nothing moved: the lock was never dropped, so nobody saw us busy */
    if (moved) {
        release_locked(p);
        sync_broadcast(&p->space_cv);   /* the reader may wait for the frame's end */
    }
}

uint64_t capacity_locked(const struct pipeline *p)
{
    uint64_t blocks = p->read_window ? p->read_window : p->pool.nblocks;
    return blocks * p->pool.block_size;
}

uint64_t fill_locked(const struct pipeline *p)
{
    return p->queued_bytes - p->min_out + p->staging_bytes;
}

void gate_check_locked(struct pipeline *p)
{
    if (!p->gate_open) {
        uint64_t held = fill_locked(p);
        if (held * 100 >= capacity_locked(p) * (uint64_t)p->o->start_write_pct) {
            p->gate_open = true;
            sync_broadcast(&p->data_cv);
        }
    }
}

bool reader_take_block(struct pipeline *p, uint32_t extra, uint32_t *idx)
{
    sync_lock(&p->lock);
    while (!atomic_load(&p->stop)) {
        uint64_t used = p->pool.nblocks - p->pool.nfree;
        uint64_t held = fill_locked(p);
        /* -p 0: only once the outputs have written everything */
        if (p->throttled &&
            (held * 100 < capacity_locked(p) * (uint64_t)p->o->resume_read_pct || held == 0))
            p->throttled = false;
        uint64_t promised = used + p->out_reserved + extra;
        bool within = p->read_window == 0 || promised < p->read_window;
        if (!p->throttled && within && p->pool.nfree > p->out_reserved + extra) {
            pool_take_locked(&p->pool, idx);
            sync_unlock(&p->lock);
            return true;
        }
        /* the buffer is full: the outputs set the pace.  It is as full as
         * it can get even when some blocks stay free for the workers or
         * hold less than a block of data, so -P's gate opens here in any
         * case: a writer never waits for a fill the reader cannot reach */
        if (p->o->resume_read_pct < 100)
            p->throttled = true;
        if (!p->gate_open) {
            p->gate_open = true;
            sync_broadcast(&p->data_cv);
        }
        double t0 = clock_now();
        sync_wait(&p->space_cv, &p->lock);
        p->t_full += clock_now() - t0;
    }
    sync_unlock(&p->lock);
    return false;
}

/* ---- threads ------------------------------------------------------------ */

void thread_done(struct pipeline *p, bool *running_flag)
{
    sync_lock(&p->lock);
    *running_flag = false;
    p->running--;
    sync_unlock(&p->lock);
    pthread_kill(p->main_thread, WAKE_SIGNAL);
}

void thread_unblock_wake(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, WAKE_SIGNAL);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

int io_timeout_ms(const struct pipeline *p, const struct endpoint *ep)
{
    if (!ep->is_socket || p->o->io_timeout <= 0)
        return -1;
    return (int)(p->o->io_timeout * 1000);
}

/* ---- setup -------------------------------------------------------------- */

/* The signals the main thread takes synchronously (sigtimedwait). */
static void main_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGUSR1);
    sigaddset(set, WAKE_SIGNAL);
}

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
    main_signals(&set);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (rc != 0)
        return error_sys(err, WEIR_EXIT_INTERNAL, rc, "pthread_sigmask");
    return 0;
}

static void setup_output(struct pipeline *p, struct output *out, const struct output_spec *spec)
{
    out->p = p;
    out->spec = spec;
    endpoint_none(&out->ep);
    ratelimit_init(&out->rl, p->o->write_rate);
    atomic_init(&out->halt, false);
    bool tcp = spec->kind == OUTPUT_TCP;
    out->framing = p->encode ? FRAME_ENCODED
                   : tcp && !p->o->raw ? FRAME_STORED : FRAME_NONE;
    out->expects_status = tcp && !p->o->raw;
}

/* Two endpoints that are one file: writing one would destroy the other
 * (weir -i f -o f, weir -i f >> f, -o a -o a, -l f -o f). */
static int refuse_same(const struct endpoint *a, const struct endpoint *b,
                       struct weir_error *err)
{
    if (!endpoint_same_file(a, b))
        return 0;
    return error_set(err, WEIR_EXIT_USAGE, "%s and %s are the same file", a->name, b->name);
}

/* The same for the -l file, which is closed first: the message saying so
 * must not be appended to the very file it protects. */
static int refuse_log(struct pipeline *p, const struct endpoint *ep,
                      const struct endpoint *log_ep, struct weir_error *err)
{
    if (!endpoint_same_file(ep, log_ep))
        return 0;
    log_close(p->log);
    return error_set(err, WEIR_EXIT_USAGE, "%s and %s are the same file", ep->name,
                     log_ep->name);
}

/* Open every file output and check it against the input, the log and the
 * other outputs.  Nothing is truncated until every check has passed. */
static int open_outputs(struct pipeline *p, const struct endpoint *log_ep,
                        struct weir_error *err)
{
    const struct weir_options *o = p->o;
    static const struct output_spec stdout_spec = {.kind = OUTPUT_FILE, .path = "-"};
    p->nout = o->noutputs ? o->noutputs : 1;
    for (int i = 0; i < p->nout; i++)
        setup_output(p, &p->out[i], o->noutputs ? &o->outputs[i] : &stdout_spec);
    for (int i = 0; i < p->nout; i++) {
        struct output *out = &p->out[i];
        if (out->spec->kind != OUTPUT_FILE)
            continue;
        if (endpoint_open_output(out->spec->path, o->force, o->stdout_closed, &out->ep,
                                 err)) {
            /* -o a -o ./a: the second open finds the file the first created */
            struct stat st;
            if (stat(out->spec->path, &st) == 0) {
                struct endpoint again;
                endpoint_none(&again);
                snprintf(again.name, sizeof again.name, "output %s", out->spec->path);
                again.identified = true;
                again.dev = st.st_dev;
                again.ino = st.st_ino;
                again.mode = st.st_mode;
                for (int j = 0; j < i; j++)
                    if (refuse_same(&again, &p->out[j].ep, err))
                        return -1;
            }
            return -1;
        }
        if (refuse_same(&out->ep, &p->in_ep, err) || refuse_log(p, &out->ep, log_ep, err))
            return -1;
        for (int j = 0; j < i; j++)
            if (refuse_same(&out->ep, &p->out[j].ep, err))
                return -1;
    }
    for (int i = 0; i < p->nout; i++)
        if (endpoint_truncate(&p->out[i].ep, err))
            return -1;
    p->live = p->nout;
    return 0;
}

/* The fewest blocks the pipeline runs with: a transform's staging and
 * output blocks for every worker, and a few for the reader and writers. */
static uint64_t transform_blocks(const struct pipeline *p)
{
    return p->nworkers > 0 ? 2 * (uint64_t)p->nworkers + 4 : 2;
}

/* A regular file needs no buffer to cover for it: it can be read at any
 * time and the kernel reads ahead on its own.  Reading far ahead only takes
 * memory from the page cache and costs CPU touching fresh pages (measured:
 * 2 GiB over loopback took 25% longer with the sender 512 MiB ahead than 64
 * MiB ahead), so such an input is held to --readahead, unless -P or -p ask
 * for the buffer to fill. */
static void plan_readahead_locked(struct pipeline *p)
{
    const struct weir_options *o = p->o;
    p->read_window = 0;
    if (!p->in_ep.regular || o->start_write_pct > 0 || o->resume_read_pct < 100)
        return;
    uint64_t bs = p->pool.block_size;
    uint64_t window = o->readahead / bs + (o->readahead % bs != 0);
    if (window < transform_blocks(p))
        window = transform_blocks(p);
    if (window < p->pool.nblocks)
        p->read_window = (uint32_t)window;
}

/* Cut the reserved buffer into blocks of `block` bytes (at most mem of
 * them, at least what a transform needs), with the slot ring and job queue
 * that go with them.  Lock held when other threads run. */
static int carve_locked(struct pipeline *p, size_t block, struct weir_error *err)
{
    uint64_t nblocks = p->o->mem / pool_stride(block);
    if (nblocks > PIPELINE_MAX_BLOCKS) {
        /* tiny blocks (-z -s 16 on the far side): fewer, larger ones */
        block = (size_t)(p->o->mem / PIPELINE_MAX_BLOCKS);
        nblocks = p->o->mem / pool_stride(block);
    }
    if (nblocks < transform_blocks(p))
        nblocks = transform_blocks(p);   /* documented: a transform needs a few */
    if (pool_carve(&p->pool, block, (uint32_t)nblocks, err))
        return -1;
    uint64_t ring = 1;
    while (ring < nblocks + 1)
        ring <<= 1;
    p->ring = calloc(ring, sizeof *p->ring);
    p->jobs = calloc(nblocks, sizeof *p->jobs);
    if (!p->ring || !p->jobs)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "buffer: slot table");
    p->mask = ring - 1;
    if (!p->encode)
        p->unit = block;
    p->carved = true;
    plan_readahead_locked(p);
    return 0;
}

int pipeline_carve(struct pipeline *p, size_t block, struct weir_error *err)
{
    sync_lock(&p->lock);
    int rc = p->carved ? 0 : carve_locked(p, block, err);
    sync_unlock(&p->lock);
    return rc;
}

/* Block geometry.  -z: blocks hold a raw block of at most 4 MiB (the
 * largest LZ4 block) plus a frame's overhead.  Pass-through: -s.  When weir
 * may decode (-d, or -I without --raw), the blocks are sized later to what
 * the stream declares (pipeline_carve), so that a stream of 64 KiB blocks
 * fills -m with data rather than with 64 KiB in every 4 MiB block; the
 * address space is reserved now, so a failure is reported before anything
 * connects. */
static int plan_buffer(struct pipeline *p, struct weir_error *err)
{
    const struct weir_options *o = p->o;
    if (p->encode || p->may_decode)
        p->nworkers = o->threads;
    p->workers = calloc((size_t)p->nworkers + 1, sizeof *p->workers);
    if (!p->workers)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "buffer: worker table");
    p->unit = (size_t)o->block;
    if (p->encode) {
        p->unit = o->block < CODEC_BLOCK_MAX ? (size_t)o->block : CODEC_BLOCK_MAX;
        p->wire_block_max = (uint32_t)p->unit;
    } else {
        p->wire_block_max = o->block < CODEC_BLOCK_MAX ? (uint32_t)o->block : CODEC_BLOCK_MAX;
    }
    if (p->may_decode) {
        p->wire_block_max = CODEC_BLOCK_MAX;
        uint64_t least = transform_blocks(p) * pool_stride(CODEC_BLOCK_MAX);
        return pool_reserve(&p->pool, o->mem > least ? o->mem : least, err);
    }
    size_t block = p->encode ? p->unit + CODEC_BLOCK_OVERHEAD : p->unit;
    uint64_t nblocks = o->mem / pool_stride(block);
    if (nblocks < transform_blocks(p))
        nblocks = transform_blocks(p);
    if (pool_reserve(&p->pool, nblocks * pool_stride(block), err))
        return -1;
    return carve_locked(p, block, err);
}

int pipeline_create(const struct weir_options *o, struct weir_log *log,
                    struct pipeline **out, struct weir_error *err)
{
    struct pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "pipeline");
    *out = p;
    p->o = o;
    p->log = log;
    p->main_thread = pthread_self();
    sync_mutex_init(&p->lock);
    sync_cond_init(&p->data_cv);
    sync_cond_init(&p->space_cv);
    sync_cond_init(&p->job_cv);
    atomic_init(&p->stop, false);
    endpoint_none(&p->in_ep);
    p->listener.fd = -1;
    p->empty_since = -1;
    p->gate_open = o->start_write_pct == 0;
    p->encode = o->compress;
    p->may_decode = o->decode || (o->listen && !o->raw);
    ratelimit_init(&p->read_rl, o->read_rate);
    if (plan_buffer(p, err))
        return -1;
    /* the input first: a start that fails leaves no output behind */
    if (o->listen) {
        if (tcp_listen(o, &p->listener, err))
            return -1;
    } else if (endpoint_open_input(o->input_path, o->stdin_closed, &p->in_ep, err)) {
        return -1;
    }
    struct endpoint log_ep;
    endpoint_none(&log_ep);
    if (log->file) {
        char name[300];
        snprintf(name, sizeof name, "log %s", o->log_path);
        endpoint_identify(&log_ep, fileno(log->file), name);
    }
    if (refuse_log(p, &p->in_ep, &log_ep, err) || open_outputs(p, &log_ep, err)) {
        for (int i = 0; i < p->nout; i++)
            endpoint_discard(&p->out[i].ep);
        return -1;
    }
    if (o->listen) {
        /* with port 0 the caller cannot know the port otherwise: say it even with -q */
        log_msg(log, strcmp(o->listen_port, "0") == 0 ? LOG_NOTICE : LOG_INFO,
                "listening on %s", p->listener.addr);
    }
    sync_lock(&p->lock);
    if (p->carved)
        plan_readahead_locked(p);
    sync_unlock(&p->lock);
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
    free(p->jobs);
    free(p->workers);
    free(p);
}

/* ---- the main thread ---------------------------------------------------- */

static void pipeline_snapshot(struct pipeline *p, struct stats_snapshot *s)
{
    memset(s, 0, sizeof *s);
    sync_lock(&p->lock);
    double now = clock_now();
    s->elapsed = p->t_start > 0 ? now - p->t_start : 0;
    s->in_bytes = atomic_load(&p->in_bytes);
    s->out_bytes = p->min_out;
    s->data_bytes = p->data_bytes;
    s->transform = p->encode || p->decoding;
    s->wire_bytes = p->encode ? p->queued_bytes : p->decoding ? s->in_bytes : 0;
    s->held = fill_locked(p);
    s->capacity = capacity_locked(p);
    double open_wait = p->empty_since >= 0 ? now - p->empty_since : 0;
    s->t_empty = p->t_empty + (p->empty_on_workers ? 0 : open_wait);
    s->t_workers = p->t_workers + (p->empty_on_workers ? open_wait : 0);
    s->workers_name = p->encode ? "compression" : "decoding";
    s->t_full = p->t_full;
    s->expect = p->o->expect_size;
    s->t_input_end = p->t_input_end > 0 ? p->t_input_end - p->t_start : 0;
    sync_unlock(&p->lock);
}

static void start_threads(struct pipeline *p)
{
    sync_lock(&p->lock);
    p->running = 1 + p->nout + p->nworkers;
    p->reader_running = true;
    for (int i = 0; i < p->nout; i++)
        p->out[i].running = true;
    for (int i = 0; i < p->nworkers; i++) {
        p->workers[i].p = p;
        p->workers[i].running = true;
    }
    sync_unlock(&p->lock);
    for (int i = 0; i < p->nworkers; i++)
        sync_create(&p->workers[i].thread, worker_main, &p->workers[i]);
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
    for (int i = 0; i < p->nout; i++) {
        if (p->out[i].running)
            pthread_kill(p->out[i].thread, WAKE_SIGNAL);
        if (p->out[i].bc_running)
            pthread_kill(p->out[i].backchannel, WAKE_SIGNAL);
    }
    sync_unlock(&p->lock);
}

static void interrupt(struct pipeline *p, int sig)
{
    struct weir_error e;
    error_set(&e, WEIR_EXIT_SIGNAL + sig, "interrupted by %s",
              sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
    pipeline_fail(p, &e);
}

/* ---- the back channel to a weir sender ---------------------------------- */

/* Send what is left of the back channel's record without blocking: the main
 * thread must not hang on a sender that stopped reading.  True when all of
 * it is out.  A send error is left for the reader (or the answer) to meet. */
static bool backchannel_flush(struct pipeline *p)
{
    while (p->bc_len > 0) {
        ssize_t n = send(p->in_ep.fd, p->bc_out, p->bc_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0)
            return false;
        memmove(p->bc_out, p->bc_out + n, p->bc_len - (size_t)n);
        p->bc_len -= (size_t)n;
    }
    return true;
}

/* Tell a weir sender that this end is alive and how far its outputs are,
 * so that its --timeout measures silence, never the length of a drain into
 * a slow consumer. */
static void send_keepalive(struct pipeline *p, double now)
{
    sync_lock(&p->lock);
    bool on = p->answer_sender && !atomic_load(&p->stop);
    uint64_t written = p->min_out;
    sync_unlock(&p->lock);
    if (!on || now < p->next_keepalive)
        return;
    p->next_keepalive = now + CODEC_KEEPALIVE_SECS;
    if (!backchannel_flush(p))
        return;   /* the last one is still on its way */
    p->bc_len = codec_keepalive(p->bc_out, written);
    backchannel_flush(p);
}

struct status_state {
    struct stats_snapshot prev;
    double next;         /* monotonic time of the next redraw */
};

static void draw_status(struct pipeline *p, struct status_state *st, bool whole_line)
{
    struct stats_snapshot now;
    char line[320];
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
    double last_kick = 0, next_trim = clock_now() + TRIM_INTERVAL;
    sigset_t set;
    main_signals(&set);
    pipeline_snapshot(p, &st.prev);
    for (;;) {
        sync_lock(&p->lock);
        bool done = p->running == 0;
        sync_unlock(&p->lock);
        if (done)
            return;
        double now = clock_now();
        double wait = live_status ? st.next - now : TRIM_INTERVAL;
        if (wait > CODEC_KEEPALIVE_SECS)
            wait = CODEC_KEEPALIVE_SECS;
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
        send_keepalive(p, clock_now());
        if (clock_now() >= next_trim) {
            sync_lock(&p->lock);
            pool_trim_locked(&p->pool, TRIM_KEEP, TRIM_BATCH);
            sync_unlock(&p->lock);
            next_trim = clock_now() + TRIM_INTERVAL;
        }
    }
}

/* Tell a weir sender how it ended, then read what it still sends (so that
 * closing does not reset the connection under the answer) until it closes. */
static void answer_sender(struct pipeline *p)
{
    unsigned char rec[CODEC_STATUS_FIXED + CODEC_STATUS_MAX];
    int code = p->failed ? p->first.status : 0;
    size_t n = codec_status(rec, code, p->data_bytes, p->failed ? p->first.msg : NULL);
    int fd = p->in_ep.fd;
    atomic_bool never = false;
    /* first the rest of a keepalive that was under way */
    if (io_write_all(fd, p->bc_out, p->bc_len, 10000, &never) != 0 ||
        io_write_all(fd, rec, n, 10000, &never) != 0) {
        if (!p->failed)
            log_msg(p->log, LOG_WARN, "%s: could not send the final status: %s",
                    p->in_ep.name, strerror(errno));
        return;
    }
    if (shutdown(fd, SHUT_WR) != 0)
        return;
    double deadline = clock_now() + DRAIN_SECS;
    unsigned char sink[16384];
    for (;;) {
        double left = deadline - clock_now();
        if (left <= 0)
            return;
        ssize_t r = io_read(fd, sink, sizeof sink, (int)(left * 1000) + 1, &never);
        if (r <= 0)
            return;
    }
}

int pipeline_run(struct pipeline *p)
{
    start_threads(p);
    main_loop(p);
    sync_join(p->reader);
    for (int i = 0; i < p->nworkers; i++)
        sync_join(p->workers[i].thread);
    for (int i = 0; i < p->nout; i++)
        sync_join(p->out[i].thread);
    if (p->answer_sender && p->in_ep.fd >= 0)
        answer_sender(p);
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
