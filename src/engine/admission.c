/*
 * admission.c - the reader's side of a weir sender's session: the
 * listener's settings and the receiver's registration before admitting the
 * sender, and what a break costs the engine (the gap, the count, the
 * reader's message) while link/receiver.c takes the sender back.  See
 * reader_int.h.
 */
#include <errno.h>
#include <stdio.h>

#include "base/sync.h"
#include "link/receiver.h"
#include "linktest/linktest.h"

#include "engine/reader_int.h"

/* The listener's settings for this engine (link/receiver.c sets those
 * of a taking back). */
static void listener_settings(struct pipeline *p, struct listener_config *cfg)
{
    const struct tcp_settings *s = &p->cfg->tcp;
    *cfg = (struct listener_config){.raw = s->raw, .plain_too = p->cfg->listen_plain_too,
                                    .accept_timeout = s->accept_timeout,
                                    .io_timeout = s->io_timeout,
                                    .handshake_timeout = LISTENER_HANDSHAKE_SECS,
                                    .tls = p->tls_server,
                                    .epoch_records = p->cfg->epoch_records,
                                    .channel_fd = -1,
                                    .channel_trusted = p->cfg->channel_trusted,
                                    .channel_name = p->cfg->channel_name,
                                    .allow_link_test = p->cfg->allow_link_test,
                                    .tests = linktest_server_service(),
                                    .resume = p->cfg->reconnect > 0,
                                    .redials = p->cfg->input_redial != NULL,
                                    /* a service's process too: its joiners are
                                     * handed to it as its sender's return is */
                                    .streams = !s->raw && p->cfg->streams != 1};
    if (s->io_timeout > 0 && s->io_timeout < cfg->handshake_timeout)
        cfg->handshake_timeout = s->io_timeout;
}

/* A spread transfer's reorder window: half the buffer (-m) in chunks, at
 * most STRIPE_WINDOW_MAX of them (stripe_in raises it to two a
 * connection). */
#define STRIPE_WINDOW_MAX 256
static unsigned stripe_window(uint64_t mem)
{
    uint64_t w = mem / 2 / CODEC_CHUNK_MAX;
    return w > STRIPE_WINDOW_MAX ? STRIPE_WINDOW_MAX : (unsigned)w;
}

void register_receiver(struct pipeline *p)
{
    struct receiver_owner own = {.lock = &p->lock, .in = &p->in, .wire_rx = &p->net_in,
                                 .held = &p->held, .stop = &p->stop,
                                 .gap_since = &p->gap_since, .dial = p->cfg->input_redial,
                                 .dial_ctx = p->cfg->input_redial_ctx,
                                 .route = p->cfg->route, .reconnect = p->cfg->reconnect,
                                 .stripe_window = stripe_window(p->cfg->mem),
                                 .streams = &p->in_streams,
                                 .log = p->log};
    listener_settings(p, &own.cfg);
    receiver_register(&p->rx, &own);
}

int admit_sender(struct pipeline *p, struct weir_error *e)
{
    int channel_fd = p->channel_fd;
    p->channel_fd = -1;   /* the admission's now: it closes it, or it becomes the input */
    return receiver_admit(&p->rx, channel_fd, p->cfg->admitted, &p->stop, e);
}

/* The connection of a session that may resume broke (cause): close it,
 * keep everything else as it is, and wait up to --reconnect for its sender
 * on the listening socket, refusing any other (listener.c).  Once it is
 * back, tell it how much of the stream this end holds: it sends the rest
 * from there.  0, or -1 (r->gone says why, or the engine is stopping). */
int resume_input(struct reader *r, const char *cause)
{
    struct pipeline *p = r->p;
    double window = p->cfg->reconnect, since = clock_now();
    char name[sizeof p->in.name];
    snprintf(name, sizeof name, "%s", p->in.name);
    log_msg(p->log, LOG_WARN, "%s: the connection broke (%s); waiting up to %g s for the "
            "sender to come back", name, cause, window);
    struct weir_error e;
    int rc = receiver_readmit(&p->rx, since, window, &p->stop, &e);
    sync_lock(&p->lock);
    p->gap_secs += clock_now() - since;
    p->gap_since = 0;
    sync_unlock(&p->lock);
    if (rc != 0) {
        if (errno == ECANCELED && atomic_load(&p->stop))
            return -1;
        if (errno == ECONNREFUSED)
            error_set(&r->gone, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and the "
                      "sender refuses a new one: it is gone (%s)", name, cause, e.msg);
        else if (errno == ETIMEDOUT)
            error_set(&r->gone, WEIR_EXIT_NETWORK, "%s: the sender did not come back within "
                      "%g s (the connection broke: %s)", name, window, cause);
        else
            error_set(&r->gone, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and "
                      "waiting for the sender to come back failed: %s", name, cause, e.msg);
        errno = EPIPE;
        return -1;
    }
    uint64_t held = atomic_load(&p->held);
    sync_lock(&p->lock);
    p->reconnections++;
    sync_unlock(&p->lock);
    log_msg(p->log, LOG_WARN, "%s: the sender is back after %.1f s; resuming at byte %llu of "
            "the stream", p->in.name, clock_now() - since, (unsigned long long)held);
    return 0;
}
