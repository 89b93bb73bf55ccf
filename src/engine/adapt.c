/* adapt.c - see adapt.h. */
#include "engine/adapt.h"

#include "base/sync.h"
#include "engine/pipeline_int.h"

#define FULL_SHARE_UP 0.3       /* the reader waited for room this share of the time */
#define BUSY_SHARE_UP 0.75      /* and the workers were busy less than this */
#define WORKERS_SHARE_DOWN 0.1  /* the outputs waited on the workers this share */

void adapt_init(struct adapt *a, bool on, int min, int max)
{
    a->on = on;
    a->min = min;
    a->max = max;
    atomic_init(&a->level, min);
    atomic_init(&a->used_min, max);
    atomic_init(&a->used_max, min);
    atomic_init(&a->stored, false);
    a->step = 0;
    a->up_votes = 0;
    a->warm = false;
    a->since = 0;
}

int adapt_level(struct adapt *a)
{
    return atomic_load(&a->level);
}

void adapt_used(struct adapt *a, int level)
{
    if (level == ADAPT_STORED) {
        atomic_store(&a->stored, true);
        return;
    }
    int lo = atomic_load(&a->used_min), hi = atomic_load(&a->used_max);
    while (level < lo && !atomic_compare_exchange_weak(&a->used_min, &lo, level))
        ;
    while (level > hi && !atomic_compare_exchange_weak(&a->used_max, &hi, level))
        ;
}

/* The next move, signed, from the shares of the interval.  A move in the
 * direction of the last one doubles it; after a move down, a move up waits
 * for a second interval that asks for it (the level just proved too slow).
 * The first interval only starts the counts: while the buffer first fills,
 * the outputs wait on the workers whatever the level. */
static int decide(struct adapt *a, double full, double workers, double busy)
{
    int dir = 0;
    if (workers > WORKERS_SHARE_DOWN)
        dir = -1;
    else if (full > FULL_SHARE_UP && busy < BUSY_SHARE_UP)
        dir = 1;
    a->up_votes = dir > 0 ? a->up_votes + 1 : 0;
    if (dir == 0 || (dir > 0 && a->step < 0 && a->up_votes < 2))
        return 0;
    int last = a->step < 0 ? -a->step : a->step;
    int size = a->step * dir > 0 ? last * 2 : 1;
    return dir * (size > ADAPT_STEP_MAX ? ADAPT_STEP_MAX : size);
}

void adapt_tick(struct adapt *a, struct pipeline *p, double now)
{
    if (!a->on)
        return;
    sync_lock(&p->lock);
    double full = p->ring.t_full, workers = p->ring.t_workers, busy = p->encode_secs;
    bool started = p->ring.t_start > 0;
    sync_unlock(&p->lock);
    if (!started)
        return;
    if (a->since == 0 || now - a->since < ADAPT_SECS) {
        if (a->since == 0) {
            a->since = now;
            a->full0 = full, a->workers0 = workers, a->busy0 = busy;
        }
        return;
    }
    double dt = now - a->since;
    if (!a->warm) {   /* the first interval: the buffer was filling */
        a->warm = true;
        a->since = now;
        a->full0 = full, a->workers0 = workers, a->busy0 = busy;
        return;
    }
    int n = p->nworkers > 0 ? p->nworkers : 1;
    int move = decide(a, (full - a->full0) / dt, (workers - a->workers0) / dt,
                      (busy - a->busy0) / (dt * n));
    int level = atomic_load(&a->level), next = level + move;
    next = next < a->min ? a->min : next > a->max ? a->max : next;
    if (next == 0)   /* zstd's level 0 is its default, 3: step over it */
        next = move > 0 ? 1 : -1;
    if (next != level)
        a->step = move;
    atomic_store(&a->level, next);
    a->since = now;
    a->full0 = full, a->workers0 = workers, a->busy0 = busy;
}
