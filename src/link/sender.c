/*
 * sender.c - a weir sender meets its receiver: the terms, the keyed
 * greeting and handshake, the session's name, and rejoining the session
 * after a break.  See sender.h.
 */
#include <errno.h>
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

int sender_hear_name(struct backchannel *b, double limit, struct weir_error *e)
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
    b->resumable = true;
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
        codec_greeting(g, CODEC_ROLE_SENDER, CODEC_FEATURES | CODEC_FEATURE_RESUME);
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
    sync_lock(b->own.lock);
    memcpy(token, b->token, sizeof token);
    sync_unlock(b->own.lock);
    rc = session_rejoin(s, token, limit, b->halt, at, refused, e);
    OPENSSL_cleanse(token, sizeof token);
    if (rc && *refused && strstr(e->msg, LISTENER_BUSY))
        *refused = false;   /* it had not seen the break yet: try again */
    if (rc)
        return errno == ECANCELED && atomic_load(b->halt) ? STEP_STOP : STEP_FAIL;
    return STEP_OK;
}
