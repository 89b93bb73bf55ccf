/*
 * sender.c - a weir sender meets its receiver: the terms, the keyed
 * greeting and handshake, the session's name, and rejoining the session
 * after a break.  See sender.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/sync.h"
#include "link/listener.h"
#include "link/sender.h"

int sender_agree(const struct session_out *s, const struct sender_terms *k,
                 struct weir_error *e)
{
    const char *name = s->t->name;
    bool theirs = s->peer_features & CODEC_FEATURE_KEY;
    if (k->keyed && !theirs)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver has no key: refusing to send "
                         "in clear (give it --key-file as well)", name), STEP_FAIL;
    if (!k->keyed && theirs)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver takes only encrypted "
                         "connections: give this weir its key (--key-file)", name), STEP_FAIL;
    if (codec_keyed_older(s->peer_features))
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver has a key, but "
                         CODEC_OLDER_KEYED, name), STEP_FAIL;
    if (k->zstd && !(s->peer_features & CODEC_FEATURE_ZSTD))
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver (an older weir) reads no "
                         "zstd streams: upgrade it, or send with -z", name), STEP_FAIL;
    if (k->target && !(s->peer_features & CODEC_FEATURE_SERVE))
        return error_set(e, WEIR_EXIT_NETWORK, "%s: --target %s: the receiver is not a "
                         "service (weir --serve), so it has no targets", name, k->target),
               STEP_FAIL;
    return STEP_OK;
}

/* The sender's half of the TLS handshake, by a deadline; then the
 * connection carries sealed records. */
static int shake(struct session_out *s, const struct backchannel *b,
                 const struct sender_terms *k, double limit, struct weir_error *e)
{
    return session_handshake(s->t, k->tls, limit, k->epoch_records, b->halt, NULL, NULL, 0, e);
}

int sender_meet(struct session_out *s, const struct backchannel *b,
                const struct sender_terms *k, double limit, int timeout_ms,
                struct weir_error *e)
{
    int rc = sender_agree(s, k, e);
    if (rc != STEP_OK || !k->keyed)
        return rc;
    if (session_greet_keyed(s, timeout_ms, b->halt, e))
        return errno == ECANCELED ? STEP_STOP : STEP_FAIL;
    return shake(s, b, k, limit, e);
}

/* Why the name did not come: a failed read (errno, eof, got). */
static int no_name(const struct backchannel *b, double limit, bool eof, size_t got,
                   struct weir_error *e)
{
    if (atomic_load(b->halt))
        return STEP_STOP;
    if (errno == ETIMEDOUT)
        error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver did not name the session within "
                  "%g s of the stream's header (a break this early cannot be resumed)",
                  b->t->name, limit);
    else if (!eof && got == 0 && backchannel_breaks(errno))
        error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke before the receiver "
                  "named the session (%s; a break this early cannot be resumed)", b->t->name,
                  strerror(errno));
    return STEP_FAIL;
}

int sender_hear_name(struct backchannel *b, double limit, bool resumable, struct weir_error *e)
{
    unsigned char raw[CODEC_RECORD_MAX];
    struct codec_record r;
    size_t got;
    bool eof;
    if (session_read_record(b->t, (int)(limit * 1000) + 1, b->halt, &r, raw, &got, &eof, e))
        return no_name(b, limit, eof, got, e);
    if (r.type == 'S' && r.code != 0)
        return backchannel_refused(b, r.code, r.msg, e);
    if (r.type != 'N')
        return error_set(e, WEIR_EXIT_NETWORK, "%s: unexpected '%c' record from the receiver "
                         "(it did not name the session)", b->t->name, r.type), STEP_FAIL;
    sync_lock(b->own.lock);
    memcpy(b->token, r.token, sizeof b->token);
    b->route = r.route;
    b->resumable = resumable;
    sync_unlock(b->own.lock);
    OPENSSL_cleanse(raw, sizeof raw);
    OPENSSL_cleanse(&r, sizeof r);
    return STEP_OK;
}

/* Our half of a rejoining connection's greeting: with a key the keyed
 * greeting (with the service's route) and the handshake; *refused when
 * the receiver said no in clear. */
static int greet_again(struct session_out *s, struct backchannel *b,
                       const struct sender_terms *k, double limit, bool *refused,
                       struct weir_error *e)
{
    int ms = (int)(limit * 1000) + 1;
    if (!k->keyed) {
        unsigned char g[CODEC_GREETING_SIZE];
        codec_greeting(g, CODEC_ROLE_SENDER, session_features(s) | CODEC_FEATURE_RESUME);
        if (transport_write_all(s->t, g, sizeof g, ms, b->halt))
            return errno == ECANCELED ? STEP_STOP
                   : (error_sys(e, WEIR_EXIT_NETWORK, errno, "%s: write", s->t->name), STEP_FAIL);
        return STEP_OK;
    }
    sync_lock(b->own.lock);
    s->route = b->route;   /* a service hands it to the session's process */
    sync_unlock(b->own.lock);
    if (session_greet_keyed(s, ms, b->halt, e))
        return errno == ECANCELED ? STEP_STOP : STEP_FAIL;
    int rc = shake(s, b, k, limit, e);
    *refused = rc == STEP_FAIL && errno == ECONNREFUSED;   /* told, in clear */
    return rc;
}

/* The session's token, as the receiver named it (the caller wipes it). */
static void session_token(const struct backchannel *b, unsigned char token[CODEC_TOKEN_SIZE])
{
    sync_lock(b->own.lock);
    memcpy(token, b->token, CODEC_TOKEN_SIZE);
    sync_unlock(b->own.lock);
}

int sender_rejoin(struct session_out *s, struct backchannel *b, const struct sender_terms *k,
                  double limit, uint64_t *at, bool *refused, struct weir_error *e)
{
    *refused = false;
    s->greeted = false;
    s->rejoining = true;
    if (session_read_greeting(s, limit, b->halt, e))
        return atomic_load(b->halt) ? STEP_STOP : STEP_FAIL;   /* busy: tried again */
    if (!(s->peer_features & CODEC_FEATURE_RESUME)) {
        *refused = true;
        return error_set(e, WEIR_EXIT_NETWORK, "%s: another receiver answers there now (it "
                         "does not resume)", s->t->name), STEP_FAIL;
    }
    if (sender_agree(s, k, e) != STEP_OK) {
        *refused = true;   /* e says how its terms differ: another receiver too */
        return STEP_FAIL;
    }
    int rc = greet_again(s, b, k, limit, refused, e);
    if (rc != STEP_OK)
        return rc;
    unsigned char token[CODEC_TOKEN_SIZE];
    session_token(b, token);
    rc = session_rejoin(s, token, limit, b->halt, at, refused, e);
    OPENSSL_cleanse(token, sizeof token);
    if (rc && *refused && strstr(e->msg, LISTENER_BUSY))
        *refused = false;   /* it had not seen the break yet: try again */
    if (rc)
        return errno == ECANCELED && atomic_load(b->halt) ? STEP_STOP : STEP_FAIL;
    return STEP_OK;
}

/* Whether the receiver that greeted is one a connection can join. */
static int joinable(const struct session_out *s, const struct sender_terms *k,
                    struct weir_error *e)
{
    if (!(s->peer_features & CODEC_FEATURE_STREAMS))
        return error_set(e, WEIR_EXIT_NETWORK, "%s: another receiver answers there now (it "
                         "takes no connection into a transfer)", s->t->name), STEP_FAIL;
    return sender_agree(s, k, e);
}

/* How a step of a join failed: stopped, or failed with *e. */
static int join_failed(const struct backchannel *b)
{
    return atomic_load(b->halt) ? STEP_STOP : STEP_FAIL;
}

/* Without a key: the greeting and the 'J' go out as soon as the connection
 * is made, before the receiver's greeting is read, which saves a round
 * trip a join.  The token crosses in clear either way, and what answers is
 * the receiver: its listening socket holds the address while a spread
 * transfer gathers or grows. */
static int join_in_clear(struct session_out *s, const struct backchannel *b,
                         const struct sender_terms *k, const unsigned char *token,
                         unsigned index, unsigned count, double limit, struct weir_error *e)
{
    unsigned char g[CODEC_GREETING_SIZE];
    codec_greeting(g, CODEC_ROLE_SENDER, session_features(s));
    if (transport_write_all(s->t, g, sizeof g, (int)(limit * 1000) + 1, b->halt)) {
        if (errno != ECANCELED)
            error_sys(e, WEIR_EXIT_NETWORK, errno, "%s: write", s->t->name);
        return join_failed(b);
    }
    if (session_join_ask(s, token, index, count, limit, b->halt, e) ||
        session_read_greeting(s, limit, b->halt, e))
        return join_failed(b);
    int rc = joinable(s, k, e);
    bool refused;
    if (rc == STEP_OK && session_join_answer(s, token, index, count, limit, b->halt, &refused, e))
        return join_failed(b);
    return rc;
}

/* With a key: the receiver's greeting, the keyed handshake, then the 'J'
 * sealed. */
static int join_keyed(struct session_out *s, const struct backchannel *b,
                      const struct sender_terms *k, const unsigned char *token, unsigned index,
                      unsigned count, double limit, struct weir_error *e)
{
    if (session_read_greeting(s, limit, b->halt, e))
        return atomic_load(b->halt) ? STEP_STOP : STEP_FAIL;
    int rc = joinable(s, k, e);
    if (rc != STEP_OK)
        return rc;
    sync_lock(b->own.lock);
    s->route = b->route;   /* a service hands it to the session's process */
    sync_unlock(b->own.lock);
    if (session_greet_keyed(s, (int)(limit * 1000) + 1, b->halt, e))
        return errno == ECANCELED ? STEP_STOP : STEP_FAIL;
    if ((rc = shake(s, b, k, limit, e)) != STEP_OK)
        return rc;
    bool refused;
    if (session_join_ask(s, token, index, count, limit, b->halt, e) ||
        session_join_answer(s, token, index, count, limit, b->halt, &refused, e))
        return join_failed(b);
    return STEP_OK;
}

int sender_join(struct session_out *s, const struct backchannel *b,
                const struct sender_terms *k, unsigned index, unsigned count, double limit,
                struct weir_error *e)
{
    s->greeted = false;
    s->rejoining = true;   /* the peer was a weir: no hint at --raw */
    unsigned char token[CODEC_TOKEN_SIZE];
    session_token(b, token);
    int rc = k->keyed ? join_keyed(s, b, k, token, index, count, limit, e)
                      : join_in_clear(s, b, k, token, index, count, limit, e);
    OPENSSL_cleanse(token, sizeof token);
    return rc;
}

/* ---- mending a break ---------------------------------------------------------- */

#define TRY_AGAIN 4   /* an attempt failed in a way the next may not */

/* Dial where the receiver was: STEP_OK with *fd, STEP_STOP, STEP_FAIL
 * with *e (nothing listens there: the receiver is gone), or TRY_AGAIN. */
static int dial_again(const struct session_out *s, const struct backchannel *b,
                      const struct sender_redial *r, struct sender_break *br, double limit,
                      int *fd, struct weir_error *e)
{
    struct weir_error dial;
    dial.msg[0] = '\0';
    if (r->dial(r->ctx, limit, fd, &dial) == 0)
        return STEP_OK;
    int err = errno;
    if (err == ECANCELED)
        return STEP_STOP;
    if (err == ECONNREFUSED) {
        bool all = b->ended && br->confirmed >= s->sent;
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and the "
                         "receiver refuses a new one: it is gone; it had confirmed %llu bytes "
                         "of the stream%s", br->name, br->cause,
                         (unsigned long long)br->confirmed,
                         all ? " (all of it, but its answer was lost)" : ""), STEP_FAIL;
    }
    if (dial.msg[0])
        snprintf(br->last, sizeof br->last, "%s", dial.msg);
    else
        snprintf(br->last, sizeof br->last, "connect: %s", strerror(err));
    return TRY_AGAIN;
}

/* On the new connection fd, take the session up again: STEP_OK with *at,
 * STEP_STOP, STEP_FAIL with *e (it cannot resume), or TRY_AGAIN. */
static int rejoin_on(struct session_out *s, struct backchannel *b, const struct sender_terms *k,
                     const struct sender_redial *r, struct sender_break *br, int fd,
                     double limit, uint64_t *at, struct weir_error *e)
{
    r->adopt(r->ctx, fd);
    bool refused;
    struct weir_error why;
    int rc = sender_rejoin(s, b, k, limit, at, &refused, &why);
    if (rc == STEP_OK)
        return STEP_OK;
    r->drop(r->ctx);
    if (rc == STEP_STOP)
        return STEP_STOP;
    if (refused)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and the "
                         "session could not resume: %s", br->name, br->cause, why.msg),
               STEP_FAIL;
    snprintf(br->last, sizeof br->last, "%s", why.msg);
    return TRY_AGAIN;
}

/* Sleep up to secs, or until the output must stop. */
static void pause_for(const struct backchannel *b, double secs)
{
    struct timespec deadline = clock_deadline(secs);
    sync_lock(b->own.lock);
    while (!atomic_load(b->halt) && sync_wait_until(b->own.cv, b->own.lock, &deadline)) {
    }
    sync_unlock(b->own.lock);
}

int sender_mend(struct session_out *s, struct backchannel *b, const struct sender_terms *k,
                const struct sender_redial *r, struct sender_break *br, uint64_t *at,
                struct weir_error *e)
{
    double backoff = 0.05, deadline = br->since + br->reconnect;
    br->last[0] = '\0';
    for (;;) {
        if (atomic_load(b->halt))
            return STEP_STOP;
        double left = deadline - clock_now();
        if (left <= 0)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and no "
                             "new one could be made within %g s%s%s; the receiver had "
                             "confirmed %llu bytes of the stream", br->name, br->cause,
                             br->reconnect, br->last[0] ? ": " : "", br->last,
                             (unsigned long long)br->confirmed), STEP_FAIL;
        double limit = left < LISTENER_HANDSHAKE_SECS ? left : LISTENER_HANDSHAKE_SECS;
        int fd;
        int rc = dial_again(s, b, r, br, limit, &fd, e);
        if (rc == STEP_OK)
            rc = rejoin_on(s, b, k, r, br, fd, limit, at, e);
        if (rc != TRY_AGAIN)
            return rc;
        pause_for(b, backoff);
        backoff = backoff * 2 > SENDER_BACKOFF_MAX ? SENDER_BACKOFF_MAX : backoff * 2;
    }
}

/* ---- a --raw sender ------------------------------------------------------------ */

int sender_raw_confirm(struct transport *t, atomic_bool *halt, bool fallback,
                       struct weir_error *e)
{
    double deadline = clock_now() + RAW_CONFIRM_SECS;
    unsigned char buf[4096], head[4];
    size_t seen = 0, total = 0;
    for (;;) {
        double left = deadline - clock_now();
        if (left <= 0)
            return STEP_OK;   /* still open: nothing more to learn */
        ssize_t r = t->ops->read(t, buf, sizeof buf, (int)(left * 1000) + 1, halt);
        if (r == 0)
            return STEP_OK;
        if (r < 0 && errno == ETIMEDOUT)
            return STEP_OK;
        if (r < 0 && errno == ECANCELED)
            return STEP_STOP;
        if (r < 0 && errno == ECONNRESET)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer reset the connection: the "
                             "data may not all have arrived", t->name), STEP_FAIL;
        if (r < 0)
            return error_sys(e, WEIR_EXIT_NETWORK, errno, "%s", t->name), STEP_FAIL;
        for (ssize_t i = 0; i < r && seen < sizeof head; i++)
            head[seen++] = buf[i];
        total += (size_t)r;
        /* a weir that takes plain bytes as well (under the name mbuffer)
         * may have greeted after this sender stopped waiting, and then says
         * nothing more; anything after its greeting is a refusal */
        if (seen == sizeof head && codec_get32(head) == CODEC_WEIR_MAGIC && fallback &&
            total > CODEC_GREETING_SIZE)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer is a weir listener that refused "
                             "the plain bytes (it greeted late): run it under the name mbuffer "
                             "or with --raw", t->name), STEP_FAIL;
        if (seen == sizeof head && codec_get32(head) == CODEC_WEIR_MAGIC && !fallback)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer is a weir listener, which "
                             "takes plain bytes only with --raw: send without --raw",
                             t->name), STEP_FAIL;
    }
}
