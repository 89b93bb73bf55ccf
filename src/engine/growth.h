/*
 * growth.h - when a spread transfer takes another connection (--streams
 * auto): the rule alone, fed with samples, so that a test can drive it.
 *
 * One TCP connection moves at most its window each round trip.  auto
 * begins with one connection and, every period (five round trips, between
 * GROWTH_PERIOD_MIN and GROWTH_PERIOD_MAX seconds), looks at what the
 * connections did in it:
 *   - busy: the share of the period they had data in flight.  Under
 *     GROWTH_BUSY_MIN the producer (or the receiver's consumer) is what
 *     limits, and more connections would not help: nothing is added;
 *   - window-limited: the share of their busy time that the peer's window
 *     or their own send buffer limited them (Linux's tcpi_rwnd_limited and
 *     tcpi_sndbuf_limited).  At GROWTH_LIMITED_MIN or more the path has
 *     room the window cannot use: the connections double (at most to the
 *     limit).  A system that does not say (busy 0) is taken as limited
 *     while the path is long, and the next rule decides;
 *   - after connections were added, the period that follows is left to
 *     their slow start, and the one after it is compared with the last
 *     period before: unless the total rose by GROWTH_GAIN_MIN of what the
 *     new connections could add (k of n: 1 + GAIN * k / n), one more does
 *     not raise the total, and the growth ends for good.  So weir takes no
 *     more than its share of a link others use, nor of one it fills.
 *
 * Contract: growth_init(), then growth_sample() with each sample (at any
 * rate: the rule keeps its own periods); it returns how many connections
 * to add now (0: none), and growth_added() says how many joined.  No
 * locks, no clocks of its own: the caller passes `now`.
 */
#ifndef WEIR_GROWTH_H
#define WEIR_GROWTH_H

#include <stdbool.h>
#include <stdint.h>

#define GROWTH_PERIOD_MIN 0.5
#define GROWTH_PERIOD_MAX 3.0
#define GROWTH_PERIOD_RTTS 5
#define GROWTH_BUSY_MIN 0.5
#define GROWTH_LIMITED_MIN 0.5
#define GROWTH_GAIN_MIN 0.25

/* What the connections did so far, summed over all of them. */
struct growth_sample {
    double now;             /* seconds, any origin */
    uint64_t bytes;         /* sent on the wire */
    uint64_t busy_us;       /* with data in flight; 0: the system does not say */
    uint64_t limited_us;    /* of it, limited by a window (the peer's or the send buffer) */
    double rtt_ms;          /* the first connection's round trip; < 0 unknown */
};

enum growth_end { GROWTH_ON, GROWTH_NO_GAIN, GROWTH_AT_MOST, GROWTH_JOINS_FAILED };

struct growth {
    int n, max;             /* connections now, and at most */
    enum growth_end end;    /* GROWTH_ON while it may grow */
    bool begun;             /* a period has a start */
    struct growth_sample start;   /* the period's */
    bool settling;          /* the period after an addition: slow start */
    int added, before;      /* the last addition (0: none under test), and n before it */
    double rate_before;     /* bytes a second in the last period before it */
    double rate;            /* the last period's */
};

void growth_init(struct growth *g, int n, int max);
/* The connections' figures now: how many to add (0: none). */
int growth_sample(struct growth *g, const struct growth_sample *s);
/* k of those asked for joined (0: none could: the growth ends). */
void growth_added(struct growth *g, int k);

#endif
