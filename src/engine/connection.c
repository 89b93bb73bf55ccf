/*
 * connection.c - an output's connection to a weir receiver, as the engine
 * drives it: connecting, what resuming keeps (the marks and the hold are
 * the buffer's), the stream's beginning, waiting for the answer, the raw
 * confirmation, and the reconnect loop.  What the two weirs say to each
 * other is the link layer's: the terms and the handshake, the session's
 * name and rejoining it (link/sender.h), the receiver's records and its
 * answer (link/backchannel.h), whose owner this file registers.  See
 * writer_int.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/crypto.h>

#include "base/io.h"
#include "base/sync.h"
#include "crypto/secret.h"
#include "format/codec.h"
#include "format/sparse.h"

#include "link/sender.h"
#include "link/stripe.h"

#include "engine/writer_int.h"

/* ---- the receiver's keepalives and answer (link/backchannel.h) ------------ */

static void bc_confirmed_locked(void *ctx, uint64_t held)
{
    confirmed_locked(ctx, held);
}

static void bc_unnamed_locked(void *ctx)
{
    struct output *o = ctx;
    if (o->may_resume)
        give_up_resuming_locked(o);
}

static void bc_failed(void *ctx, const struct weir_error *e)
{
    output_fail(ctx, e);
}

void connection_init(struct output *o)
{
    struct pipeline *p = o->p;
    o->bc.own = (struct backchannel_owner){
        .lock = &p->lock, .cv = &p->ring.data_cv, .ctx = o,
        .on_thread = thread_unblock_wake, .on_confirmed = bc_confirmed_locked,
        .on_unnamed = bc_unnamed_locked, .on_failure = bc_failed};
    o->bc.t = &o->t;
    o->bc.halt = &o->halt;
    o->bc.silence = session_silence(p->cfg->tcp.io_timeout);
    int tcp = 0;
    for (int i = 0; i < p->cfg->noutputs; i++)
        tcp += p->cfg->outputs[i].kind == WEIR_OUT_TCP;
    o->bc.several = tcp > 1;
}

int await_answer(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    if (!says_read(o) && o->t.ops->half_close(&o->t, e)) {
        if (backchannel_breaks(errno))
            (void)write_error(o, e, "shutdown");   /* a break: it may resume */
        return STEP_FAIL;
    }
    double limit = p->cfg->tcp.io_timeout;
    if (limit > 0 && limit < CODEC_SILENCE_MIN)
        limit = CODEC_SILENCE_MIN;
    int rc = backchannel_await(&o->bc, &o->session, limit, &o->dead, &o->awaiting,
                               io_timeout_ms(p, &o->t), e);
    if (rc != STEP_OK)
        return rc;
    /* a success answer holds only for this stream: its chain and its count */
    uint64_t sent = o->session.frame ? session_framed_bytes(&o->session) : p->data_bytes;
    sync_lock(&p->lock);
    uint64_t mine = o->session.frame ? session_framed_chain(&o->session) : p->chain;
    sync_unlock(&p->lock);
    return backchannel_check(&o->bc, sent, mine, e);
}

int raw_confirm(struct output *o, struct weir_error *e)
{
    return sender_raw_confirm(&o->t, &o->halt, o->plain_fallback, e);
}

/* Both ends may resume: from the stream's first byte on, what the
 * receiver has not confirmed stays in the buffer (the hold cursor) and
 * the records' starts are noted; where the receiver was reached is kept,
 * to reach it there again. */
static int keep_for_resuming(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    o->peer_len = sizeof o->peer_addr;
    if (getpeername(o->t.fd, (struct sockaddr *)&o->peer_addr, &o->peer_len) != 0)
        return error_sys(e, WEIR_EXIT_NETWORK, errno, "%s: getpeername", o->t.name), STEP_FAIL;
    if (!o->marks) {
        o->marks = calloc(RESUME_MARKS, sizeof *o->marks);
        if (!o->marks)
            return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s", o->t.name), STEP_FAIL;
    }
    /* a plain stream of a regular file is sent again from the file (a
     * sealed one keeps the hold: its records carry no sums to check the
     * file against, see reread_record) */
    o->reread = p->reread_fd >= 0 && o->session.frame && !o->t.sealed;
    /* and its receiver may then confirm rarely, if the notes can hold
     * twice what travels between two confirmations (-s under 1 KiB keeps
     * the usual confirmations) */
    o->session.reread = o->reread &&
                        p->cfg->block >= 2ull * CODEC_CONFIRM_REREAD_BYTES / RESUME_MARKS;
    if (o->reread && !o->recipe) {
        o->recipe = calloc(RESUME_MARKS, sizeof *o->recipe);
        o->replay_buf = malloc(o->session.block_max);
        if (!o->recipe || !o->replay_buf)
            return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s", o->t.name), STEP_FAIL;
    }
    sync_lock(&p->lock);
    o->marks_cap = RESUME_MARKS;
    o->marks_head = o->marks_count = 0;
    o->may_resume = true;
    if (!o->reread)
        ring_cursor_place_locked(&p->ring, &o->hold, o->cur.seq, o->cur.off, o->cur.bytes,
                                 o->cur.holes, true);
    sync_unlock(&p->lock);
    return STEP_OK;
}

/* Connect (for -O), hear the receiver's greeting, begin the stream. */
/* Connect a TCP output (unless the engine was handed the connection). */
static int connect_output(struct output *o, bool once, struct weir_error *e)
{
    struct pipeline *p = o->p;
    int fd = o->spec->fd;   /* connected: the engine takes it over */
    struct tcp_settings settings = p->cfg->tcp;
    if (once)
        settings.connect_timeout = 0;
    if (!o->spec->connected &&
        tcp_connect(o->spec->host, o->spec->port, &settings, &o->halt, p->log, o->name, &fd, e))
        return atomic_load(&o->halt) ? STEP_STOP : STEP_FAIL;
    transport_tcp(&o->t, fd, o->name);
    o->t.wire_tx = &o->net;   /* what it sends, at the socket, for snapshots */
    return STEP_OK;
}

/* Whether a break of this session can be resumed: the buffer must hold
 * what travels unconfirmed; say so when --reconnect asks for it in vain. */
static void plan_resuming(struct output *o, bool greet, bool once)
{
    const struct weir_config *c = o->p->cfg;
    o->session.resume = greet && c->reconnect > 0 && c->mem >= RESUME_MIN_BUFFER &&
                        c->block > 0 && c->mem / c->block >= RESUME_MIN_BLOCKS;
    if (greet && c->reconnect > 0 && !o->session.resume && !once)
        log_msg(o->p->log, LOG_INFO, "%s: a break will not be resumed: the buffer (%llu KiB, "
                "%llu blocks) is under the %u MiB and %u blocks resuming needs (-m, -s)", o->name,
                (unsigned long long)(c->mem >> 10),
                (unsigned long long)(c->block ? c->mem / c->block : 0),
                RESUME_MIN_BUFFER >> 20, RESUME_MIN_BLOCKS);
}

/* The receiver's greeting within limit seconds; *greet turns false when
 * it sent none and --plain-after lets the output fall back to plain bytes. */
static int hear_receiver(struct output *o, double limit, uint32_t block_max, bool *greet,
                         struct weir_error *e)
{
    const struct weir_config *c = o->p->cfg;
    double wait = c->plain_after > 0 && c->plain_after < limit ? c->plain_after : limit;
    if (!session_read_greeting(&o->session, wait, &o->halt, e))
        return STEP_OK;
    if (atomic_load(&o->halt))
        return STEP_STOP;
    if (!(c->plain_after > 0 && o->session.peer_silent))
        return STEP_FAIL;
    /* mbuffer, nc or socat: they never greet, and take plain bytes */
    log_msg(o->p->log, LOG_INFO, "%s: no weir greeting within %g s: sending plain bytes, as "
            "mbuffer does (the end cannot be verified)", o->t.name, wait);
    o->plain_fallback = true;
    *greet = false;
    session_out_init(&o->session, &o->t, false, false, false, block_max);
    return STEP_OK;
}

/* --streams auto: whether the path is long enough for more connections
 * to help, from its round trip as the system measured it on the first
 * connection.  One connection moves at most its window each round trip:
 * with the usual defaults (a 4 MiB send buffer at most) 2.5 GiB/s at 1 ms,
 * more than a LAN carries, and 25 MiB/s at 100 ms, a quarter of a
 * 1 Gbit/s link.  On loopback and a LAN (under AUTO_GROW_MIN_MS) the
 * transfer stays on one connection, as it was; a longer path begins
 * spread over one, and takes more while the window limits it (grow.c).  A
 * system that cannot say stays on one; one that gives the round trip but
 * not what limits the window (macOS) is probed, and the rule's gain test
 * decides (growth.h). */
#define AUTO_GROW_MIN_MS 2.0
static bool long_path(const struct output *o, double *rtt_ms)
{
    struct os_tcp_stats st;
    *rtt_ms = -1;
    if (os_tcp_stats(o->t.fd, &st) != 0 || st.rtt_ms < 0)
        return false;
    *rtt_ms = st.rtt_ms;
    return st.rtt_ms >= AUTO_GROW_MIN_MS;
}

/* --streams: spread the transfer when asked to (or when auto finds a long
 * path, over one connection that grows) and the receiver can put chunks
 * back in order. */
static void plan_streams(struct output *o)
{
    const struct weir_config *c = o->p->cfg;
    double rtt = -1;
    bool grow = c->streams == 0 && long_path(o, &rtt);
    int n = c->streams > 0 ? c->streams : 1;
    uint32_t want = CODEC_FEATURE_STREAMS | (grow ? CODEC_FEATURE_GROW : 0);
    o->nstreams = 1;
    if (n <= 1 && !grow)
        return;
    if ((o->session.peer_features & want) != want) {
        if (grow)
            log_msg(o->p->log, LOG_DEBUG, "%s: the receiver takes one connection a transfer "
                    "(an older weir, or --streams 1): sending over one", o->name);
        else
            log_msg(o->p->log, LOG_INFO, "%s: the receiver takes one connection a transfer (an "
                    "older weir, or --streams 1): sending over one, not %d", o->name, n);
        return;
    }
    if (grow)
        log_msg(o->p->log, LOG_INFO, "%s: a round trip of %.1f ms: one connection at first, "
                "more while the window limits the path (--streams auto)", o->name, rtt);
    o->nstreams = n;
    o->session.spread = true;
    o->session.grow = grow;
}

/* Spread the session over --streams connections: the first is o->t, the
 * rest join it, and o->t becomes all of them (link/stripe.h). */
static int spread(struct output *o, double limit, struct weir_error *e)
{
    struct pipeline *p = o->p;
    int n = o->nstreams;
    struct transport conns[CODEC_STREAMS_MAX];
    for (int i = 0; i < n; i++)
        transport_none(&conns[i]);
    int rcs[CODEC_STREAMS_MAX];
    int rc = connection_join(o, limit, conns, 1, n, rcs, e);
    if (rc != STEP_OK) {
        for (int i = 1; i < n; i++) {
            struct weir_error ignored;
            transport_close(&conns[i], false, &o->halt, &ignored);
        }
        return rc;
    }
    conns[0] = o->t;
    if (stripe_out(&o->t, conns, n, io_timeout_ms(p, &conns[0]), &o->halt, e) != 0)
        return STEP_FAIL;
    o->t.wire_tx = &o->net;
    if (!o->session.grow)
        log_msg(p->log, LOG_INFO, "%s: the transfer goes over %d connections", o->name, n);
    grow_begin(o);
    return STEP_OK;
}

/* A greeted receiver: the keys, the handshake, what resuming needs, and
 * the back channel (at once, unless the session must be named first). */
static int meet_receiver(struct output *o, double limit, struct weir_error *e)
{
    struct pipeline *p = o->p;
    struct sender_terms k = output_terms(o);
    int rc = sender_meet(&o->session, &o->bc, &k, limit, io_timeout_ms(p, &o->t), e);
    if (rc == STEP_OK && o->session.resume && (o->session.peer_features & CODEC_FEATURE_RESUME))
        rc = keep_for_resuming(o, e);
    if (rc != STEP_OK)
        return rc;
    sync_lock(&p->lock);
    o->bc.last_heard = clock_now();
    sync_unlock(&p->lock);
    if (!o->may_resume && !o->session.spread && backchannel_start(&o->bc, e))
        return STEP_FAIL;
    return STEP_OK;
}

/* The stream's beginning: its header (noted for resuming), the session's
 * name from a receiver that may resume, the holes' plan, and the header
 * of the one LZ4 frame of a -z output that is not a weir stream. */
static int begin_stream(struct output *o, double limit, struct weir_error *e)
{
    struct pipeline *p = o->p;
    if (mark(o, MARK_HEADER, 0))
        return write_error(o, e, "write");
    if (session_begin(&o->session, io_timeout_ms(p, &o->t), &o->halt, e))
        return errno == ECANCELED ? STEP_STOP : STEP_FAIL;
    sync_lock(&p->lock);
    boundary_locked(o);   /* the data begins after the header */
    sync_unlock(&p->lock);
    if (o->may_resume || o->session.spread) {
        /* the receiver names the session as it admits the stream: known
         * before a byte of data goes, a break can always be resumed, and
         * the other connections of a spread one join it */
        int rc = sender_hear_name(&o->bc, limit, o->may_resume, e);
        if (rc == STEP_OK && o->session.spread)
            rc = spread(o, limit, e);
        if (rc != STEP_OK)
            return rc;
        if (backchannel_start(&o->bc, e))
            return STEP_FAIL;
    }
    plan_holes(o);
    if (p->encode && o->form == CODEC_FORM_FRAME) {
        /* the pieces follow; the end comes from the buffer's last slot */
        unsigned char hdr[CODEC_LZ4_HEADER_MAX];
        size_t n = codec_lz4_header(hdr, p->piece_max, p->sized, p->content_size);
        if (transport_write_all(&o->t, hdr, n, io_timeout_ms(p, &o->t), &o->halt))
            return errno == EPIPE && o->has_child ? consumer_quit(o, e)
                                                  : write_error(o, e, "write");
    }
    return STEP_OK;
}

int writer_open(struct output *o, bool once, struct weir_error *e)
{
    struct pipeline *p = o->p;
    const struct weir_config *c = p->cfg;
    bool tcp = o->spec->kind == WEIR_OUT_TCP;
    bool greet = tcp && !c->tcp.raw;
    int rc = tcp ? connect_output(o, once, e) : STEP_OK;
    if (rc != STEP_OK)
        return rc;
    if (c->watchdog > 0)
        transport_pace_writes(&o->t);   /* -W sees a slow pipe or disk take a block */
    uint32_t block_max = p->encode ? p->piece_max : p->wire_block_max;
    session_out_init(&o->session, &o->t, greet, greet && !p->encode,
                     p->encode && o->form == CODEC_FORM_WEIR, block_max);
    o->session.zstd = p->zstd;
    o->session.target = c->target;
    plan_resuming(o, greet, once);
    double limit = LISTENER_HANDSHAKE_SECS;
    if (c->tcp.io_timeout > 0 && c->tcp.io_timeout < limit)
        limit = c->tcp.io_timeout;
    if (greet && (rc = hear_receiver(o, limit, block_max, &greet, e)) != STEP_OK)
        return rc;
    if (greet)
        plan_streams(o);
    if (greet && (rc = meet_receiver(o, limit, e)) != STEP_OK)
        return rc;
    if ((rc = begin_stream(o, limit, e)) != STEP_OK)
        return rc;
    sync_lock(&p->lock);
    o->state = STATS_OUT_WRITING;
    sync_unlock(&p->lock);
    return STEP_OK;
}

/* ---- reconnecting ------------------------------------------------------------ */

/* Whether the connection broke under a session that may resume. */
bool connection_broke(struct output *o)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    bool broke = o->bc.resumable && o->bc.broken && !o->dead && !o->bc.answered &&
                 !atomic_load(&o->halt) && p->cfg->reconnect > 0;
    sync_unlock(&p->lock);
    return broke;
}

/* Let go of the broken connection: its back channel, the records the
 * workers sealed for it (under its keys, which go with it), the socket. */
void let_go(struct output *o)
{
    struct pipeline *p = o->p;
    grow_end(o);
    if (o->session.grow)
        o->nstreams = 1;   /* a session that grows begins again with one */
    /* a connection given up on is reset, not closed: a receiver that had
     * the whole stream must not take its end for the sender having the
     * answer (receiver_answer_home) */
    o->t.ops->abort(&o->t);
    backchannel_stop(&o->bc);
    sync_lock(&p->lock);
    for (;;) {
        bool sealing = false;
        for (unsigned i = 0; i < o->ahead_count; i++)
            sealing |= !o->ahead[(o->ahead_head + i) % SEAL_AHEAD].done;
        if (!sealing || atomic_load(&p->stop))
            break;
        sync_wait(&p->ring.data_cv, &p->lock);
    }
    o->ahead_head = o->ahead_count = 0;
    sync_unlock(&p->lock);
    struct weir_error ignored;
    transport_close(&o->t, false, &o->halt, &ignored);
    transport_none(&o->t);
}

/* ---- reconnecting (link/sender.h mends the break) ---------------------------- */

/* Dial where the receiver was: through the remote's redial (a pull
 * through ssh), or to the address it was reached at. */
static int redial(void *ctx, double limit, int *fd, struct weir_error *why)
{
    struct output *o = ctx;
    if (o->spec->redial)
        return o->spec->redial(o->spec->redial_ctx, limit, &o->halt, fd, why);
    return tcp_connect_addr((struct sockaddr *)&o->peer_addr, o->peer_len, limit,
                            o->p->cfg->tcp.io_timeout, &o->halt, fd);
}

/* A new connection of the session: the workers seal for its keys. */
static void adopt(void *ctx, int fd)
{
    struct output *o = ctx;
    transport_tcp(&o->t, fd, o->name);
    o->t.wire_tx = &o->net;
    sync_lock(&o->p->lock);
    o->tx_gen++;
    sync_unlock(&o->p->lock);
}

/* An attempt failed: its connection goes. */
static void drop(void *ctx)
{
    struct output *o = ctx;
    struct weir_error ignored;
    o->t.ops->abort(&o->t);
    transport_close(&o->t, false, &o->halt, &ignored);
    transport_none(&o->t);
}

/* The break begins: what it is known by, the output's state, and the
 * broken connection let go. */
static void break_begins(struct output *o, struct sender_break *b)
{
    struct pipeline *p = o->p;
    b->name = o->name;
    b->reconnect = p->cfg->reconnect;
    sync_lock(&p->lock);
    snprintf(b->cause, sizeof b->cause, "%s", o->bc.broken_why);
    b->confirmed = o->confirmed;
    b->since = clock_now();
    o->gap_since = b->since;
    o->state = STATS_OUT_CONNECTING;
    sync_unlock(&p->lock);
    log_msg(p->log, LOG_WARN, "%s: the connection broke (%s); reconnecting for up to %g s",
            o->name, b->cause, p->cfg->reconnect);
    let_go(o);
}

/* Mend the break (link/sender.h), and spread a spread session again: a
 * connection that fails while it joins (cut as the others were) breaks
 * the session again, and it is mended again within the same --reconnect.
 * STEP_OK with *at where the receiver stopped. */
static int mend(struct output *o, struct sender_break *b, uint64_t *at, struct weir_error *e)
{
    struct sender_terms k = output_terms(o);
    const struct sender_redial r = {.ctx = o, .dial = redial, .adopt = adopt, .drop = drop};
    for (;;) {
        int rc = sender_mend(&o->session, &o->bc, &k, &r, b, at, e);
        if (rc != STEP_OK || !o->session.spread)
            return rc;
        log_msg(o->p->log, LOG_WARN, "%s: reconnected after %.1f s; resuming at byte %llu of "
                "the stream once the other connections join", o->name, clock_now() - b->since,
                (unsigned long long)*at);
        rc = spread(o, LISTENER_HANDSHAKE_SECS, e);
        if (rc != STEP_FAIL || clock_now() >= b->since + b->reconnect)
            return rc;
        log_msg(o->p->log, LOG_WARN, "%s: %s; reconnecting again", o->name, e->msg);
        snprintf(b->cause, sizeof b->cause, "%.190s", e->msg);
        let_go(o);
    }
}

int reconnect(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    struct sender_break b;
    break_begins(o, &b);
    uint64_t at = 0;
    int rc = mend(o, &b, &at, e);
    if (rc == STEP_STOP)
        /* the stream failed (a producer, a signal) while the connection was
         * down: an abort record needs one, so the receiver is not told */
        log_msg(p->log, LOG_WARN, "%s: the stream stopped during a break: the receiver cannot "
                "be told, and fails only once its --reconnect has passed", o->name);
    sync_lock(&p->lock);
    o->gap_secs += clock_now() - b.since;
    o->gap_since = 0;
    if (rc == STEP_OK) {
        o->reconnections++;
        o->bc.broken = false;
        o->state = STATS_OUT_WRITING;
        o->bc.last_heard = clock_now();
    }
    sync_unlock(&p->lock);
    if (rc != STEP_OK)
        return rc;
    if (!o->session.spread)
        log_msg(p->log, LOG_WARN, "%s: reconnected after %.1f s; resuming at byte %llu of the "
                "stream", o->name, clock_now() - b.since, (unsigned long long)at);
    if (backchannel_start(&o->bc, e))
        return STEP_FAIL;
    return resume_at(o, at, e);
}
