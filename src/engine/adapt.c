/* adapt.c - see adapt.h. */
#include "engine/adapt.h"

#include <math.h>

#include "base/sync.h"
#include "engine/pipeline_int.h"

#define FULL_SHARE_UP 0.3       /* the reader waited for room this share of the time */
#define WORKERS_SHARE_DOWN 0.05 /* the outputs waited on the workers this share */
#define WORKERS_SHARE_HURRY 0.25 /* so long that a move down need not settle first */

void adapt_init(struct adapt *a, bool on, int min, int max)
{
    a->on = on;
    a->min = min;
    a->max = max;
    atomic_init(&a->level, min);
    atomic_init(&a->used_min, max);
    atomic_init(&a->used_max, min);
    atomic_init(&a->stored, false);
    for (int i = 0; i < ADAPT_LEVELS; i++) {
        atomic_init(&a->bytes[i], 0);
        atomic_init(&a->nanos[i], 0);
        a->speed[i] = 0;
        a->measured[i] = 0;
    }
    a->moved_down = false;
    a->link = 0;
    for (int i = 0; i < 4; i++)
        a->c0[i] = 0;
    a->since = 0;
}

int adapt_level(struct adapt *a)
{
    return atomic_load(&a->level);
}

void adapt_used(struct adapt *a, int level, size_t wire, double secs)
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
    int i = level - a->min;
    if (i < 0 || i >= ADAPT_LEVELS || secs < 0)
        return;
    atomic_fetch_add(&a->bytes[i], wire);
    atomic_fetch_add(&a->nanos[i], (uint64_t)(secs * 1e9));
}

/* The workers' reports since the last tick into the speed of each level:
 * the average of the last measurement and this one, or this one alone
 * when the last is stale. */
static void learn(struct adapt *a, double now)
{
    for (int i = 0; i <= a->max - a->min && i < ADAPT_LEVELS; i++) {
        uint64_t b = atomic_exchange(&a->bytes[i], 0), ns = atomic_exchange(&a->nanos[i], 0);
        if (b == 0 || ns < 1000000)   /* under a millisecond says little */
            continue;
        double sample = (double)b / ((double)ns / 1e9);
        bool fresh = a->measured[i] > 0 && now - a->measured[i] < ADAPT_STALE;
        a->speed[i] = fresh ? (a->speed[i] + sample) / 2 : sample;
        a->measured[i] = now;
    }
}

/* The speed of level (the bytes one worker makes in a second): measured, or guessed from the nearest level below
 * that was (ADAPT_LEVEL_COST slower per level), or the nearest above; 0
 * when none was. */
static double speed_of(const struct adapt *a, int level, double now)
{
    double best = 0;
    int dist = INT32_MAX;
    for (int i = 0; i <= a->max - a->min && i < ADAPT_LEVELS; i++) {
        if (a->measured[i] <= 0 || now - a->measured[i] >= ADAPT_STALE)
            continue;
        int d = level - (a->min + i);   /* > 0: a level below */
        int far = d < 0 ? -d : d;
        if (far < dist || (far == dist && d > 0)) {
            dist = far;
            best = a->speed[i] / pow(ADAPT_LEVEL_COST, d);
        }
    }
    return best;
}

/* The highest level whose speed, times n workers, covers the link's rate
 * with the headroom (zstd's level 0 is its default, 3: never chosen); min when
 * none does. */
static int fastest_enough(const struct adapt *a, double rate, int n, double now)
{
    for (int level = a->max; level > a->min; level--)
        if (level != 0 && speed_of(a, level, now) * n >= rate * ADAPT_HEADROOM)
            return level;
    return a->min;
}

/* The level for the next interval, from its shares of time and the link's
 * rate (see adapt.h). */
static int decide(struct adapt *a, int level, double full, double workers, int n, double now)
{
    if (workers > WORKERS_SHARE_DOWN) {
        if (a->moved_down && workers < WORKERS_SHARE_HURRY)
            return level;
        int next = fastest_enough(a, a->link, n, now);
        if (next >= level)
            next = level - 1 == 0 ? -1 : level - 1;
        return next < a->min ? a->min : next;
    }
    if (full > FULL_SHARE_UP) {
        int next = fastest_enough(a, a->link, n, now);
        if (next > level + ADAPT_STEP_MAX)
            next = level + ADAPT_STEP_MAX == 0 ? 1 : level + ADAPT_STEP_MAX;
        return next > level ? next : level;
    }
    return level;
}

/* The engine's counters: the reader's waits for room, the outputs' waits
 * on the workers and on the input (those under way included), and the
 * bytes the slowest output took, and when the transfer started; false
 * before it has, and once the input has ended (the outputs then wait on
 * the last blocks whatever the level). */
static bool counters(struct pipeline *p, double now, double c[4], double *start)
{
    const struct ring *r = &p->ring;
    sync_lock(&p->lock);
    bool started = r->t_start > 0 && !r->input_done;
    *start = r->t_start;
    double open = r->empty_since >= 0 ? now - r->empty_since : 0;
    c[0] = r->t_full;
    c[1] = r->t_workers + (r->empty_on_workers ? open : 0);
    c[2] = r->t_empty + (r->empty_on_workers ? 0 : open);
    c[3] = (double)r->min_out;
    sync_unlock(&p->lock);
    return started;
}

/* The link's rate: what the outputs took while they were not waiting, an
 * average over the intervals.  When they waited most of the time the
 * figure is rough, and when they hardly wrote it is only a floor. */
static void measure_link(struct adapt *a, const double d[4])
{
    double writing = 1 - d[1] - d[2];
    double rate = d[3] / (writing > 0.1 ? writing : 0.1);
    if (writing < 0.1 && rate < a->link)
        return;
    a->link = a->link > 0 ? (a->link + rate) / 2 : rate;
}

void adapt_tick(struct adapt *a, struct pipeline *p, double now)
{
    if (!a->on || (a->since > 0 && now - a->since < ADAPT_SECS))
        return;
    double c[4], d[4], start;
    if (!counters(p, now, c, &start))
        return;
    if (a->since == 0) {   /* the first interval begins with the transfer */
        a->since = start;
        if (now - start < ADAPT_SECS)
            return;
    }
    learn(a, now);
    double dt = now - a->since;
    for (int i = 0; i < 4; i++) {
        d[i] = (c[i] - a->c0[i]) / dt;
        a->c0[i] = c[i];
    }
    a->since = now;
    measure_link(a, d);
    int level = atomic_load(&a->level), n = p->nworkers > 0 ? p->nworkers : 1;
    int next = decide(a, level, d[0], d[1], n, now);
    a->moved_down = next < level;
    atomic_store(&a->level, next);
}
