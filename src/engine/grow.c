/*
 * grow.c - a spread transfer that takes more connections while it runs
 * (--streams auto): the writer's side of it.  The rule is growth.h; the
 * joins are joining.c's; the stripe takes each joined connection
 * (link/stripe.h, stripe_add).  See writer_int.h.
 *
 * The joins run on a thread of their own (a job), so the writer never
 * waits for a handshake while the stream flows: it starts a job when the
 * rule asks, looks whether it is done with each later sample, and only
 * waits for it before the stream's end, a break or the close.
 */
#include <errno.h>
#include <stdlib.h>

#include "engine/writer_int.h"
#include "link/listener.h"
#include "link/stripe.h"
#include "os/os.h"

/* auto takes at most as many connections as iperf3 -P 8 uses: beyond, a
 * link's share is what grows, not the path's use (and the window rule
 * cannot tell a full link from a full send buffer reliably) */
#define AUTO_STREAMS_MAX 8

struct grow_job {
    struct output *o;
    pthread_t thread;
    int from, to;              /* joining as connections from .. to - 1, of to */
    struct transport conns[CODEC_STREAMS_MAX];
    int rc[CODEC_STREAMS_MAX];
    struct weir_error e;       /* the first failure */
    atomic_bool done;
};

static void *job_main(void *arg)
{
    struct grow_job *j = arg;
    thread_unblock_wake();
    (void)connection_join(j->o, LISTENER_HANDSHAKE_SECS, j->conns, j->from, j->to, j->rc,
                          &j->e);
    atomic_store(&j->done, true);
    return NULL;
}

void grow_begin(struct output *o)
{
    int max = o->session.grow ? AUTO_STREAMS_MAX : 1;
    growth_init(&o->growth, stripe_count(&o->t), max);
}

/* The figures of the connections, from the writer's last sample of
 * their paths (sample_path). */
static void figures(const struct output *o, struct growth_sample *s)
{
    _Static_assert(GROWTH_CONNS_MAX >= CODEC_STREAMS_MAX, "a figure for every connection");
    *s = (struct growth_sample){.now = clock_now(), .bytes = atomic_load(&o->net),
                                .rtt_ms = -1, .min_rtt_ms = -1,
                                .n = o->npaths};
    for (int i = 0; i < o->npaths; i++) {
        if (!o->path_known[i])
            continue;
        const struct os_tcp_stats *st = &o->path[i];
        if (i == 0) {
            s->rtt_ms = st->rtt_ms;
            s->min_rtt_ms = st->min_rtt_ms;
            s->ss_window = st->ss_window;
            s->ss_sndbuf_most = st->ss_sndbuf_most;
        }
        s->delivered += (double)st->delivery_rate;
        s->busy_us[i] = st->busy_us;
        s->limited_us[i] = st->rwnd_limited_us + st->sndbuf_limited_us;
    }
}

/* Start joining k more. */
static void start_job(struct output *o, int k)
{
    struct grow_job *j = calloc(1, sizeof *j);
    struct weir_error e;
    int n = stripe_count(&o->t);
    if (j) {
        *j = (struct grow_job){.o = o, .from = n, .to = n + k};
        for (int i = 0; i < CODEC_STREAMS_MAX; i++)
            transport_none(&j->conns[i]);
    }
    if (!j || sync_create(&j->thread, job_main, j, &e) != 0) {
        free(j);
        growth_added(&o->growth, 0);
        log_msg(o->p->log, LOG_WARN, "%s: no thread to join more connections: going on over %d",
                o->name, n);
        return;
    }
    log_msg(o->p->log, LOG_DEBUG, "%s: the window limits the path: %d more connection%s",
            o->name, k, k == 1 ? " joins" : "s join");
    o->grow_job = j;
}

/* The job is over: its joined connections go into the stripe. */
static void finish_job(struct output *o)
{
    struct grow_job *j = o->grow_job;
    sync_join(j->thread);
    o->grow_job = NULL;
    int added = 0;
    struct weir_error e = j->e;
    for (int i = j->from; i < j->to; i++) {
        if (j->rc[i] != STEP_OK) {
            j->conns[i].ops->abort(&j->conns[i]);
            transport_close(&j->conns[i], false, NULL, &(struct weir_error){0});
        } else if (stripe_add(&o->t, &j->conns[i], &e) == 0) {
            added++;
        }
    }
    free(j);
    growth_added(&o->growth, added);
    int n = stripe_count(&o->t);
    o->nstreams = n;
    if (added > 0)
        log_msg(o->p->log, LOG_INFO, "%s: the transfer goes over %d connections (the window "
                "limited the path: --streams auto)", o->name, n);
    else
        log_msg(o->p->log, LOG_INFO, "%s: no connection more joined (%s): going on over %d",
                o->name, e.msg, n);
}

/* A probe was judged (growth.h): the connections the path does not need
 * leave the transfer, and the growth is over either way. */
static void sized(struct output *o, int leave)
{
    const struct growth *g = &o->growth;
    if (leave > 0)
        leave = stripe_let_go(&o->t, g->n);
    if (leave > 0)
        log_msg(o->p->log, LOG_INFO, "%s: %d connection%s leave%s the transfer: it needs %d "
                "(%.1f MB/s over %d, a connection's window moves %.1f) (--streams auto)",
                o->name, leave, leave == 1 ? "" : "s", leave == 1 ? "s" : "", g->n,
                g->probe_best / 1e6, g->n + leave, g->one / 1e6);
    else
        log_msg(o->p->log, LOG_INFO, "%s: the path needs all %d connections (%.1f MB/s, a "
                "connection's window moves %.1f) (--streams auto)", o->name, g->n,
                g->probe_best / 1e6, g->one / 1e6);
}

void grow_tick(struct output *o)
{
    if (o->grow_job && atomic_load(&o->grow_job->done))
        finish_job(o);
    if (o->grow_job || o->growth.end != GROWTH_ON || !o->t.stripe)
        return;
    struct growth_sample s;
    figures(o, &s);
    int k = growth_sample(&o->growth, &s);
    if (o->growth.end == GROWTH_SIZED)
        sized(o, -k);
    if (o->growth.end == GROWTH_NO_GAIN)
        log_msg(o->p->log, LOG_INFO, "%s: more connections did not raise the total (%.1f MB/s "
                "before, %.1f after): going on over %d (--streams auto)", o->name,
                o->growth.rate_before / 1e6, o->growth.rate / 1e6, o->nstreams);
    if (k <= 0)
        return;
    if (o->growth.foresaw)
        log_msg(o->p->log, LOG_DEBUG, "%s: in slow start, the window (%.1f MB) is within %d "
                "doublings of the send buffer's most (%.1f MB): a probe of %d connections",
                o->name, s.ss_window / 1e6, GROWTH_PROBE_DOUBLINGS, s.ss_sndbuf_most / 1e6,
                o->growth.n + k);
    else
        log_msg(o->p->log, LOG_DEBUG, "%s: %.1f MB/s over %d", o->name, o->growth.rate / 1e6,
                o->nstreams);
    start_job(o, k);
}

void grow_end(struct output *o)
{
    if (o->grow_job)
        finish_job(o);
    o->growth.end = o->growth.end == GROWTH_ON ? GROWTH_AT_MOST : o->growth.end;
}
