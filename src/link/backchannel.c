/*
 * backchannel.c - a weir sender's ear: the receiver's keepalives,
 * confirmations and answer, and the end of a sending session.  See
 * backchannel.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "base/io.h"
#include "base/sync.h"
#include "link/backchannel.h"
#include "link/stripe.h"

bool backchannel_breaks(int err)
{
    return err == EPIPE || err == ECONNRESET || err == ETIMEDOUT || err == ENOTCONN ||
           err == ECONNABORTED || err == EHOSTUNREACH || err == ENETUNREACH ||
           err == ENETDOWN || err == EHOSTDOWN;
}

void backchannel_broke_locked(struct backchannel *b, const char *why)
{
    if (b->broken)
        return;
    b->broken = true;
    snprintf(b->broken_why, sizeof b->broken_why, "%s", why);
}

static int map_receiver_status(int code)
{
    /* its output failing or the data arriving corrupt keep their meaning;
     * anything else is, from here, a failure of the far end */
    return code == WEIR_EXIT_OUTPUT || code == WEIR_EXIT_INTEGRITY ? code : WEIR_EXIT_NETWORK;
}

int backchannel_refused(const struct backchannel *b, int code, const char *msg,
                        struct weir_error *e)
{
    const char *name = b->t->name;
    const char *who = strncmp(name, "output ", 7) == 0 ? name + 7 : name;
    if (b->several)
        error_set(e, map_receiver_status(code), "receiver %s: %s", who, msg);
    else
        error_set(e, map_receiver_status(code), "receiver: %s", msg);
    return STEP_FAIL;
}

/* The answer, kept (lock held). */
static void keep_answer_locked(struct backchannel *b, const struct codec_record *r)
{
    b->code = r->code;
    b->bytes = r->bytes;
    b->chain = r->chain;
    snprintf(b->msg, sizeof b->msg, "%s", r->msg);
    b->answered = true;
    sync_broadcast(b->own.cv);
}

/* Take in one record from the receiver; STEP_OK to read on. */
static int heard(struct backchannel *b, const struct codec_record *r, struct weir_error *e)
{
    sync_lock(b->own.lock);
    b->last_heard = clock_now();
    bool session_record = r->type == 'C' && b->resumable;
    bool early = r->type == 'S' && r->code == 0 && !b->ended;
    if (session_record) {
        b->own.on_confirmed(b->own.ctx, r->bytes);
    } else if (r->type == 'K') {
        /* a receiver that can resume names the session before anything else */
        if (!b->resumable)
            b->own.on_unnamed(b->own.ctx);
        b->peer_written = r->bytes;
        b->peer_phase = r->phase;
    } else if (r->type == 'S' && !early) {
        keep_answer_locked(b, r);
    }
    sync_unlock(b->own.lock);
    if (r->type == 'K' || session_record)
        return STEP_OK;
    if (early)   /* success before the trailer was sent cannot be true */
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver answered success before the "
                         "stream ended", b->t->name), STEP_FAIL;
    if (r->type != 'S')
        return error_set(e, WEIR_EXIT_NETWORK, "%s: unexpected '%c' record from the receiver",
                         b->t->name, r->type), STEP_FAIL;
    if (r->code != 0)
        return backchannel_refused(b, r->code, r->msg, e);
    return STEP_STOP;   /* the answer is in: nothing more to read */
}

/* A read that failed under a session that may resume: the connection
 * broke (true), or the back channel itself failed. */
static bool lost(struct backchannel *b, bool resumable, bool eof, size_t got, int err)
{
    if (!resumable || atomic_load(b->halt) || !(eof || (got < 8 && backchannel_breaks(err))))
        return false;
    char why[160];
    sync_lock(b->own.lock);
    if (eof)
        snprintf(why, sizeof why, "the receiver's end closed it");
    else if (err == ETIMEDOUT)   /* the same words as the wait for the answer: either may see it first */
        snprintf(why, sizeof why, "the receiver said nothing for %g s%s", b->silence,
                 b->ended ? " after the stream's end" : "");
    else
        snprintf(why, sizeof why, "%s", strerror(err));
    backchannel_broke_locked(b, why);
    sync_unlock(b->own.lock);
    return true;
}

/* Read records until one ends the reading: STEP_STOP (the answer, or
 * stopping) or STEP_FAIL with *e; *broke: the connection broke under a
 * session that may resume. */
static int hear_all(struct backchannel *b, bool *broke, struct weir_error *e)
{
    int rc;
    *broke = false;
    do {
        unsigned char raw[CODEC_RECORD_MAX];
        struct codec_record r;
        size_t got;
        bool eof;
        sync_lock(b->own.lock);
        bool resumable = b->resumable;
        sync_unlock(b->own.lock);
        /* a receiver that may resume keeps talking; its silence is a break */
        int limit = resumable ? (int)(b->silence * 1000) : -1;
        if (session_read_record(b->t, limit, b->halt, &r, raw, &got, &eof, e) == 0) {
            rc = heard(b, &r, e);
            continue;
        }
        rc = STEP_FAIL;
        *broke = lost(b, resumable, eof, got, errno);
    } while (rc == STEP_OK);
    return rc;
}

static void *backchannel_main(void *arg)
{
    struct backchannel *b = arg;
    struct weir_error e;
    b->own.on_thread();
    bool broke;
    int rc = hear_all(b, &broke, &e);
    sync_lock(b->own.lock);
    bool answered = b->answered;
    bool success = answered && b->code == 0;
    sync_unlock(b->own.lock);
    if (rc == STEP_FAIL && atomic_load(b->halt) && !answered)
        rc = STEP_STOP;   /* this side is stopping anyway */
    if (broke) {
        shutdown(b->t->fd, SHUT_RDWR);   /* wakes the writer, which reconnects */
    } else if (rc == STEP_FAIL && !success) {
        b->own.on_failure(b->own.ctx, &e);
        shutdown(b->t->fd, SHUT_RDWR);   /* wakes the writer out of send() */
    }
    sync_lock(b->own.lock);
    b->running = false;
    sync_broadcast(b->own.cv);
    sync_unlock(b->own.lock);
    return NULL;
}

/* Created under the lock: the owner wakes a running back channel by its
 * thread id, which must be the new thread's from the moment `running` says
 * so (set first, a signal in between went to an id not yet written). */
int backchannel_start(struct backchannel *b, struct weir_error *e)
{
    sync_lock(b->own.lock);
    b->running = true;
    int rc = sync_create(&b->thread, backchannel_main, b, e);
    if (rc)
        b->running = false;
    sync_unlock(b->own.lock);
    if (rc)
        return STEP_FAIL;
    b->joinable = true;
    return STEP_OK;
}

void backchannel_stop(struct backchannel *b)
{
    if (!b->joinable)
        return;
    if (b->t->fd >= 0)
        shutdown(b->t->fd, SHUT_RD);   /* wakes the back channel, sends nothing */
    sync_join(b->thread);
    b->joinable = false;
}

void backchannel_finish(struct backchannel *b, bool told)
{
    if (!b->joinable)
        return;
    if (told) {
        struct timespec deadline = clock_deadline(SESSION_ABORT_SECS);
        sync_lock(b->own.lock);
        while (b->running && sync_wait_until(b->own.cv, b->own.lock, &deadline)) {
        }
        sync_unlock(b->own.lock);
    }
    sync_lock(b->own.lock);
    bool reading = b->running;
    sync_unlock(b->own.lock);
    if (b->t->fd >= 0 && (reading || !told))
        shutdown(b->t->fd, SHUT_RDWR);   /* ends the back channel's read */
    sync_join(b->thread);
    b->joinable = false;
    if (told && !reading && b->t->fd >= 0)
        io_drain(b->t->fd, SESSION_ABORT_SECS);
}

bool backchannel_says_read(const struct backchannel *b, const struct session_out *s)
{
    return (s->peer_features & CODEC_FEATURE_ANSWER_READ) && b->resumable;
}

/* Tell a receiver that waits for it that its answer was read, then end
 * this direction: the 'D' is its last record.  A 'D' that cannot go leaves
 * the receiver waiting for this sender to come back, as for an answer
 * lost; this end's verdict stands either way. */
static void say_read(struct backchannel *b, const struct session_out *s, int timeout_ms)
{
    if (!backchannel_says_read(b, s))
        return;
    unsigned char d[CODEC_SESSION_SIZE];
    size_t n = codec_done(d, b->bytes, b->chain);
    struct weir_error ignored;
    /* spread, the 'D' goes where the receiver reads it: on the first
     * connection, after every chunk (stripe.h) */
    if (stripe_last_record(b->t, d, n, timeout_ms, b->halt) == 0)
        (void)b->t->ops->half_close(b->t, &ignored);
}

/* Wait (lock held) until the answer is in, the output is dead or must
 * stop, the thread ended, or the receiver is silent for limit seconds (0:
 * for ever); true when it fell silent. */
static bool wait_locked(struct backchannel *b, double limit, const bool *dead)
{
    while (!b->answered && !*dead && !atomic_load(b->halt) && b->running) {
        if (limit <= 0) {
            sync_wait(b->own.cv, b->own.lock);
            continue;
        }
        double left = b->last_heard + limit - clock_now();
        if (left <= 0)
            return true;
        struct timespec deadline = clock_deadline(left);
        sync_wait_until(b->own.cv, b->own.lock, &deadline);
    }
    return false;
}

/* What the wait ended with; lock held. */
static bool waited_locked(struct backchannel *b, const struct session_out *s, double limit,
                          const bool *dead, bool *awaiting)
{
    *awaiting = true;
    if (!(s->peer_features & CODEC_FEATURE_KEEPALIVE))
        b->last_heard = clock_now();   /* a receiver without keepalives: bound the wait */
    bool timed_out = wait_locked(b, limit, dead);
    *awaiting = false;
    if (timed_out && !b->answered && b->resumable && !b->broken) {
        /* a receiver that may resume keeps talking: its silence is a
         * break (a black hole that swallowed the end of the stream), as the
         * back channel takes it, not its answer lost */
        char why[160];
        snprintf(why, sizeof why, "the receiver said nothing for %g s after the stream's end",
                 limit);
        backchannel_broke_locked(b, why);
    }
    return timed_out;
}

int backchannel_await(struct backchannel *b, struct session_out *s, double limit,
                      const bool *dead, bool *awaiting, int timeout_ms, struct weir_error *e)
{
    sync_lock(b->own.lock);
    bool timed_out = waited_locked(b, s, limit, dead, awaiting);
    bool received = b->answered, broken = b->broken;
    sync_unlock(b->own.lock);
    if (received)
        say_read(b, s, timeout_ms);
    if (!received && broken)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke before the receiver "
                         "answered (%s)", b->t->name, b->broken_why), STEP_FAIL;
    if (received && b->code != 0)
        return backchannel_refused(b, b->code, b->msg, e);
    if (!received && timed_out)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver fell silent for %g s "
                         "before it answered", b->t->name, limit), STEP_FAIL;
    if (!received)
        return STEP_STOP;   /* stopping, or the back channel has reported the failure */
    return STEP_OK;
}

int backchannel_check(const struct backchannel *b, uint64_t sent, uint64_t chain,
                      struct weir_error *e)
{
    /* the chain binds the answer to this stream: a receiver that did not
     * verify it (or an answer sent before it arrived) cannot know it */
    if (b->chain != chain)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver's answer is for another "
                         "stream (its chain differs)", b->t->name), STEP_FAIL;
    if (b->bytes != sent)
        return error_set(e, WEIR_EXIT_NETWORK,
                         "%s: the receiver confirmed %llu bytes, but %llu were sent",
                         b->t->name, (unsigned long long)b->bytes, (unsigned long long)sent),
               STEP_FAIL;
    return STEP_OK;
}
