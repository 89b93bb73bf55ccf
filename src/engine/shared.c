/*
 * shared.c - what every thread of the engine does to its shared state
 * (pipeline_int.h): failing, failing an output, stopping, hashing a split
 * LZ4 frame's content in order, saying it is done, letting the wake-up
 * signal in.  The reader, the writers and the workers call these; they call
 * no thread's code, so the main thread's loop (pipeline.c) sits above every
 * thread body and none of them reaches back into it.
 */
#include <signal.h>

#include "base/sync.h"
#include "engine/pipeline_int.h"

/* ---- errors and stopping ------------------------------------------------ */

void stop_locked(struct pipeline *p)
{
    ring_stop_locked(&p->ring);
    for (int i = 0; i < p->nout; i++)
        atomic_store(&p->out[i].halt, true);
    sync_broadcast(&p->job_cv);
}

void pipeline_fail(struct pipeline *p, const struct weir_error *e)
{
    sync_lock(&p->lock);
    bool already = atomic_load(&p->stop);
    if (!p->failed) {
        p->failed = true;
        p->first = *e;
    }
    stop_locked(p);
    sync_unlock(&p->lock);
    if (!already)
        log_msg(p->log, LOG_ERROR, "%s", e->msg);
}

void output_fail(struct output *o, const struct weir_error *e)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    bool cancelled = atomic_load(&p->stop);
    bool first_time = !o->dead;
    o->dead = true;
    atomic_store(&o->halt, true);
    if (!p->failed && !cancelled) {
        p->failed = true;
        p->first = *e;
    }
    ring_drop_locked(&p->ring, &o->cur);
    if (o->hold.live)
        ring_drop_locked(&p->ring, &o->hold);
    if (p->ring.live_outputs == 0 || p->cfg->stop_on_error)
        stop_locked(p);
    sync_unlock(&p->lock);
    if (!cancelled && first_time)
        log_msg(p->log, LOG_ERROR, "%s", e->msg);
}

/* ---- the content cursor of a split LZ4 frame ------------------------------ */

void content_catch_up_locked(struct pipeline *p)
{
    struct ring_cursor *c = &p->content_cur;
    if (!c->live || p->content_busy)
        return;
    p->content_busy = true;
    bool moved = false;
    const unsigned char *data;
    size_t n;
    uint64_t seq = c->seq;
    while (!atomic_load(&p->stop) && ring_peek_locked(&p->ring, c, &data, &n) == RING_DATA) {
        /* the cursor holds the slot: it stays put while the lock is dropped */
        sync_unlock(&p->lock);
        stream_content_add(&p->content, data, n);
        sync_lock(&p->lock);
        ring_advance_locked(&p->ring, c, n);
        moved = true;
    }
    moved |= c->seq != seq;
    p->content_busy = false;
    if (moved)
        sync_broadcast(&p->ring.space_cv);   /* the reader may wait for the frame's end */
}

/* ---- threads ------------------------------------------------------------ */

void thread_done(struct pipeline *p, bool *running_flag)
{
    sync_lock(&p->lock);
    *running_flag = false;
    p->running--;
    bool watching = p->reader_watching;
    sync_unlock(&p->lock);
    if (watching)
        sync_kill(p->reader, WAKE_SIGNAL);   /* perhaps the last output: look now */
    sync_kill(p->main_thread, WAKE_SIGNAL);
}

void thread_unblock_wake(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, WAKE_SIGNAL);
    sync_sigmask(SIG_UNBLOCK, &set);
}

int io_timeout_ms(const struct pipeline *p, const struct transport *t)
{
    if (!t->is_socket || p->cfg->tcp.io_timeout <= 0)
        return -1;
    return (int)(p->cfg->tcp.io_timeout * 1000);
}
