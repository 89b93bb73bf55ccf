/*
 * adapt.h - --adapt: the zstd level follows the bottleneck.
 *
 * Contract: the main thread calls adapt_tick() from its loop; the workers
 * read the level with adapt_level() for each block and say which level a
 * block used with adapt_used().  Every measurement interval (ADAPT_SECS)
 * the tick looks at what the engine waited on since the last one: the
 * reader waiting for room (the outputs are the bottleneck) while the
 * workers have time to spare moves the level up; the outputs waiting on the
 * workers moves it down; anything else holds it (busy workers behind a full
 * buffer are the balance sought).  It starts at the fast end and the first
 * interval only starts the counts (the buffer fills); a move in the
 * direction of the last one doubles its step (at most ADAPT_STEP_MAX), a
 * reversal starts again at one level, and after a move down a move up
 * needs two intervals that ask for it.  So it settles within a second or
 * two and never changes more than once an interval.  The levels the blocks
 * used are kept for the summary.
 */
#ifndef WEIR_ADAPT_H
#define WEIR_ADAPT_H

#include <stdatomic.h>
#include <stdbool.h>

#define ADAPT_SECS 0.5          /* the measurement interval */
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
    int up_votes;               /* intervals in a row that asked to move up */
    bool warm;                  /* the first interval (the buffer filling) is over */
    double since;               /* when the interval began */
    double full0, workers0, busy0;   /* the engine's counters then */
};

struct pipeline;

/* Begin at min, the fast end (or off, when on is false). */
void adapt_init(struct adapt *a, bool on, int min, int max);
/* The main thread, now and then: move the level once an interval. */
void adapt_tick(struct adapt *a, struct pipeline *p, double now);
/* A worker: the level for its next block, and that a block used it. */
int adapt_level(struct adapt *a);
void adapt_used(struct adapt *a, int level);

#endif
