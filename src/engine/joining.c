/*
 * joining.c - connections that join a spread session (--streams): each
 * made to the first one's peer and joined on a thread of its own
 * (link/sender.h, sender_join), so that all take one round of
 * handshakes.  The opening's spread and a transfer that grows (grow.c)
 * both join here.  See writer_int.h.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>

#include "engine/writer_int.h"
#include "link/sender.h"
#include "link/stripe.h"
#include "transport/tcp.h"

/* What this sender asks of its receiver (link/sender.h). */
struct sender_terms output_terms(const struct output *o)
{
    const struct pipeline *p = o->p;
    return (struct sender_terms){.keyed = p->keyed, .tls = p->tls_client,
                                 .epoch_records = p->cfg->epoch_records, .zstd = p->zstd,
                                 .target = p->cfg->target};
}

/* One connection after the first of a spread session, joined to it on a
 * thread of its own, so that all of them take one round of handshakes. */
struct joining {
    struct output *o;
    const struct sockaddr_storage *peer;
    socklen_t len;
    double limit;
    int index, count;
    struct transport *t;
    struct weir_error e;
    int rc;
};

static void *join_one(void *arg)
{
    struct joining *j = arg;
    struct output *o = j->o;
    int fd;
    if (tcp_connect_addr((const struct sockaddr *)j->peer, j->len, j->limit,
                         o->p->cfg->tcp.io_timeout, &o->halt, &fd) != 0) {
        j->rc = atomic_load(&o->halt) ? STEP_STOP : STEP_FAIL;
        error_sys(&j->e, WEIR_EXIT_NETWORK, errno, "%s: connection %d of %d: connect", o->name,
                  j->index + 1, j->count);
        return NULL;
    }
    char name[sizeof j->t->name];
    snprintf(name, sizeof name, "%.250s (connection %d of %d)", o->name, j->index + 1, j->count);
    transport_tcp(j->t, fd, name);
    j->t->wire_tx = &o->net;
    struct session_out js;
    session_out_init(&js, j->t, true, false, false, o->session.block_max);
    js.spread = true;
    js.grow = o->session.grow;
    struct sender_terms k = output_terms(o);
    j->rc = sender_join(&js, &o->bc, &k, (unsigned)j->index, (unsigned)j->count, j->limit,
                        &j->e);
    return NULL;
}

int connection_join(struct output *o, double limit, struct transport *conns, int from,
                    int count, int *rcs, struct weir_error *e)
{
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    if (getpeername(stripe_fd(&o->t, 0), (struct sockaddr *)&peer, &len) != 0)
        return error_sys(e, WEIR_EXIT_NETWORK, errno, "%s: getpeername", o->t.name), STEP_FAIL;
    struct joining j[CODEC_STREAMS_MAX];
    pthread_t th[CODEC_STREAMS_MAX];
    bool started[CODEC_STREAMS_MAX] = {false};
    int rc = STEP_OK;
    for (int i = from; i < count; i++) {
        j[i] = (struct joining){.o = o, .peer = &peer, .len = len, .limit = limit, .index = i,
                                .count = count, .t = &conns[i], .rc = STEP_FAIL};
        started[i] = sync_create(&th[i], join_one, &j[i], e) == 0;
        rcs[i] = STEP_FAIL;
        if (!started[i])
            rc = STEP_FAIL;
    }
    for (int i = from; i < count; i++) {
        if (!started[i])
            continue;
        sync_join(th[i]);
        rcs[i] = j[i].rc;
        if (rc == STEP_OK && j[i].rc != STEP_OK) {
            rc = j[i].rc;
            *e = j[i].e;
        }
    }
    return rc;
}

