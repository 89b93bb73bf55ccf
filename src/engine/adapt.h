/*
 * adapt.h - --adapt: the zstd level follows the bottleneck.
 *
 * Contract: the main thread calls adapt_tick() from its loop; the workers
 * read the level with adapt_level() for each block and note what it cost
 * with adapt_note().  Every measurement interval (ADAPT_SECS) the tick
 * looks at what the engine waited on since the last one: the reader waiting
 * for room (the outputs are the bottleneck) while the workers have time to
 * spare moves the level up; the outputs waiting on the workers, or workers
 * busy nearly all the time, moves it down.  A move in the same direction as
 * the last one doubles its step (at most ADAPT_STEP_MAX levels), a reversal
 * starts again at one level, so it reaches the right level within a few
 * intervals and never changes more than once an interval.  The levels the
 * blocks actually used are kept for the summary.
 */
#ifndef WEIR_ADAPT_H
#define WEIR_ADAPT_H

#include <stdatomic.h>
#include <stdbool.h>

#define ADAPT_SECS 1.0          /* the measurement interval */
#define ADAPT_STEP_MAX 4        /* the most levels one move takes */
#define ADAPT_MIN_DEFAULT (-5)  /* --adapt's range unless given */
#define ADAPT_MAX_DEFAULT 15
#define ADAPT_STORED (-1000)    /* adapt_used(): a block stored, not compressed */

struct adapt {
    bool on;
    int min, max;
    atomic_int level;           /* what the next block uses */
    atomic_int used_min, used_max;   /* the levels blocks used */
    atomic_bool stored;         /* and some blocks were stored */
    int step;                   /* the main thread's: the last move, signed */
    double since;               /* when the interval began */
    double full0, workers0, busy0;   /* the engine's counters then */
};

struct pipeline;

/* Begin at the fast end of [min, max] (or off, when on is false). */
void adapt_init(struct adapt *a, bool on, int min, int max);
/* The main thread, now and then: move the level once an interval. */
void adapt_tick(struct adapt *a, struct pipeline *p, double now);
/* A worker: the level for its next block, and that a block used it. */
int adapt_level(struct adapt *a);
void adapt_used(struct adapt *a, int level);

#endif
