/*
 * adapt.h - --adapt: the zstd level follows the bottleneck.
 *
 * Contract: the main thread calls adapt_tick() from its loop; the workers
 * read the level with adapt_level() for each block and report with
 * adapt_used() the level a block used, its raw bytes and the seconds it
 * took (or that it was stored).
 *
 * The controller is a model, not a thermostat.  Every measurement interval
 * (ADAPT_SECS) the tick turns the workers' reports into a speed per level
 * (raw bytes one worker compresses in a second, an average that follows the
 * data and is forgotten after ADAPT_STALE seconds), and what the outputs
 * took into the demand (the raw bytes a second they would take if they
 * never waited on the workers).  A level whose speed is not known is
 * guessed from the nearest one that is, ADAPT_LEVEL_COST times slower per
 * level up.  Then:
 *   - when the outputs waited on the workers, the level drops in one move
 *     to the highest whose speed, times the workers, covers the demand with
 *     ADAPT_HEADROOM to spare (at least one level; the interval right after
 *     a move down still holds blocks of the old level, so it only counts
 *     when its waits were long);
 *   - when the reader waited for room (the outputs are the bottleneck) and
 *     the outputs did not wait, the level rises to the highest that covers
 *     the demand so, at most ADAPT_STEP_MAX levels a move;
 *   - otherwise it holds.
 * So it never moves more than once an interval, falls straight to a level
 * that was measured to keep up rather than oscillating down step by step,
 * and climbs only on measured or conservatively guessed speeds; a level
 * that proved too slow is tried again once its measurement is stale.  It
 * begins at level 1 (or the range's nearest), the fast end of zstd's
 * normal levels; the first interval only collects speeds (the buffer
 * fills).  The levels the blocks used are kept for the summary.
 */
#ifndef WEIR_ADAPT_H
#define WEIR_ADAPT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ADAPT_SECS 0.5          /* the measurement interval */
#define ADAPT_STEP_MAX 6        /* the most levels one move up takes */
#define ADAPT_HEADROOM 1.2      /* the workers' speed over the demand a level needs */
#define ADAPT_LEVEL_COST 1.5    /* a level not measured: this much slower per level up */
#define ADAPT_STALE 8.0         /* seconds a level's measured speed is trusted */
#define ADAPT_MIN_DEFAULT (-5)  /* --adapt's range unless given */
#define ADAPT_MAX_DEFAULT 15
#define ADAPT_LEVELS 128        /* room for any range (zstd: -100 to 19) */
#define ADAPT_STORED (-1000)    /* adapt_used(): a block stored, not compressed */

struct adapt {
    bool on;
    int min, max;
    atomic_int level;           /* what the next block uses */
    atomic_int used_min, used_max;   /* the levels blocks used */
    atomic_bool stored;         /* and some blocks were stored */
    /* the workers': per level (index level - min), since the last tick */
    atomic_uint_least64_t bytes[ADAPT_LEVELS], nanos[ADAPT_LEVELS];
    /* the main thread's */
    double speed[ADAPT_LEVELS]; /* compressed bytes a second one worker makes */
    double measured[ADAPT_LEVELS];   /* when speed was last measured; 0: never */
    bool moved_down;            /* at the last tick */
    double since;               /* when the interval began */
    double c0[4];               /* the engine's counters then (adapt.c) */
    double link;                /* the bytes a second the outputs take, when they can */
};

struct pipeline;

/* Begin at level 1, or the range's nearest (or off, when on is false). */
void adapt_init(struct adapt *a, bool on, int min, int max);
/* The main thread, now and then: move the level once an interval. */
void adapt_tick(struct adapt *a, struct pipeline *p, double now);
/* A worker: the level for its next block, and that a block made wire bytes
 * in secs at level (ADAPT_STORED: it was stored; wire and secs unused). */
int adapt_level(struct adapt *a);
void adapt_used(struct adapt *a, int level, size_t wire, double secs);

#endif
