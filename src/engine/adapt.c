/* adapt.c - see adapt.h. */
#include "engine/adapt.h"

#include <math.h>

#include "base/sync.h"
#include "engine/pipeline_int.h"

#define FULL_SHARE_UP 0.3       /* the reader waited for room this share of the time */
#define WORKERS_SHARE_DOWN 0.05 /* the outputs waited on the workers this share */
#define WORKERS_SHARE_HURRY 0.25 /* so long that a move down need not settle first */
#define NEAR_BEST 0.97          /* a rung this close to the best counts as as good */
#define ADAPT_FUTILE 1.02       /* a ratio this low: the data does not compress */

/* Rung 0 stores; rung r > 0 is zstd level min + r - 1. */
static int rung_of(const struct adapt *a, int level)
{
    return level == ADAPT_STORED ? 0 : level - a->min + 1;
}

static int level_of(const struct adapt *a, int rung)
{
    return rung == 0 ? ADAPT_STORED : a->min + rung - 1;
}

static int rungs(const struct adapt *a)
{
    return a->max - a->min + 2;
}

void adapt_init(struct adapt *a, bool on, int min, int max)
{
    a->on = on;
    a->min = min;
    a->max = max;
    atomic_init(&a->level, min);
    atomic_init(&a->used_min, max);
    atomic_init(&a->used_max, min);
    atomic_init(&a->stored, false);
    for (int i = 0; i < ADAPT_RUNGS; i++) {
        atomic_init(&a->raw[i], 0);
        atomic_init(&a->wire[i], 0);
        atomic_init(&a->nanos[i], 0);
        a->speed[i] = 0;
        a->ratio[i] = 1;
        a->measured[i] = 0;
    }
    a->moved_down = false;
    a->link = 0;
    a->link_at = -ADAPT_STALE;
    for (int i = 0; i < 4; i++)
        a->c0[i] = 0;
    a->since = 0;
}

int adapt_level(struct adapt *a)
{
    return atomic_load(&a->level);
}

void adapt_used(struct adapt *a, int level, size_t raw, size_t wire, double secs)
{
    if (level == ADAPT_STORED) {
        atomic_store(&a->stored, true);
    } else {
        int lo = atomic_load(&a->used_min), hi = atomic_load(&a->used_max);
        while (level < lo && !atomic_compare_exchange_weak(&a->used_min, &lo, level))
            ;
        while (level > hi && !atomic_compare_exchange_weak(&a->used_max, &hi, level))
            ;
    }
    int r = rung_of(a, level);
    if (r < 0 || r >= rungs(a) || secs < 0)
        return;
    atomic_fetch_add(&a->raw[r], raw);
    atomic_fetch_add(&a->wire[r], wire);
    atomic_fetch_add(&a->nanos[r], (uint64_t)(secs * 1e9));
}

/* The workers' reports since the last tick into each rung's speed and
 * ratio: the average of the last measurement and this one, or this one
 * alone when the last is stale. */
static void learn(struct adapt *a, double now)
{
    for (int r = 0; r < rungs(a); r++) {
        uint64_t raw = atomic_exchange(&a->raw[r], 0), wire = atomic_exchange(&a->wire[r], 0);
        uint64_t ns = atomic_exchange(&a->nanos[r], 0);
        if (raw == 0 || wire == 0 || ns < 1000000)   /* under a millisecond says little */
            continue;
        double speed = (double)raw / ((double)ns / 1e9), ratio = (double)raw / (double)wire;
        bool fresh = a->measured[r] > 0 && now - a->measured[r] < ADAPT_STALE;
        a->speed[r] = fresh ? (a->speed[r] + speed) / 2 : speed;
        a->ratio[r] = fresh ? (a->ratio[r] + ratio) / 2 : ratio;
        a->measured[r] = now;
    }
}

/* The raw bytes a second rung r would deliver: what n workers compress
 * (with the headroom) or what the link takes at its ratio, the smaller.
 * Measured, or guessed from the nearest rung that was (ADAPT_LEVEL_COST
 * slower per rung up, the same ratio; storing's is 1); 0 when none was. */
static double delivers(const struct adapt *a, int r, int n, double now)
{
    int near = -1, dist = INT32_MAX;
    for (int i = 0; i < rungs(a); i++) {
        int d = r > i ? r - i : i - r;
        if (a->measured[i] > 0 && now - a->measured[i] < ADAPT_STALE && d < dist)
            near = i, dist = d;
    }
    if (near < 0)
        return 0;
    double speed = a->speed[near] / pow(ADAPT_LEVEL_COST, r - near);
    double ratio = r == 0 ? 1 : a->ratio[near];
    double cpu = speed * n / ADAPT_HEADROOM, link = a->link * ratio;
    return cpu < link ? cpu : link;
}

/* The rung to be on: the highest that delivers nearly the most (zstd's
 * level 0, its default 3, is never chosen); -1 when nothing is measured. */
static int best_rung(const struct adapt *a, int n, double now)
{
    double best = 0;
    for (int r = 0; r < rungs(a); r++) {
        double t = delivers(a, r, n, now);
        best = t > best ? t : best;
    }
    for (int r = rungs(a) - 1; best > 0 && r >= 0; r--)
        if (level_of(a, r) != 0 && delivers(a, r, n, now) >= best * NEAR_BEST)
            return r;
    return -1;
}

/* The level for the next interval, from its shares of time (see adapt.h). */
static int decide(struct adapt *a, int level, double full, double workers, int n, double now)
{
    int cur = rung_of(a, level), want = best_rung(a, n, now);
    if (workers > WORKERS_SHARE_DOWN) {
        if (a->moved_down && workers < WORKERS_SHARE_HURRY)
            return level;
        /* long waits with the link's rate only a floor (the link may have
         * become faster): one rung down shows whether it takes more */
        bool explore = workers > WORKERS_SHARE_HURRY && now - a->link_at >= ADAPT_STALE;
        if (want >= cur && !explore)   /* measured to deliver the most: the waits are the price */
            return level;
        if (want < 0 || want >= cur)
            want = cur - 1;
        if (want > 0 && level_of(a, want) == 0)
            want--;
        return want < 0 ? level : level_of(a, want);
    }
    /* a level that gains nothing on this data: higher ones would not
     * either, and each block the workers try on them costs more */
    bool futile = cur > 0 && a->measured[cur] > 0 && a->ratio[cur] < ADAPT_FUTILE;
    if (full > FULL_SHARE_UP && want > cur && !futile) {
        if (want > cur + ADAPT_STEP_MAX)
            want = cur + ADAPT_STEP_MAX;
        if (level_of(a, want) == 0)
            want--;
        return want > cur ? level_of(a, want) : level;
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

/* The link's rate: what the outputs took while they were writing, when
 * they wrote at least half the interval.  When they waited more than that
 * the socket took each burst faster than the link carries it, so what they
 * took is only a floor. */
static void measure_link(struct adapt *a, const double d[4], double now)
{
    double writing = 1 - d[1] - d[2];
    if (writing >= 0.5) {
        double rate = d[3] / writing;
        bool fresh = now - a->link_at < ADAPT_STALE;
        a->link = fresh ? (a->link + rate) / 2 : rate;
        a->link_at = now;
    } else if (d[3] > a->link) {
        a->link = d[3];
    }
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
    measure_link(a, d, now);
    int level = atomic_load(&a->level), n = p->nworkers > 0 ? p->nworkers : 1;
    int next = decide(a, level, d[0], d[1], n, now);
    a->moved_down = rung_of(a, next) < rung_of(a, level);
    atomic_store(&a->level, next);
}
