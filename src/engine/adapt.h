/*
 * adapt.h - --adapt: the zstd level follows the bottleneck.
 *
 * Contract: the main thread calls adapt_tick() from its loop; the workers
 * read the level with adapt_level() for each block and report with
 * adapt_used() the level a block used, its raw bytes and the seconds it
 * took (or that it was stored).
 *
 * The controller is a model, not a thermostat.  Its rungs are storing
 * (a zstd frame of raw blocks) and the levels min to max.  Every
 * measurement interval (ADAPT_SECS) the tick turns the workers' reports
 * into a speed and a ratio per rung (raw bytes one worker handles in a
 * second, raw over compressed; averages that follow the data, forgotten
 * after ADAPT_STALE seconds), and what the outputs took while they were not
 * waiting into the link's rate.  A rung not measured is guessed from the
 * nearest one that was: ADAPT_LEVEL_COST times slower per rung up, the same
 * ratio.  What a rung delivers is the smaller of what the workers compress
 * (with ADAPT_HEADROOM to spare) and what the link carries at its ratio;
 * the rung to be on is the highest that delivers nearly the most.  Then:
 *   - when the outputs waited on the workers, the level drops to that rung
 *     in one move (at least one rung; the interval right after a move down
 *     still holds blocks of the old level, so it only counts when its waits
 *     were long);
 *   - when the reader waited for room (the outputs are the bottleneck) and
 *     the outputs did not wait, it rises to that rung, at most
 *     ADAPT_STEP_MAX a move;
 *   - otherwise it holds.
 * So it never moves more than once an interval, falls straight to a rung
 * that was measured to keep up rather than oscillating down step by step,
 * and climbs only on measured or conservatively guessed speeds; a level
 * that proved too slow is tried again once its measurement is stale.  On
 * a link faster than even min compresses it stores, which delivers more.
 * When the outputs keep waiting and the link's rate is stale (the link may
 * have become faster), it steps one rung down to see whether the link
 * takes more.
 * It begins at min, the fast end.  The levels the blocks used are kept
 * for the summary.
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
#define ADAPT_RUNGS 128         /* room for storing and any range (zstd: -100 to 19) */
#define ADAPT_STORED (-1000)    /* the level of a block stored, not compressed */

struct adapt {
    bool on;
    int min, max;
    atomic_int level;           /* what the next block uses */
    atomic_int used_min, used_max;   /* the levels blocks used */
    atomic_bool stored;         /* and some blocks were stored */
    /* the workers': per rung (adapt.c), since the last tick */
    atomic_uint_least64_t raw[ADAPT_RUNGS], wire[ADAPT_RUNGS], nanos[ADAPT_RUNGS];
    /* the main thread's */
    double speed[ADAPT_RUNGS];  /* raw bytes a second one worker handles */
    double ratio[ADAPT_RUNGS];  /* raw bytes over compressed ones */
    double measured[ADAPT_RUNGS];    /* when they were last measured; 0: never */
    bool moved_down;            /* at the last tick */
    double since;               /* when the interval began */
    double c0[4];               /* the engine's counters then (adapt.c) */
    double link;                /* the bytes a second the outputs take, when they can */
    double link_at;             /* when that was measured, rather than a floor */
};

struct pipeline;

/* Begin at min, the fast end (or off, when on is false). */
void adapt_init(struct adapt *a, bool on, int min, int max);
/* The main thread, now and then: move the level once an interval. */
void adapt_tick(struct adapt *a, struct pipeline *p, double now);
/* A worker: the level for its next block (ADAPT_STORED: store it), and
 * that a block of raw bytes took secs at level and made wire bytes. */
int adapt_level(struct adapt *a);
void adapt_used(struct adapt *a, int level, size_t raw, size_t wire, double secs);

#endif
