/*
 * growth.h - when a spread transfer takes another connection (--streams
 * auto): the rule alone, fed with samples, so that a test can drive it.
 *
 * One TCP connection moves at most its window each round trip.  auto
 * begins with one connection and, every period (GROWTH_PERIOD_RTTS round
 * trips, between GROWTH_PERIOD_MIN and GROWTH_PERIOD_MAX seconds), looks
 * at what the connections did in it:
 *   - busy: the share of the period they had data in flight.  Under
 *     GROWTH_BUSY_MIN the producer (or the receiver's consumer) is what
 *     limits, and more connections would not help: nothing is added;
 *   - window-limited: the share of their busy time that the peer's window
 *     or their own send buffer limited them (Linux's tcpi_rwnd_limited and
 *     tcpi_sndbuf_limited).  At GROWTH_LIMITED_MIN or more the path has
 *     room the window cannot use, and connections are added: the first
 *     time up to GROWTH_FIRST_STEP, then twice as many, at most to the
 *     limit.  A system that does not say (busy 0) is taken as limited,
 *     and the total decides;
 *   - after an addition nothing more is added until the new connections
 *     are past their slow start (window-limited themselves, or after
 *     GROWTH_SETTLE_MAX periods).  The totals of that period and the next
 *     (GROWTH_GAIN_PERIODS) are then compared with the most the older
 *     connections moved in one period; unless each rose by GROWTH_GAIN_MIN
 *     of what the new connections could add (k more on n: 1 + GAIN * k /
 *     n), more connections do not raise it, and the growth ends for good.
 *     Nothing is added before GROWTH_BASE_PERIODS whole periods over the
 *     same connections, so that the baseline is never one period alone.
 *     Periods on each side, not one: a writer that stalled (a busy host,
 *     or a receiver slow to start) sends less in one period and catches
 *     up in the next, which alone would look like a gain.  The total is
 *     what the path delivered: the less of what was sent and the system's
 *     estimate of delivery (a new connection's send buffer fills at once,
 *     which is no gain).
 * One thing is foreseen rather than seen: a first connection still in its
 * first slow start, with nothing sent again yet, whose window is within
 * GROWTH_PROBE_DOUBLINGS doublings of the most its send buffer grows to
 * (ss_window << GROWTH_PROBE_DOUBLINGS >= ss_sndbuf_most), while its round
 * trip is still within GROWTH_QUEUE_MAX of the least (no queue has built
 * at a bottleneck, so the link is not what stops it), will be
 * window-limited that many round trips later unless the link stops it
 * first.  How far the link goes is not known yet, so that step is a
 * probe: connections are added at once up to the limit, and their slow
 * starts run side by side and beside the first one's last doublings,
 * instead of one after another with a judgement between.  Once they are
 * past their slow start (as above), the most they moved in one of
 * GROWTH_GAIN_PERIODS periods (busy ones: a period in which the data was
 * what is slow does not count), over what one connection's window moves
 * (half its send buffer's most a round trip: less than a window that
 * stopped growing holds), rounded up, is how many the path needs; the
 * others leave the transfer (they carry no more chunks and end), and the
 * growth ends.  A probe on a link that one or two connections fill so
 * holds its connections for a few periods, not for the transfer.
 * So weir takes no more than its share of a link others use, nor of one
 * it fills, where the connections stop being window-limited or stop
 * raising the total, or the probe's total says fewer will do.
 *
 * Contract: growth_init(), then growth_sample() with each sample (at any
 * rate: the rule keeps its own periods); it returns how many connections
 * to add now (0: none), and growth_added() says how many joined; or, once
 * a probe is judged, minus how many of the last joined must leave (the
 * first g->n carry the transfer on).  No locks, no clocks of its own: the
 * caller passes `now`.
 */
#ifndef WEIR_GROWTH_H
#define WEIR_GROWTH_H

#include <stdbool.h>
#include <stdint.h>

#define GROWTH_CONNS_MAX 16
#define GROWTH_PERIOD_MIN 0.25
#define GROWTH_PERIOD_MAX 3.0
#define GROWTH_PERIOD_RTTS 2
#define GROWTH_SETTLE_MAX 6
#define GROWTH_FIRST_STEP 4
#define GROWTH_BUSY_MIN 0.5
#define GROWTH_LIMITED_MIN 0.5
#define GROWTH_GAIN_MIN 0.25
#define GROWTH_GAIN_PERIODS 2
#define GROWTH_BASE_PERIODS 2
#define GROWTH_QUEUE_MAX 1.5
#define GROWTH_PROBE_DOUBLINGS 3

/* What the connections did so far. */
struct growth_sample {
    double now;             /* seconds, any origin */
    uint64_t bytes;         /* sent on the wire, by all of them */
    double rtt_ms;          /* the first connection's round trip; < 0 unknown */
    double delivered;       /* bytes a second the path delivers now, all of them (the
                               system's estimate: TCP_INFO's delivery rate); 0 unknown */
    int n;                  /* connections, in the order they joined */
    /* each one's time with data in flight (0: the system does not say),
     * and of it, limited by a window (the peer's or its send buffer) */
    uint64_t busy_us[GROWTH_CONNS_MAX], limited_us[GROWTH_CONNS_MAX];
    /* the first connection's least round trip (< 0 unknown), and while it
     * is in its first slow start, its window and the most its send buffer
     * grows to, in bytes (0 unknown, or past it) */
    double min_rtt_ms;
    uint64_t ss_window, ss_sndbuf_most;
};

enum growth_end { GROWTH_ON, GROWTH_NO_GAIN, GROWTH_AT_MOST, GROWTH_JOINS_FAILED, GROWTH_SIZED };

struct growth {
    int n, max;             /* connections now, and at most */
    enum growth_end end;    /* GROWTH_ON while it may grow */
    bool begun;             /* a period has a start */
    struct growth_sample start;   /* the period's */
    bool settling;          /* after an addition: the new ones' slow start */
    int settled_for;        /* periods since the last addition */
    int added, before;      /* added since the last judged total (0: none), and n then */
    int mature;             /* n before the last addition */
    double rate_before;     /* bytes a second before them: the most of a period */
    int periods;            /* whole periods over these connections */
    double rate_best;       /* the most they moved in one of them */
    double rate;            /* the last period's: the mean of the delivery rates sampled in
                               it, else what was sent over its time */
    int checks;             /* periods still to show the last addition's gain */
    bool foresaw;           /* the last addition was foreseen, not seen: a probe */
    double one;             /* a probe's: what one connection's window moves, bytes a second */
    double probe_best;      /* the most its connections moved in a judged period */
    double dsum;            /* the delivery rates sampled in the period, and how many */
    int dcount;
};

void growth_init(struct growth *g, int n, int max);
/* The connections' figures now: how many to add (0: none), or minus how
 * many must leave (a probe judged: g->n carry on). */
int growth_sample(struct growth *g, const struct growth_sample *s);
/* k of those asked for joined (0: none could: the growth ends). */
void growth_added(struct growth *g, int k);

#endif
