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
    int tcp = 0;
    for (int i = 0; i < p->cfg->noutputs; i++)
        tcp += p->cfg->outputs[i].kind == WEIR_OUT_TCP;
    o->bc.several = tcp > 1;
}

/* What this sender asks of its receiver (link/sender.h). */
static struct sender_terms terms(const struct output *o)
{
    const struct pipeline *p = o->p;
    return (struct sender_terms){.keyed = p->keyed, .tls = p->tls_client,
                                 .epoch_records = p->cfg->epoch_records, .zstd = p->zstd,
                                 .target = p->cfg->target};
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

/* A --raw sender cannot know that its data arrived, but it can know that
 * it did not: a weir listener (which greets, then refuses plain bytes) or
 * a reset.  It reads until the peer closes, for a few seconds at most;
 * nc -l, socat and mbuffer close once they have read everything. */
int raw_confirm(struct output *o, struct weir_error *e)
{
    double deadline = clock_now() + RAW_CONFIRM_SECS;
    unsigned char buf[4096], head[4];
    size_t seen = 0, total = 0;
    for (;;) {
        double left = deadline - clock_now();
        if (left <= 0)
            return STEP_OK;   /* still open: nothing more to learn */
        ssize_t r = o->t.ops->read(&o->t, buf, sizeof buf, (int)(left * 1000) + 1, &o->halt);
        if (r == 0)
            return STEP_OK;
        if (r < 0 && errno == ETIMEDOUT)
            return STEP_OK;
        if (r < 0 && errno == ECANCELED)
            return STEP_STOP;
        if (r < 0 && errno == ECONNRESET)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer reset the connection: the "
                             "data may not all have arrived", o->t.name), STEP_FAIL;
        if (r < 0)
            return error_sys(e, WEIR_EXIT_NETWORK, errno, "%s", o->t.name), STEP_FAIL;
        for (ssize_t i = 0; i < r && seen < sizeof head; i++)
            head[seen++] = buf[i];
        total += (size_t)r;
        /* a weir that takes plain bytes as well (under the name mbuffer)
         * may have greeted after this sender stopped waiting, and then says
         * nothing more; anything after its greeting is a refusal */
        if (seen == sizeof head && codec_get32(head) == CODEC_WEIR_MAGIC && o->plain_fallback &&
            total > CODEC_GREETING_SIZE)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer is a weir listener that refused "
                             "the plain bytes (it greeted late): run it under the name mbuffer "
                             "or with --raw", o->t.name), STEP_FAIL;
        if (seen == sizeof head && codec_get32(head) == CODEC_WEIR_MAGIC && !o->plain_fallback)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer is a weir listener, which "
                             "takes plain bytes only with --raw: send without --raw",
                             o->t.name), STEP_FAIL;
    }
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

/* A greeted receiver: the keys, the handshake, what resuming needs, and
 * the back channel (at once, unless the session must be named first). */
static int meet_receiver(struct output *o, double limit, struct weir_error *e)
{
    struct pipeline *p = o->p;
    struct sender_terms k = terms(o);
    int rc = sender_meet(&o->session, &o->bc, &k, limit, io_timeout_ms(p, &o->t), e);
    if (rc == STEP_OK && o->session.resume && (o->session.peer_features & CODEC_FEATURE_RESUME))
        rc = keep_for_resuming(o, e);
    if (rc != STEP_OK)
        return rc;
    sync_lock(&p->lock);
    o->bc.last_heard = clock_now();
    sync_unlock(&p->lock);
    if (!o->may_resume && backchannel_start(&o->bc, e))
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
    if (o->may_resume) {
        /* the receiver names the session as it admits the stream: known
         * before a byte of data goes, a break can always be resumed */
        int rc = sender_hear_name(&o->bc, limit, e);
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
    /* a connection given up on is reset, not closed: a receiver that had
     * the whole stream must not take its end for the sender having the
     * answer (reader_answer_home) */
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

/* Sleep up to secs, or until this output must stop. */
static void pause_for(struct output *o, double secs)
{
    struct timespec deadline = clock_deadline(secs);
    sync_lock(&o->p->lock);
    while (!atomic_load(&o->halt) && sync_wait_until(&o->p->ring.data_cv, &o->p->lock,
                                                     &deadline)) {
    }
    sync_unlock(&o->p->lock);
}

/* The connection broke (a reset, a cut, --timeout, the receiver's
 * silence): connect again to where the receiver was, for up to
 * --reconnect seconds, and go on from where it stopped.  A refused
 * connection ends the wait at once: nothing listens there any more, so the
 * receiver and its session are gone. */
/* One break of the connection, while reconnect() mends it. */
struct break_state {
    char cause[200];            /* how it broke */
    uint64_t confirmed;         /* what the receiver had confirmed then */
    double since, deadline;
    char last[WEIR_ERROR_MAX];  /* why the last attempt failed */
};

#define TRY_AGAIN 4   /* an attempt failed in a way the next may not */

static void break_begins(struct output *o, struct break_state *b)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    snprintf(b->cause, sizeof b->cause, "%s", o->bc.broken_why);
    b->confirmed = o->confirmed;
    b->since = clock_now();
    o->gap_since = b->since;
    o->state = STATS_OUT_CONNECTING;
    sync_unlock(&p->lock);
    b->deadline = b->since + p->cfg->reconnect;
    b->last[0] = '\0';
    log_msg(p->log, LOG_WARN, "%s: the connection broke (%s); reconnecting for up to %g s",
            o->name, b->cause, p->cfg->reconnect);
    let_go(o);
}

/* Dial where the receiver was: STEP_OK with *fd, STEP_STOP, STEP_FAIL
 * with *e (nothing listens there: the receiver is gone), or TRY_AGAIN. */
static int dial_again(struct output *o, struct break_state *b, double limit, int *fd,
                      struct weir_error *e)
{
    struct weir_error dial;
    dial.msg[0] = '\0';
    int dialled = o->spec->redial
                      ? o->spec->redial(o->spec->redial_ctx, limit, &o->halt, fd, &dial)
                      : tcp_connect_addr((struct sockaddr *)&o->peer_addr, o->peer_len, limit,
                                         o->p->cfg->tcp.io_timeout, &o->halt, fd);
    if (dialled == 0)
        return STEP_OK;
    int err = errno;
    if (err == ECANCELED)
        return STEP_STOP;
    if (err == ECONNREFUSED) {
        bool all = o->bc.ended && b->confirmed >= o->session.sent;
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and the "
                         "receiver refuses a new one: it is gone; it had confirmed %llu bytes "
                         "of the stream%s", o->name, b->cause, (unsigned long long)b->confirmed,
                         all ? " (all of it, but its answer was lost)" : ""), STEP_FAIL;
    }
    if (dial.msg[0])
        snprintf(b->last, sizeof b->last, "%s", dial.msg);
    else
        snprintf(b->last, sizeof b->last, "connect: %s", strerror(err));
    return TRY_AGAIN;
}

/* On the new connection fd, take the session up again: STEP_OK with *at,
 * STEP_STOP, STEP_FAIL with *e (it cannot resume), or TRY_AGAIN. */
static int rejoin_on(struct output *o, struct break_state *b, int fd, double limit,
                     uint64_t *at, struct weir_error *e)
{
    struct pipeline *p = o->p;
    transport_tcp(&o->t, fd, o->name);
    o->t.wire_tx = &o->net;
    sync_lock(&p->lock);
    o->tx_gen++;   /* the workers seal for the new connection's keys */
    sync_unlock(&p->lock);
    bool refused;
    struct weir_error why;
    struct sender_terms k = terms(o);
    int rc = sender_rejoin(&o->session, &o->bc, &k, limit, at, &refused, &why);
    if (rc == STEP_OK)
        return STEP_OK;
    struct weir_error ignored;
    o->t.ops->abort(&o->t);
    transport_close(&o->t, false, &o->halt, &ignored);
    transport_none(&o->t);
    if (rc == STEP_STOP)
        return STEP_STOP;
    if (refused)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and the "
                         "session could not resume: %s", o->name, b->cause, why.msg), STEP_FAIL;
    snprintf(b->last, sizeof b->last, "%s", why.msg);
    return TRY_AGAIN;
}

/* Attempts until one takes the session up again, the break outlasts
 * --reconnect, or the output must stop. */
static int mend(struct output *o, struct break_state *b, uint64_t *at, struct weir_error *e)
{
    double backoff = 0.05;
    for (;;) {
        if (atomic_load(&o->halt))
            return STEP_STOP;
        double left = b->deadline - clock_now();
        if (left <= 0)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and no "
                             "new one could be made within %g s%s%s; the receiver had "
                             "confirmed %llu bytes of the stream", o->name, b->cause,
                             o->p->cfg->reconnect, b->last[0] ? ": " : "", b->last,
                             (unsigned long long)b->confirmed), STEP_FAIL;
        double limit = left < LISTENER_HANDSHAKE_SECS ? left : LISTENER_HANDSHAKE_SECS;
        int fd;
        int rc = dial_again(o, b, limit, &fd, e);
        if (rc == STEP_OK)
            rc = rejoin_on(o, b, fd, limit, at, e);
        if (rc != TRY_AGAIN)
            return rc;
        pause_for(o, backoff);
        backoff = backoff * 2 > RESUME_BACKOFF_MAX ? RESUME_BACKOFF_MAX : backoff * 2;
    }
}

int reconnect(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    struct break_state b;
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
    log_msg(p->log, LOG_WARN, "%s: reconnected after %.1f s; resuming at byte %llu of the "
            "stream", o->name, clock_now() - b.since, (unsigned long long)at);
    if (backchannel_start(&o->bc, e))
        return STEP_FAIL;
    return resume_at(o, at, e);
}
