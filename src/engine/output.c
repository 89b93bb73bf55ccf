/*
 * output.c - what every part of an output's writer uses: naming a failed
 * write, a consumer that quit, a connection that broke, whether the
 * receiver waits for the sender's word, and how the output passes holes.
 * See writer_int.h.
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

#include "link/stripe.h"

#include "engine/writer_int.h"

int write_error(struct output *o, struct weir_error *e, const char *what)
{
    if (errno == ECANCELED)
        return STEP_STOP;
    /* spread, which connection failed, and how (stripe.h) */
    const char *which = stripe_why(&o->t);
    double limit = o->p->cfg->tcp.io_timeout;   /* 0: the kernel's own timers timed out */
    if (o->t.is_socket && backchannel_breaks(errno)) {
        int err = errno;
        char why[96];
        if (err == ETIMEDOUT && limit > 0)
            snprintf(why, sizeof why, "the receiver took nothing for %g s", limit);
        else
            snprintf(why, sizeof why, "%s", strerror(err));
        sync_lock(&o->p->lock);
        backchannel_broke_locked(&o->bc, *which ? which : why);
        sync_unlock(&o->p->lock);
        errno = err;
    }
    if (*which)
        error_set(e, o->t.status, "%s: %s", o->t.name, which);
    else if (errno == ETIMEDOUT && limit > 0)
        error_set(e, o->t.status, "%s: no progress for %g s", o->t.name, limit);
    else if (errno == EPIPE && !o->t.is_socket)
        error_set(e, o->t.status, "%s: %s: Broken pipe (the reader closed it early)", o->t.name,
                  what);
    else
        error_sys(e, o->t.status, errno, "%s: %s", o->t.name, what);
    return STEP_FAIL;
}

/* A consumer that stopped reading: what it ended with says more than EPIPE. */
int consumer_quit(struct output *o, struct weir_error *e)
{
    struct weir_error verdict;
    child_exited_within(&o->child, CONSUMER_PATIENCE);
    if (transport_close(&o->t, false, &o->halt, &verdict) != 0)
        *e = verdict;
    else
        error_set(e, WEIR_EXIT_OUTPUT, "%s exited with status 0 before it read all its input",
                  o->child.name);
    return STEP_FAIL;
}

/* The back channel found the connection broken while this writer waited
 * for data: a failure the writer reconnects for. */
int broke_while_idle(struct output *o, struct weir_error *e)
{
    sync_lock(&o->p->lock);
    error_set(e, WEIR_EXIT_NETWORK, "%s: %s", o->t.name, o->bc.broken_why);
    sync_unlock(&o->p->lock);
    return STEP_FAIL;
}

/* Whether the receiver waits for this sender's word that it read the
 * answer: both offer CODEC_FEATURE_ANSWER_READ (this end always does), and
 * the session may resume (the receiver named it), since only then can a
 * receiver give an answer lost on the way again.  Lock held, or the
 * writer's own thread (the session is named long before the end). */
bool says_read(const struct output *o)
{
    return backchannel_says_read(&o->bc, &o->session);
}

int refuse_hole(struct output *o, struct weir_error *e)
{
    return error_set(e, WEIR_EXIT_NETWORK, "%s: the data has holes, and the receiver (an "
                     "older weir) cannot take them in a compressed stream: upgrade it, or "
                     "send without -z", o->t.name), STEP_FAIL;
}

/* Decide how this output passes holes, once it is open and greeted. */
void plan_holes(struct output *o)
{
    struct pipeline *p = o->p;
    if (p->encode)
        o->holes = o->form == CODEC_FORM_FRAME ? HOLES_FRAME
                   : !session_holes(&o->session) ? HOLES_REFUSED
                   : p->zstd && !o->session.greet ? HOLES_ZSTD : HOLES_RECORD;
    else if (o->session.frame)
        o->holes = session_holes(&o->session) ? HOLES_RECORD : HOLES_ZEROS;
    else
        o->holes = transport_skips_holes(&o->t) ? HOLES_SKIP : HOLES_ZEROS;
}

/* A connection's paths, as the system sees them, for snapshots: sampled
 * here, on the writer's thread that owns the descriptors (a reconnect
 * replaces them outside the lock), at most every PATH_SAMPLE_SECS. */
#define PATH_SAMPLE_SECS 0.1
bool sample_path(struct output *o)
{
    if (o->spec->kind != WEIR_OUT_TCP || o->t.fd < 0 || !o->t.is_socket)
        return false;
    double now = clock_now();
    if (now - o->path_at < PATH_SAMPLE_SECS)
        return false;
    o->path_at = now;
    int n = stripe_count(&o->t);
    struct os_tcp_stats st[CODEC_STREAMS_MAX];
    bool known[CODEC_STREAMS_MAX];
    for (int i = 0; i < n; i++)
        known[i] = os_tcp_stats(stripe_fd(&o->t, i), &st[i]) == 0;
    sync_lock(&o->p->lock);
    o->npaths = n;
    for (int i = 0; i < n; i++) {
        o->path_known[i] = known[i];
        if (known[i])
            o->path[i] = st[i];
    }
    sync_unlock(&o->p->lock);
    return true;
}
