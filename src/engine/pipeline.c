/*
 * pipeline.c - the engine: the threads of weir and how they share the
 * buffer.  The public interface is include/weir/weir.h.
 *
 * The threads
 * -----------
 * One reader thread owns the input: standard input, a file, the producer
 * command's pipe, or the TCP connection it admits on the listening socket.
 * One writer thread per output owns that output: standard output, a file,
 * the consumer command's pipe, or the TCP connection it makes.  Each moves
 * bytes through a transport (transport.h), so neither knows which kind it
 * has.  A writer that sends a weir stream to another weir has a back-channel
 * thread that reads the receiver's records (keepalives, the answer).  With
 * -z or --zstd, or when a weir stream or LZ4 data is being decoded, -T worker
 * threads transform blocks (plain zstd data is decoded in order by the
 * reader).  A producer or consumer also has a thread that passes its stderr
 * through (child.c).  A transfer spread over several connections
 * (--streams, link/stripe.c) has a thread for each connection at both
 * ends, below the writer's or the reader's transport: they only move
 * chunks between their connection and the stripe's own chunk memory,
 * under the stripe's own lock, which is never held with p->lock, so the
 * engine's loops and their one lock are as with one connection.  With
 * --streams auto on a long path the transfer grows while it runs: the
 * writer starts a short-lived job thread that joins more connections
 * (grow.c), and adds them to its stripe itself; the receiver's reader has
 * a thread beside it that owns the listening socket while the stream
 * flows and adds what joins (link/joins.c), stopped before a break's
 * readmit and at the stream's end.  The main
 * thread starts them all, turns signals into
 * actions, tells a weir sender that this end is alive, reports status to
 * the observer, moves --adapt's level (adapt.c), joins everything, answers a
 * weir sender, and returns the exit status.  There is one mutex, p->lock,
 * and three condition variables: the ring's data_cv (writers wait for
 * data) and space_cv (the reader waits for a free block), and job_cv
 * (workers wait for a job).
 *
 * The buffer
 * ----------
 * The buffer (ring.c) is nblocks blocks carved from one lazily committed
 * reservation (pool.c), in a ring of slots indexed by sequence number (seq &
 * mask).  Without a transform, the reader takes a free block, puts it in
 * the slot at head and reads into it; after every read() it publishes the
 * new length under the lock and wakes the writers, so a line typed into
 * weir comes out at once, not when a block fills.  The reader writes only
 * beyond the published length and writers read only below it, so data is
 * copied outside the lock; the lock orders the lengths.
 *
 * With a transform, the reader fills a staging block (raw data for -z, a
 * compressed payload when decoding), creates a pending slot for the result
 * and queues a job.  A worker takes the job, takes an output block, encodes
 * or decodes into it, releases the staging block, and makes the slot
 * present.  Jobs finish in any order; the ring's ready is the first slot not
 * yet present, and writers never pass it, so blocks leave in sequence
 * order.  The reader takes a block only while enough stay free for the
 * output blocks that queued jobs were promised (ring->reserved), so workers
 * never wait for memory and the pipeline cannot deadlock on a full buffer.
 * With -z a result is a run of compressed pieces that serve both kinds of
 * output at once (codec.h): a weir connection writes the weir stream's
 * spans of each, a file the LZ4 frame's, so a block is compressed once
 * however many outputs there are; the reader hashes the raw data for the
 * frame's content checksum as it reads, and adds the end of the data (the
 * weir trailer and the frame's end) as a slot of its own.
 * When weir decodes, the blocks are cut to the size the stream declares,
 * once the reader has seen it (pipeline_carve), so -m holds that much data.
 *
 * A hole (a sparse file's, zeros found with --sparse, a weir stream's hole
 * record) is a slot of its own that holds no block, only a length: it takes
 * no memory and no fill, and each writer passes it as its output can
 * (writer.c: a file seeks over it, a weir receiver gets a record, a pipe
 * the zeros).
 *
 * A plain LZ4 frame of independent blocks is decoded the same way, but its
 * content checksum is one XXH32 over the whole frame, so a content cursor
 * hashes the present slots in order behind the workers.  Whichever thread
 * makes data present and finds the cursor idle does the hashing, with the
 * lock dropped; the cursor holds slots back from release like an output,
 * and the reader waits for it at the frame's end before it judges the
 * checksum.
 *
 * Each writer has its own cursor.  It takes the published range of its
 * slot, writes it with the lock released, and advances.  A block is
 * released when every live cursor has passed it.  Free blocks are reused
 * newest-first, so a consumer that keeps up keeps RSS small.
 *
 * Reconnecting
 * ------------
 * A connection to a weir that may resume (--reconnect) has a second
 * cursor, its hold, where the oldest record the receiver has not
 * confirmed begins; the back-channel thread moves it on as confirmations
 * arrive, so unconfirmed data stays in the buffer at no cost but memory.
 * When the connection breaks, its writer (alone: the other outputs go on)
 * joins its back channel, connects again and rejoins the session
 * (link/sender.c), hears from the receiver how much of the stream it
 * holds, puts its cursor back where that record began and sends on from
 * that byte (connection.c, resume.c).  On the receiving side the reader's
 * source (link/receiver.c) meets the break inside a read; the reader asks
 * the link to take the same sender back, with every output and the
 * consumer left as they are, and returns from the read with the stream's
 * next bytes, so the decoder never knows.  The main thread's keepalives
 * and the reader's confirmations share the connection under the lock,
 * which the engine registered with the link.
 *
 * Back-pressure
 * -------------
 * When no block is free the reader waits on space_cv: the buffer is full
 * and the outputs set the pace.  With -p it then waits until the fill drops
 * below the mark.  A regular-file input also waits once it holds
 * --readahead worth of blocks: a file can be read later, so weir does not
 * copy more of it than it needs.  When every writer has caught up it waits
 * on data_cv: the buffer is empty and the input sets the pace.  With -P
 * writers also wait (the "gate") until the buffer is that full, or the
 * reader cannot add a block, each time it has run empty.  Time spent empty
 * and full is accounted at each transition and gives the summary its
 * verdict.
 *
 * Errors and shutdown
 * -------------------
 * A failed output is marked dead: its cursor stops holding blocks back and
 * the others go on, unless --stop-on-error is given or none is left.  Any
 * other failure, and SIGINT or SIGTERM, stops the pipeline: the first error
 * is recorded (the first error wins), the stop flag is set under the lock,
 * every condition variable is broadcast, and the main thread sends each
 * running thread the wake-up signal (SIGUSR2, caught by an empty handler
 * installed without SA_RESTART) every 100 ms until it has returned.  A
 * thread blocked in read(), write(), poll(), waitpid() or a rate-limit
 * sleep gets EINTR, sees the stop flag and returns.  No thread calls exit()
 * and none is cancelled.  Each thread, as it returns, sends SIGUSR2 to the
 * main thread, which waits in sigtimedwait() and so learns at once.  A
 * stream that did not end as it should is never closed as if it had: a
 * weir receiver gets an abort record and a reset, a consumer SIGTERM before
 * its input closes, and every child is waited for.
 */
#include "weir/weir.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/sync.h"
#include "crypto/secret.h"
#include "engine/pipeline_int.h"
#include "os/os.h"

#define KICK_INTERVAL 0.1
#define TRIM_INTERVAL 0.5     /* how often cold free blocks give their pages back */
#define TRIM_KEEP 16          /* the most recently freed blocks stay hot */
#define TRIM_BATCH 64         /* bounds the time the lock is held for it */

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

int weir_signals_block(struct weir_error *err)
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
    sync_sigmask(SIG_BLOCK, &set);
    return 0;
}

/* ---- setup: the input and the outputs ------------------------------------ */

/* Two transports that are one file: writing one would destroy the other
 * (weir -i f -o f, weir -i f >> f, -o a -o a, -l f -o f). */
static int refuse_same(const struct transport *a, const struct transport *b,
                       struct weir_error *err)
{
    if (!transport_same_file(a, b))
        return 0;
    return error_set(err, WEIR_EXIT_USAGE, "%s and %s are the same file", a->name, b->name);
}

/* The same for the -l file, which is closed first: the message saying so
 * must not be appended to the very file it protects. */
static int refuse_log(struct pipeline *p, const struct transport *t,
                      const struct transport *log_t, struct weir_error *err)
{
    if (!transport_same_file(t, log_t))
        return 0;
    log_close(p->log);
    return error_set(err, WEIR_EXIT_USAGE, "%s and %s are the same file", t->name,
                     log_t->name);
}

/* The files weir writes besides its outputs: the -l log, and the caller's
 * progress target (weir_config.progress_fd).  No input or output may be
 * either. */
struct side_files {
    struct transport log, progress;
};

static int refuse_side(struct pipeline *p, const struct transport *t,
                       const struct side_files *side, struct weir_error *err)
{
    if (refuse_log(p, t, &side->log, err))
        return -1;
    return refuse_same(t, &side->progress, err);
}

static int open_input(struct pipeline *p, struct weir_error *err)
{
    const struct weir_config *c = p->cfg;
    switch (c->input) {
    case WEIR_IN_LISTEN:
        if (!c->tcp.listen_port[0] && p->listen_fd >= 0) {   /* the caller's socket */
            int fd = p->listen_fd;
            p->listen_fd = -1;
            if (tcp_listener_adopt(&c->tcp, fd, &p->rx.listener, err))
                return -1;
            p->rx.listener.handoff = c->listen_handoff;
            if (c->listen_handoff)
                snprintf(p->rx.listener.addr, sizeof p->rx.listener.addr, "the service");
            return 0;
        }
        if (!c->tcp.listen_port[0]) {   /* only the connection given (channel_fd) */
            memset(&p->rx.listener, 0, sizeof p->rx.listener);
            p->rx.listener.fd = -1;
            snprintf(p->rx.listener.addr, sizeof p->rx.listener.addr, "%s",
                     c->channel_name ? c->channel_name : "channel");
            return 0;
        }
        return tcp_listen(&c->tcp, &p->rx.listener, err);
    case WEIR_IN_COMMAND: {
        int fd;
        if (child_spawn(&p->producer, CHILD_PRODUCER, c->command, false, p->log, &fd, err))
            return -1;
        p->has_producer = true;
        transport_child(&p->in, &p->producer, fd);
        return 0;
    }
    case WEIR_IN_FILE:
        return transport_open_input(&p->in, c->input_path, c->stdin_closed, err);
    case WEIR_IN_STDIN:
        return transport_open_input(&p->in, NULL, c->stdin_closed, err);
    }
    return 0;
}

static void setup_output(struct pipeline *p, struct output *out, const struct weir_output *spec)
{
    out->p = p;
    out->spec = spec;
    static const char *const kinds[] = {[WEIR_OUT_STDOUT] = "stdout", [WEIR_OUT_FILE] = "file",
                                        [WEIR_OUT_TCP] = "connection",
                                        [WEIR_OUT_COMMAND] = "command",
                                        [WEIR_OUT_DIGEST] = "digest"};
    out->kind = kinds[spec->kind];
    out->state = spec->kind == WEIR_OUT_TCP ? STATS_OUT_CONNECTING : STATS_OUT_WRITING;
    atomic_init(&out->net, 0);
    /* the name its writer gives the connection; the others take their
     * transport's once it is open */
    transport_none(&out->t);
    if (spec->kind == WEIR_OUT_TCP && spec->connected) {
        snprintf(out->name, sizeof out->name, "output %s", spec->host);
        transport_tcp(&out->t, spec->fd, out->name);   /* owned from here on */
    } else if (spec->kind == WEIR_OUT_TCP) {
        snprintf(out->name, sizeof out->name, strchr(spec->host, ':') ? "output [%s]:%s"
                 : "output %s:%s", spec->host, spec->port);
    }
    ratelimit_init(&out->rl, p->cfg->write_rate);
    atomic_init(&out->halt, false);
    ring_add_cursor(&p->ring, &out->cur, &out->halt, true);
    out->cur.broken = &out->bc.broken;
    connection_init(out);
    if (spec->kind == WEIR_OUT_TCP && !p->cfg->tcp.raw) {
        /* holds what the receiver has not confirmed, once the session may
         * resume (writer.c) */
        ring_add_cursor(&p->ring, &out->hold, NULL, false);
        out->hold.holder = true;
    }
    /* -z: a connection to another weir gets the weir stream, anything else
     * (a file, a pipe, a command, a --raw connection) one LZ4 frame;
     * --zstd: every output the weir stream, which is a zstd file too */
    bool weir = (spec->kind == WEIR_OUT_TCP && !p->cfg->tcp.raw) || p->zstd;
    out->form = weir ? CODEC_FORM_WEIR : CODEC_FORM_FRAME;
    if (p->encode)
        p->sums |= weir ? CODEC_SUMS_WEIR : CODEC_SUMS_FRAME;
}

/* A file output that cannot be opened because the file exists may be one
 * weir created a moment ago for another -o (-o a -o ./a), or the progress
 * target. */
static int explain_open_failure(struct pipeline *p, int i, const struct side_files *side,
                                struct weir_error *err)
{
    char name[300];
    snprintf(name, sizeof name, "output %s", p->out[i].spec->path);
    struct transport again;
    transport_identify_path(&again, p->out[i].spec->path, name);
    for (int j = 0; j < i; j++)
        if (refuse_same(&again, &p->out[j].t, err))
            return -1;
    (void)refuse_side(p, &again, side, err);   /* -o x -l x: the log created x */
    return -1;
}

static int open_output(struct pipeline *p, int i, const struct side_files *side,
                       struct weir_error *err)
{
    const struct weir_config *c = p->cfg;
    struct output *out = &p->out[i];
    switch (out->spec->kind) {
    case WEIR_OUT_TCP:
        return 0;   /* its writer connects */
    case WEIR_OUT_COMMAND: {
        int fd;
        if (child_spawn(&out->child, CHILD_CONSUMER, c->command, c->stdout_null, p->log,
                        &fd, err))
            return -1;
        out->has_child = true;
        transport_child(&out->t, &out->child, fd);
        snprintf(out->name, sizeof out->name, "%s", out->t.name);
        return 0;
    }
    case WEIR_OUT_DIGEST:
        if (transport_digest(&out->t, out->spec->path, err))
            return -1;
        snprintf(out->name, sizeof out->name, "%s", out->t.name);
        return 0;
    case WEIR_OUT_FILE:
    case WEIR_OUT_STDOUT:
        break;
    }
    const char *path = out->spec->kind == WEIR_OUT_FILE ? out->spec->path : NULL;
    if (transport_open_output(&out->t, path, c->force, c->dsync, c->stdout_closed, c->watchdog,
                              err))
        return path ? explain_open_failure(p, i, side, err) : -1;
    snprintf(out->name, sizeof out->name, "%s", out->t.name);
    if (refuse_same(&out->t, &p->in, err) || refuse_side(p, &out->t, side, err))
        return -1;
    for (int j = 0; j < i; j++)
        if (refuse_same(&out->t, &p->out[j].t, err))
            return -1;
    return 0;
}

/* Open every output and check it against the input, the log and the other
 * outputs.  Nothing is truncated until every check has passed. */
static int open_outputs(struct pipeline *p, const struct side_files *side,
                        struct weir_error *err)
{
    for (int i = 0; i < p->nout; i++)
        if (open_output(p, i, side, err))
            return -1;
    for (int i = 0; i < p->nout; i++)
        if (transport_truncate(&p->out[i].t, err))
            return -1;
    return 0;
}

/* A start that failed leaves nothing behind: no created file, no child. */
static void undo_start(struct pipeline *p)
{
    struct weir_error ignored;
    /* stopping: a child gets SIGTERM, its grace period, then SIGKILL (one
     * that ignores SIGTERM must not keep weir waiting for ever) */
    atomic_bool stopping = true;
    for (int i = 0; i < p->nout; i++) {
        transport_discard(&p->out[i].t);
        if (p->out[i].has_child)
            transport_close(&p->out[i].t, false, &stopping, &ignored);
    }
    if (p->has_producer)
        transport_close(&p->in, false, &stopping, &ignored);
}

void weir_config_defaults(struct weir_config *c)
{
    memset(c, 0, sizeof *c);
    c->mem = 512ULL << 20;
    c->block = 1ULL << 20;
    c->resume_read_pct = 100;
    c->readahead = 16ULL << 20;
    c->level = 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    c->threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
    c->tcp.connect_timeout = 30;
    c->tcp.io_timeout = 600;
    c->reconnect = 300;
    c->progress_fd = -1;
    c->channel_fd = -1;
    c->listen_fd = -1;
}

/* --key-file: the keys, and the handshakes' contexts for each side. */
static int load_keys(struct pipeline *p, struct weir_error *err)
{
    const struct weir_config *c = p->cfg;
    if (c->admit_tls) {   /* a service's: its senders' keys (serve.h) */
        p->tls_server = c->admit_tls;
        return 0;
    }
    if (c->key_text) {
        if (keyfile_load_text(&p->keys, "the one-time key", c->key_text, c->key_text_len,
                              &p->key, err))
            return -1;
    } else if (!c->key_file) {
        return 0;
    } else if (keyfile_load(&p->keys, c->key_file, c->key_id, &p->key, err)) {
        return -1;
    }
    p->keyed = true;
    bool any_tcp = false;
    for (int i = 0; i < c->noutputs; i++)
        any_tcp |= c->outputs[i].kind == WEIR_OUT_TCP;
    if (any_tcp && tls_context_new(&p->tls_client, &p->keys, p->key, false, err))
        return -1;
    /* a listener given --key-id takes that key alone */
    if (c->input == WEIR_IN_LISTEN &&
        tls_context_new(&p->tls_server, &p->keys, c->key_id ? p->key : NULL, true, err))
        return -1;
    return 0;
}

static int create(struct pipeline *p, struct weir_error *err)
{
    const struct weir_config *c = p->cfg;
    if (load_keys(p, err) || plan_buffer(p, err))
        return -1;
    static const struct weir_output stdout_spec = {.kind = WEIR_OUT_STDOUT};
    p->nout = c->noutputs ? c->noutputs : 1;
    for (int i = 0; i < p->nout; i++) {
        setup_output(p, &p->out[i], c->noutputs ? &c->outputs[i] : &stdout_spec);
        if (p->tls_client && p->out[i].spec->kind == WEIR_OUT_TCP)
            p->sealing_writers++;   /* the workers stay until it is done */
    }
    p->sealq = calloc((size_t)p->nout * SEAL_AHEAD, sizeof *p->sealq);
    if (!p->sealq)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "engine: seal queue");
    /* the input first: a start that fails leaves no output behind */
    if (open_input(p, err) || plan_content_size(p, err))
        return -1;
    plan_reread(p);
    struct stat st;
    if (p->in.regular && fstat(p->in.fd, &st) == 0 && st.st_size > 0)
        p->input_size = (uint64_t)st.st_size;   /* for an ETA; unknown if fstat fails */
    struct side_files side;
    transport_none(&side.log);
    transport_none(&side.progress);
    if (p->log->file) {
        char name[300];
        snprintf(name, sizeof name, "log %s", c->log_path ? c->log_path : "");
        transport_identify_fd(&side.log, fileno(p->log->file), name);
    }
    if (c->progress_fd >= 0)
        transport_identify_fd(&side.progress, c->progress_fd,
                              c->progress_name ? c->progress_name : "progress");
    if (refuse_log(p, &side.progress, &side.log, err) || refuse_side(p, &p->in, &side, err) ||
        open_outputs(p, &side, err)) {
        undo_start(p);
        return -1;
    }
    if (c->input == WEIR_IN_LISTEN && p->rx.listener.fd >= 0 && !p->rx.listener.handoff) {
        /* with port 0 the caller cannot know the port otherwise: say it even with -q */
        log_msg(p->log, strcmp(c->tcp.listen_port, "0") == 0 && !c->port_told ? LOG_NOTICE
                                                                               : LOG_INFO,
                "listening on %s", p->rx.listener.addr);
        bool loopback = strncmp(p->rx.listener.addr, "127.", 4) == 0 ||
                        strncmp(p->rx.listener.addr, "[::1]", 5) == 0;
        if (!p->keyed && !c->tcp.allow_host[0] && !loopback)
            log_msg(p->log, LOG_WARN, "no key and no allow-list: anyone who can reach %s can "
                    "write into the output (see --key-file)", p->rx.listener.addr);
    }
    sync_lock(&p->lock);
    if (p->ring.carved)
        plan_readahead_locked(p);
    sync_unlock(&p->lock);
    return 0;
}

/* The one global: a signal that arrived while the engine was being set up.
 * Opening a FIFO or a tape blocks until its other side comes, so during
 * setup SIGINT, SIGTERM and SIGHUP are let in, to this handler (installed
 * without SA_RESTART, so open() returns EINTR); everywhere else they are
 * blocked and taken with sigtimedwait(). */
static volatile sig_atomic_t setup_signal;

static void setup_handler(int sig)
{
    setup_signal = sig;
}

static const int setup_signals[] = {SIGINT, SIGTERM, SIGHUP};

/* Let the signals in (only those not ignored: nohup stays in force). */
static void setup_signals_open(struct sigaction *saved)
{
    sigset_t set;
    sigemptyset(&set);
    setup_signal = 0;
    for (int i = 0; i < 3; i++) {
        struct sigaction sa = {.sa_handler = setup_handler};
        sigemptyset(&sa.sa_mask);
        if (sigaction(setup_signals[i], NULL, &saved[i]) != 0 ||
            saved[i].sa_handler == SIG_IGN || sigaction(setup_signals[i], &sa, NULL) != 0)
            continue;
        sigaddset(&set, setup_signals[i]);
    }
    sync_sigmask(SIG_UNBLOCK, &set);
}

/* Block them again and put back the actions that were changed; one that
 * was ignored is left alone: setting SIG_IGN again would discard that
 * signal if it is pending (sent to a weir started in the background of a
 * script, whose SIGINT is ignored, during setup: the main loop would never
 * take it, and the transfer ran on). */
static void setup_signals_close(const struct sigaction *saved)
{
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < 3; i++)
        sigaddset(&set, setup_signals[i]);
    sync_sigmask(SIG_BLOCK, &set);
    for (int i = 0; i < 3; i++)
        if (saved[i].sa_handler != SIG_IGN)
            (void)sigaction(setup_signals[i], &saved[i], NULL);
}

int weir_create(const struct weir_config *c, struct weir_log *log, struct weir_engine **out,
                struct weir_error *err)
{
    struct pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "engine");
    *out = (struct weir_engine *)p;
    p->cfg = c;
    p->log = log;
    p->main_thread = pthread_self();
    sync_mutex_init(&p->lock);
    sync_cond_init(&p->job_cv);
    atomic_init(&p->stop, false);
    ring_init(&p->ring, &p->lock, &p->stop, c->start_write_pct, c->resume_read_pct);
    ring_add_cursor(&p->ring, &p->content_cur, NULL, false);
    transport_none(&p->in);
    receiver_init(&p->rx);
    p->reread_fd = -1;
    p->channel_fd = c->channel_fd;   /* owned from here on */
    p->listen_fd = c->listen_fd;     /* so is this */
    p->encode = c->compress;
    p->zstd = c->compress && c->zstd;
    adapt_init(&p->adapt, p->zstd && c->adapt, c->adapt_min, c->adapt_max);
    p->may_decode = c->decode || (c->input == WEIR_IN_LISTEN && !c->tcp.raw);
    ratelimit_init(&p->read_rl, c->read_rate);
    struct sigaction saved[3];
    setup_signals_open(saved);
    int rc = create(p, err);
    setup_signals_close(saved);
    int sig = setup_signal;
    if (sig) {
        if (rc == 0)
            undo_start(p);
        return error_set(err, WEIR_EXIT_SIGNAL + sig, "interrupted by %s",
                         sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
    }
    return rc;
}

void weir_destroy(struct weir_engine *e)
{
    struct pipeline *p = (struct pipeline *)e;
    if (!p)
        return;
    struct weir_error ignored;
    atomic_bool stopping = true;   /* a child still there is stopped, not awaited */
    receiver_stop_joins(&p->rx);
    tcp_listener_close(&p->rx.listener);
    if (p->channel_fd >= 0)
        close(p->channel_fd);
    if (p->listen_fd >= 0)
        close(p->listen_fd);
    if (p->reread_fd >= 0)
        close(p->reread_fd);
    transport_close(&p->in, false, &stopping, &ignored);
    if (p->has_producer)
        child_release(&p->producer);
    for (int i = 0; i < p->nout; i++) {
        transport_close(&p->out[i].t, false, &stopping, &ignored);
        if (p->out[i].has_child)
            child_release(&p->out[i].child);
        for (int k = 0; k < SEAL_AHEAD; k++)
            free(p->out[i].ahead[k].out);
        secret_free(p->out[i].tx_dir, sizeof *p->out[i].tx_dir);
        free(p->out[i].marks);
        free(p->out[i].recipe);
        free(p->out[i].replay_buf);
    }
    ring_destroy(&p->ring);
    tls_context_free(p->tls_client);
    if (p->tls_server != p->cfg->admit_tls)   /* the caller's stays the caller's */
        tls_context_free(p->tls_server);
    if (p->keyed)
        keyfile_free(&p->keys);
    free(p->jobs);
    free(p->workers);
    free(p->sealq);
    free(p);
}

/* ---- the main thread ---------------------------------------------------- */

static const char *waiting_for_locked(const struct pipeline *p, struct stats_snapshot *s)
{
    for (int i = 0; i < p->nout; i++) {
        const struct output *o = &p->out[i];
        if (!o->awaiting || o->dead)
            continue;
        if (o->has_child)
            return "its consumer to finish";
        s->peer_written = o->bc.peer_written;
        return o->bc.peer_phase == SESSION_CONSUMER ? "the receiver's consumer to finish"
                                                 : "the receiver to write everything";
    }
    return NULL;
}

_Static_assert(WEIR_MAX_OUTPUTS <= STATS_MAX_OUTPUTS, "a snapshot holds every output");

static enum stats_output_state output_state_locked(const struct output *o)
{
    if (o->dead)
        return STATS_OUT_FAILED;
    if (o->state == STATS_OUT_DONE || o->state == STATS_OUT_STOPPED)
        return o->state;
    if (o->awaiting)
        return o->has_child ? STATS_OUT_CONSUMER : STATS_OUT_ANSWER;
    return o->state;
}

/* The transfer's phase, from the outputs' states already in s. */
static enum stats_phase phase_locked(const struct pipeline *p, const struct stats_snapshot *s)
{
    if (p->finished)
        return STATS_DONE;
    if (atomic_load(&p->stop))
        return STATS_STOPPING;
    bool awaited = false, busy = false;
    for (int i = 0; i < s->noutputs; i++) {
        switch (s->outputs[i].state) {
        case STATS_OUT_CONNECTING:
            return STATS_CONNECTING;
        case STATS_OUT_ANSWER:
        case STATS_OUT_CONSUMER:
            awaited = true;
            break;
        case STATS_OUT_WRITING:
        case STATS_OUT_FLUSHING:
            busy = true;
            break;
        default:
            break;
        }
    }
    const struct ring *r = &p->ring;
    if (r->t_start <= 0 || (s->in_bytes == 0 && !r->input_done))
        return STATS_WAITING;
    if (!r->input_done)
        return STATS_TRANSFERRING;
    return awaited && !busy ? STATS_ANSWER : STATS_DRAINING;
}

/* The transform in a snapshot: which, its codec, its level or levels. */
static void snapshot_codec_locked(const struct pipeline *p, struct stats_snapshot *s)
{
    s->transform = p->encode || p->decoding;
    s->decoding = p->decoding;
    s->codec = p->zstd || p->decoding_zstd ? "zstd" : "lz4";
    s->level = !p->encode ? 0 : p->adapt.on ? atomic_load(&p->adapt.level) : p->cfg->level;
    s->storing = s->level == ADAPT_STORED;
    if (s->storing)
        s->level = 0;
    s->adapt = p->adapt.on;
    s->level_min = atomic_load(&p->adapt.used_min);
    s->level_max = atomic_load(&p->adapt.used_max);
    s->stored = atomic_load(&p->adapt.stored);
}

/* A connection's paths, as its writer last sampled them. */
static void snapshot_paths_locked(const struct output *o, struct stats_output *so)
{
    so->streams = o->spec->kind != WEIR_OUT_TCP ? 0 : o->npaths > 0 ? (unsigned)o->npaths : 1;
    for (unsigned i = 0; i < so->streams && i < STATS_MAX_STREAMS; i++) {
        struct stats_path *sp = &so->paths[i];
        sp->known = o->path_known[i];
        sp->rtt_ms = o->path[i].rtt_ms;
        sp->cwnd = o->path[i].cwnd;
        sp->retrans = o->path[i].retrans;
        sp->delivery_rate = o->path[i].delivery_rate;
    }
}

void weir_snapshot(struct weir_engine *e, struct stats_snapshot *s)
{
    struct pipeline *p = (struct pipeline *)e;
    const struct ring *r = &p->ring;
    memset(s, 0, sizeof *s);
    sync_lock(&p->lock);
    double now = clock_now();
    s->elapsed = r->t_start > 0 ? now - r->t_start : 0;
    s->in_bytes = atomic_load(&p->in_bytes);
    s->out_bytes = r->min_out;
    s->data_bytes = p->data_bytes;
    s->hole_bytes = p->hole_bytes;
    snapshot_codec_locked(p, s);
    s->wire_bytes = p->encode ? r->queued_bytes : p->decoding ? s->in_bytes : 0;
    s->held = ring_fill_locked(r);
    s->capacity = ring_capacity_locked(r);
    double open_wait = r->empty_since >= 0 ? now - r->empty_since : 0;
    s->t_empty = r->t_empty + (r->empty_on_workers ? 0 : open_wait);
    s->t_workers = r->t_workers + (r->empty_on_workers ? open_wait : 0);
    s->workers_name = p->encode ? "compression" : "decoding";
    s->t_full = r->t_full;
    s->expect = p->cfg->expect_size;
    s->t_input_end = r->t_input_end > 0 ? r->t_input_end - r->t_start : 0;
    /* what the slowest weir receiver's outputs wrote, as its keepalives say */
    for (int i = 0; i < p->nout; i++) {
        const struct output *o = &p->out[i];
        if (o->spec->kind == WEIR_OUT_TCP && !o->dead && o->bc.peer_written &&
            (!s->peer_written || o->bc.peer_written < s->peer_written))
            s->peer_written = o->bc.peer_written;
    }
    s->waiting = waiting_for_locked(p, s);
    s->net_bytes = atomic_load(&p->net_in);
    s->input_size = p->input_size;
    s->failed = p->failed;
    s->failure = p->failed ? p->first.msg : NULL;
    s->reconnections = p->reconnections;
    s->gap_secs = p->gap_secs + (p->gap_since > 0 ? now - p->gap_since : 0);
    s->reconnecting = p->gap_since > 0;
    s->noutputs = p->nout;
    s->streams = p->in_streams > 1 ? p->in_streams : 0;
    for (int i = 0; i < p->nout; i++) {
        const struct output *o = &p->out[i];
        struct stats_output *so = &s->outputs[i];
        so->name = o->name;
        so->kind = o->kind;
        so->bytes = o->cur.bytes > o->bytes_peak ? o->cur.bytes : o->bytes_peak;
        so->holes = o->cur.holes;
        so->net_bytes = atomic_load(&o->net);
        so->state = output_state_locked(o);
        so->reconnections = o->reconnections;
        snapshot_paths_locked(o, so);
        if (so->streams > s->streams)
            s->streams = so->streams;
        s->net_bytes += so->net_bytes;
        s->reconnections += o->reconnections;
        s->gap_secs += o->gap_secs + (o->gap_since > 0 ? now - o->gap_since : 0);
        s->reconnecting |= o->gap_since > 0;
    }
    s->phase = phase_locked(p, s);
    sync_unlock(&p->lock);
}

static int start_thread(struct pipeline *p, pthread_t *t, void *(*fn)(void *), void *arg,
                        bool *started, bool *running)
{
    struct weir_error err;
    sync_lock(&p->lock);
    p->running++;
    *running = true;
    sync_unlock(&p->lock);
    if (sync_create(t, fn, arg, &err) == 0) {
        *started = true;
        return 0;
    }
    sync_lock(&p->lock);
    p->running--;
    *running = false;
    sync_unlock(&p->lock);
    pipeline_fail(p, &err);
    return -1;
}

/* Workers first, then the reader, then the writers; if the system runs out
 * of threads part way, the pipeline stops and those started are joined. */
static void start_threads(struct pipeline *p)
{
    for (int i = 0; i < p->nworkers; i++) {
        p->workers[i].p = p;
        if (start_thread(p, &p->workers[i].thread, worker_main, &p->workers[i],
                         &p->workers[i].started, &p->workers[i].running))
            return;
    }
    if (start_thread(p, &p->reader, reader_main, p, &p->reader_started, &p->reader_running))
        return;
    for (int i = 0; i < p->nout; i++)
        if (start_thread(p, &p->out[i].thread, writer_main, &p->out[i], &p->out[i].started,
                         &p->out[i].running))
            return;
}

/* Send the wake-up signal to every thread still running. */
static void kick_threads(struct pipeline *p)
{
    sync_lock(&p->lock);
    if (p->reader_running)
        sync_kill(p->reader, WAKE_SIGNAL);
    for (int i = 0; i < p->nout; i++) {
        if (p->out[i].running)
            sync_kill(p->out[i].thread, WAKE_SIGNAL);
        if (p->out[i].bc.running)
            sync_kill(p->out[i].bc.thread, WAKE_SIGNAL);
    }
    sync_unlock(&p->lock);
}

/* SIGINT, SIGTERM or SIGHUP.  One from the terminal went to the whole
 * process group, children included; one sent to weir alone (kill) is
 * passed on to them.  Either way they are signalled once, and waited for. */
static void interrupt(struct pipeline *p, const siginfo_t *si)
{
    int sig = si->si_signo;
    /* the stop first: a child that dies of the signal must not be the
     * error reported (the first error wins) */
    struct weir_error e;
    error_set(&e, WEIR_EXIT_SIGNAL + sig, "interrupted by %s",
              sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
    sync_lock(&p->lock);
    p->signalled = true;
    sync_unlock(&p->lock);
    pipeline_fail(p, &e);
    bool to_group = si->si_code != SI_USER && si->si_code != SI_QUEUE;
    struct child *kids[WEIR_MAX_OUTPUTS + 1];
    int n = 0;
    if (p->has_producer)
        kids[n++] = &p->producer;
    for (int i = 0; i < p->nout; i++)
        if (p->out[i].has_child)
            kids[n++] = &p->out[i].child;
    for (int i = 0; i < n; i++) {
        if (to_group)
            child_signalled(kids[i], sig);
        else
            child_signal(kids[i], sig);
    }
}

struct status_state {
    struct stats_snapshot prev;
    double next;         /* monotonic time of the next report */
};

static void report_status(struct pipeline *p, const struct weir_observer *obs,
                          struct status_state *st, bool whole_line)
{
    if (!obs || !obs->status)
        return;
    struct stats_snapshot now;
    weir_snapshot((struct weir_engine *)p, &now);
    obs->status(obs->ctx, &st->prev, &now, whole_line);
    st->prev = now;
}

/* Tell a weir sender that this end is alive, how far its outputs are and
 * what it is doing. */
static void keep_sender_informed(struct pipeline *p, double now)
{
    sync_lock(&p->lock);
    bool on = p->answer_sender && !atomic_load(&p->stop);
    uint64_t written = p->ring.min_out;
    enum session_phase phase = p->ring.input_done ? SESSION_DRAINING : SESSION_RECEIVING;
    for (int i = 0; i < p->nout; i++)
        if (p->out[i].has_child && p->out[i].awaiting)
            phase = SESSION_CONSUMER;
    /* under the lock: the reader sends its confirmations on the same
     * connection, and puts a new one in its place after a break */
    if (on)
        receiver_inform_locked(&p->rx, written, phase, now);
    sync_unlock(&p->lock);
}

/* -W: the engine fails when neither the input nor any output has moved a
 * byte for that long (a receiver's keepalives count for its sender), and
 * says which end it blames: a listener nobody joined, an input that sends
 * nothing, or the slowest output.  Waiting for a consumer to exit or for a
 * receiver's answer after the last byte is not a stall: --timeout bounds a
 * silent receiver, and a consumer is allowed its time to finish.  Nor is a
 * worker's time inside a block (level 12 over -s 64M takes seconds), and a
 * pipe or a file takes a large block in parts that each count
 * (transport_pace_writes). */
struct watchdog {
    double limit;        /* seconds; 0: off */
    double last_move;    /* when a byte last moved */
    uint64_t last_sum;   /* bytes moved, summed over every end */
};

static void watch(struct pipeline *p, struct watchdog *w, double now)
{
    if (w->limit <= 0)
        return;
    struct weir_error e;
    sync_lock(&p->lock);
    /* holes count as moving: a long one may take a while to write as zeros */
    uint64_t sum = atomic_load(&p->in_bytes) + p->hole_bytes;
    /* a gap in a connection that may resume is bounded by --reconnect */
    bool busy = atomic_load(&p->stop) || p->transforming > 0 || p->gap_since > 0;
    const struct output *slowest = NULL;
    for (int i = 0; i < p->nout; i++) {
        const struct output *o = &p->out[i];
        sum += o->cur.bytes + o->cur.holes + o->bc.peer_written + o->rp_bytes + o->rp_holes;
        /* connecting and greeting have bounds of their own */
        busy |= (o->awaiting || o->state == STATS_OUT_CONNECTING) && !o->dead;
        if (!o->dead && o->running && (!slowest || o->cur.bytes < slowest->cur.bytes))
            slowest = o;
    }
    if (sum != w->last_sum || busy || now - w->last_move < w->limit) {
        if (sum != w->last_sum || busy) {
            w->last_sum = sum;
            w->last_move = now;
        }
        sync_unlock(&p->lock);
        return;
    }
    const struct ring *r = &p->ring;
    if (p->cfg->input == WEIR_IN_LISTEN && r->t_start <= 0)
        error_set(&e, WEIR_EXIT_NETWORK, "watchdog (-W %g): no sender connected to %s",
                  w->limit, p->rx.listener.addr);
    else if (!r->input_done && (r->empty_since >= 0 || !r->gate_open || !slowest))
        error_set(&e, p->in.status ? p->in.status : WEIR_EXIT_INPUT,
                  "watchdog (-W %g): %s sent nothing for %g s", w->limit, p->in.name,
                  w->limit);
    else if (slowest && slowest->spec->kind == WEIR_OUT_TCP)
        error_set(&e, WEIR_EXIT_NETWORK, strchr(slowest->spec->host, ':')
                  ? "watchdog (-W %g): output [%s]:%s took nothing for %g s"
                  : "watchdog (-W %g): output %s:%s took nothing for %g s", w->limit,
                  slowest->spec->host, slowest->spec->port, w->limit);
    else
        error_set(&e, WEIR_EXIT_OUTPUT, "watchdog (-W %g): %s took nothing for %g s",
                  w->limit, slowest ? slowest->t.name : "the output", w->limit);
    w->limit = 0;   /* once */
    sync_unlock(&p->lock);
    pipeline_fail(p, &e);
}

/* Wait for signals and thread ends until every thread has returned. */
static void main_loop(struct pipeline *p, const struct weir_observer *obs)
{
    double interval = obs && obs->interval > 0 ? obs->interval : 0;
    struct status_state st = {.next = clock_now() + interval};
    double last_kick = 0, next_trim = clock_now() + TRIM_INTERVAL;
    struct watchdog dog = {.limit = p->cfg->watchdog, .last_move = clock_now()};
    sigset_t set;
    main_signals(&set);
    weir_snapshot((struct weir_engine *)p, &st.prev);
    for (;;) {
        sync_lock(&p->lock);
        bool done = p->running == 0;
        sync_unlock(&p->lock);
        if (done)
            return;
        double now = clock_now();
        double wait = interval > 0 ? st.next - now : TRIM_INTERVAL;
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
        siginfo_t si;
        int sig = os_wait_signal(&set, &si, wait);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
            interrupt(p, &si);
        else if (sig == SIGUSR1)
            report_status(p, obs, &st, true);
        if (interval > 0 && clock_now() >= st.next) {
            report_status(p, obs, &st, false);
            st.next = clock_now() + interval;
        }
        keep_sender_informed(p, clock_now());
        watch(p, &dog, clock_now());
        adapt_tick(&p->adapt, p, clock_now());
        if (clock_now() >= next_trim) {
            sync_lock(&p->lock);
            pool_trim_locked(&p->ring.pool, TRIM_KEEP, TRIM_BATCH);
            sync_unlock(&p->lock);
            next_trim = clock_now() + TRIM_INTERVAL;
        }
    }
}

/* The answer to a weir sender, once every output accepted every byte,
 * flushed, and every consumer exited: the sender's exit status rests on
 * it.  Its waits (for the sender's word that it read it, for the sender to
 * come back for it) run on the main thread once its loop is over: a stop
 * watch takes the place of the loop's signals, so that one ends them at
 * once (they were up to 35 s). */
static void answer_sender(struct pipeline *p)
{
    int code = p->failed ? p->first.status : 0;
    const char *msg = p->failed ? p->first.msg : NULL;
    struct sync_stop_watch w = {.halt = false, .sig = 0, .running = false};
    struct weir_error err;
    (void)sync_stop_watch_start(&w, &err);   /* without it the waits keep their own bounds */
    /* only an answer the sender can still want is taken home: success, or
     * this end's outputs failing; not a stop (a signal here, the sender's
     * abort, its weir gone) */
    const struct receiver_verdict v = {.code = code, .msg = msg, .bytes = p->data_bytes,
                                       .chain = p->stream_chain,
                                       .whole = p->stream_whole && !p->failed,
                                       .wanted = !p->failed ||
                                                 p->first.status == WEIR_EXIT_OUTPUT};
    bool sent = receiver_answer(&p->rx, &v, &w.halt);
    if (!sent && !p->failed && !p->rx.answer_home)
        log_msg(p->log, LOG_WARN, "%s: could not send the final status: %s", p->in.name,
                strerror(errno));
    receiver_answer_home(&p->rx, sent, &v, &w.halt);
    sync_stop_watch_end(&w);
    int sig = atomic_load(&w.sig);
    if (sig) {
        /* taken here, as the loop would have: the transfer was interrupted */
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        siginfo_t si;
        if (os_wait_signal(&one, &si, 0) == sig)
            interrupt(p, &si);
    }
}

int weir_run(struct weir_engine *e, const struct weir_observer *obs)
{
    struct pipeline *p = (struct pipeline *)e;
    start_threads(p);
    main_loop(p, obs);
    if (p->reader_started)
        sync_join(p->reader);
    for (int i = 0; i < p->nworkers; i++)
        if (p->workers[i].started)
            sync_join(p->workers[i].thread);
    for (int i = 0; i < p->nout; i++)
        if (p->out[i].started)
            sync_join(p->out[i].thread);
    if (p->answer_sender && p->in.fd >= 0)
        answer_sender(p);
    if (p->in.fd >= 0) {
        struct weir_error ignored;
        transport_close(&p->in, !p->failed, NULL, &ignored);
    }
    /* -H: the digest is said only of a transfer that succeeded whole */
    for (int i = 0; !p->failed && i < p->nout; i++)
        if (p->out[i].spec->kind == WEIR_OUT_DIGEST && p->out[i].t.digest_hex[0])
            log_msg(p->log, LOG_NOTICE, "%s hash: %s", p->out[i].spec->path,
                    p->out[i].t.digest_hex);
    /* a transfer that failed before it wrote a byte leaves no empty file
     * behind, so that a retry is not refused with "file exists" */
    for (int i = 0; p->failed && i < p->nout; i++)
        if (p->out[i].cur.bytes == 0)
            transport_discard(&p->out[i].t);
    sync_lock(&p->lock);
    p->finished = true;
    for (int i = 0; i < p->nout; i++)
        if (!p->out[i].started)
            p->out[i].state = STATS_OUT_STOPPED;   /* its thread never ran */
    sync_unlock(&p->lock);
    return p->failed ? p->first.status : WEIR_EXIT_OK;
}

void weir_fail(struct weir_engine *e, int status, const char *msg)
{
    struct weir_error err;
    error_set(&err, status, "%s", msg);
    pipeline_fail((struct pipeline *)e, &err);
}

bool weir_resumable(struct weir_engine *e)
{
    struct pipeline *p = (struct pipeline *)e;
    sync_lock(&p->lock);
    bool yes = p->rx.resumable;
    for (int i = 0; i < p->nout; i++)
        yes = yes || p->out[i].bc.resumable;
    sync_unlock(&p->lock);
    return yes;
}

bool weir_stream_whole(struct weir_engine *e)
{
    struct pipeline *p = (struct pipeline *)e;
    sync_lock(&p->lock);
    bool whole = p->stream_whole;
    int tcp = 0, ended = 0;
    for (int i = 0; i < p->nout; i++)
        if (p->out[i].spec->kind == WEIR_OUT_TCP) {
            tcp++;
            ended += p->out[i].bc.ended;
        }
    sync_unlock(&p->lock);
    return whole || (tcp > 0 && ended == tcp);
}

int weir_listen_port(const struct weir_engine *e)
{
    const struct pipeline *p = (const struct pipeline *)e;
    const char *colon = strrchr(p->rx.listener.addr, ':');
    return p->rx.listener.fd >= 0 && colon ? atoi(colon + 1) : -1;
}

bool weir_succeeded(const struct weir_engine *e)
{
    const struct pipeline *p = (const struct pipeline *)e;
    return !p->failed;
}
