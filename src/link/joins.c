/*
 * joins.c - connections that join a spread transfer while it runs, taken
 * on a thread of their own.  See joins.h.
 */
#include "link/joins.h"

#include <errno.h>
#include <string.h>

#include "base/sync.h"
#include "link/stripe.h"

void receiver_join_config(struct receiver *r, struct listener_config *cfg)
{
    *cfg = r->own.cfg;
    cfg->channel_fd = -1;
    cfg->tests = NULL;
    cfg->join_token = r->token;
    cfg->join_identity = cfg->tls ? r->identity : NULL;
    sync_lock(r->own.lock);
    cfg->resume_token = r->resumable ? r->token : NULL;
    sync_unlock(r->own.lock);
    cfg->resume_identity = cfg->join_identity;
    cfg->plain_too = false;   /* a joiner greets: plain bytes are a stranger's */
}

/* A connection that joined: one more of the stripe, its bytes counted. */
static void place(void *ctx, struct transport *t)
{
    struct receiver *r = ctx;
    struct weir_error e;
    atomic_fetch_add(r->own.wire_rx, t->wire_before);
    t->wire_rx = r->own.wire_rx;
    char name[sizeof t->name];
    snprintf(name, sizeof name, "%s", t->name);
    /* the input does not change while this thread runs (it is stopped
     * first); the stripe's lock is never held with the owner's */
    int rc = stripe_add(r->own.in, t, &e);
    int n = stripe_count(r->own.in);
    sync_lock(r->own.lock);
    if (rc == 0)
        *r->own.streams = (unsigned)n;
    sync_unlock(r->own.lock);
    if (rc == 0)
        log_msg(r->own.log, LOG_INFO, "%s joined the transfer while it runs: %d connections",
                name, n);
    else
        log_msg(r->own.log, LOG_WARN, "refused connection %s: %s", name, e.msg);
}

/* Whether the transfer can take a connection more, asked before the join
 * is answered, so that one it cannot take is told why. */
static const char *room(void *ctx)
{
    struct receiver *r = ctx;
    return stripe_room(r->own.in);
}

static void *joins_main(void *arg)
{
    struct receiver *r = arg;
    struct weir_error e;
    struct listener_admitted *got = &r->returned;
    int rc = listener_join_late(&r->listener, &r->joins_cfg, &r->joins_stop, r->own.log, room,
                                place, r, got, &e);
    if (rc == 1) {
        sync_lock(r->own.lock);
        r->has_returned = true;   /* receiver_readmit takes it */
        sync_unlock(r->own.lock);
        log_msg(r->own.log, LOG_WARN, "%s: the sender came back on a new connection",
                r->own.in->name);
    } else if (errno != ECANCELED) {
        log_msg(r->own.log, LOG_WARN, "%s: no more connections join the transfer: %s",
                r->listener.addr, e.msg);
    }
    atomic_store(&r->joins_over, true);   /* the others are refused again */
    return NULL;
}

int receiver_start_joins(struct receiver *r, struct weir_error *e)
{
    receiver_join_config(r, &r->joins_cfg);
    r->joins_cfg.accept_timeout = 0;   /* for as long as the stream flows */
    sync_lock(r->own.lock);
    r->has_returned = false;
    sync_unlock(r->own.lock);
    atomic_store(&r->joins_stop, false);
    atomic_store(&r->joins_over, false);
    if (sync_create(&r->joins, joins_main, r, e) != 0)
        return -1;
    r->joins_running = true;
    return 0;
}

void receiver_stop_joins(struct receiver *r)
{
    if (!r->joins_running)
        return;
    atomic_store(&r->joins_stop, true);
    sync_join(r->joins);
    r->joins_running = false;
}
