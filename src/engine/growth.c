/*
 * growth.c - when a spread transfer takes another connection.  See
 * growth.h.
 */
#include "engine/growth.h"

#include <math.h>

void growth_init(struct growth *g, int n, int max)
{
    *g = (struct growth){.n = n, .max = max, .mature = n};
    if (n >= max)
        g->end = GROWTH_AT_MOST;
}

static double period_of(const struct growth_sample *s)
{
    double p = s->rtt_ms > 0 ? GROWTH_PERIOD_RTTS * s->rtt_ms / 1000.0 : GROWTH_PERIOD_MIN;
    return p < GROWTH_PERIOD_MIN ? GROWTH_PERIOD_MIN : p > GROWTH_PERIOD_MAX ? GROWTH_PERIOD_MAX
                                                                                 : p;
}

/* Whether the addition under test raised the total enough in this
 * period (the growth ends when not). */
static bool gained(struct growth *g)
{
    double want = g->rate_before * (1.0 + GROWTH_GAIN_MIN * g->added / g->before);
    if (g->rate >= want)
        return true;
    g->added = 0;
    g->checks = 0;
    g->end = GROWTH_NO_GAIN;
    return false;
}

/* The addition is past its slow start: its gain is judged over the next
 * GROWTH_GAIN_PERIODS periods, each of which must show it (one period can
 * be the writer catching up after a stall).  Whether it is still being
 * judged, or has ended the growth. */
static bool judging(struct growth *g)
{
    if (g->checks == 0)
        return false;
    if (!gained(g))
        return true;
    if (--g->checks > 0)
        return true;
    g->added = 0;
    return false;
}

/* What connections from .. to - 1 did since the period's start. */
static void period_of_conns(const struct growth *g, const struct growth_sample *s, int from,
                            int to, uint64_t *busy, uint64_t *limited)
{
    *busy = *limited = 0;
    for (int i = from; i < to && i < s->n; i++) {
        *busy += s->busy_us[i] - g->start.busy_us[i];
        *limited += s->limited_us[i] - g->start.limited_us[i];
    }
}

/* Whether the connections added last are past their slow start: window-
 * limited themselves (or, on a system that does not say, after two
 * periods), or waited for long enough. */
static bool settled(struct growth *g, uint64_t busy, uint64_t limited, bool says)
{
    g->settled_for++;
    if (says ? busy > 0 && (double)limited >= GROWTH_LIMITED_MIN * (double)busy
             : g->settled_for >= 2)
        return true;
    return g->settled_for >= GROWTH_SETTLE_MAX;
}

/* How many to add: GROWTH_FIRST_STEP times one connection, then twice
 * the number, at most to the limit. */
static int step(const struct growth *g)
{
    int want = g->n == 1 ? GROWTH_FIRST_STEP - 1 : g->n;
    return want < g->max - g->n ? want : g->max - g->n;
}

/* Connections to add after a period that says (busy > 0): as many as
 * there are while the older ones are window-limited, else none. */
static int room_for(const struct growth *g, uint64_t busy, uint64_t mbusy, uint64_t mlimited,
                    double secs)
{
    if ((double)busy < GROWTH_BUSY_MIN * g->n * secs * 1e6)
        return 0;   /* the data, not the path, is what is slow */
    if (mbusy == 0 || (double)mlimited < GROWTH_LIMITED_MIN * (double)mbusy)
        return 0;   /* the link, not the window: more would only compete */
    return step(g);
}

/* A probe past its slow start, in one of its judged periods: 0 while it
 * is still judged, else minus how many must leave (the path needs the
 * most moved over what one connection moves, rounded up).  Either way the
 * growth ends with its judgement.  A period in which the data, not the
 * path, was slow (busy under GROWTH_BUSY_MIN) measures nothing and is not
 * counted: the probe waits, its connections idle rather than competing. */
static int sized(struct growth *g, uint64_t busy, double secs)
{
    if (busy > 0 && (double)busy < GROWTH_BUSY_MIN * g->n * secs * 1e6)
        return 0;
    if (g->rate > g->probe_best)
        g->probe_best = g->rate;
    if (--g->checks > 0)
        return 0;
    double need = g->one > 0 ? ceil(g->probe_best / g->one) : g->n;
    int keep = need < 1 ? 1 : need < g->n ? (int)need : g->n;
    int leave = g->n - keep;
    g->n = keep;
    g->added = 0;
    g->end = GROWTH_SIZED;
    return -leave;
}

/* A period ended (from g->start to s): how many to add. */
static int judge(struct growth *g, const struct growth_sample *s)
{
    double secs = s->now - g->start.now;
    /* what the path delivered, not what went into the sockets' buffers
     * (a new connection's buffer fills at once, which is no gain): the
     * less of what was sent and the system's estimate of delivery */
    g->rate = (double)(s->bytes - g->start.bytes) / secs;
    if (g->dcount && g->dsum / g->dcount < g->rate)
        g->rate = g->dsum / g->dcount;
    g->dsum = 0;
    g->dcount = 0;
    g->periods++;
    if (g->rate > g->rate_best)
        g->rate_best = g->rate;
    uint64_t busy, limited, nbusy, nlimited, mbusy, mlimited;
    period_of_conns(g, s, 0, g->n, &busy, &limited);
    period_of_conns(g, s, g->before, g->n, &nbusy, &nlimited);
    period_of_conns(g, s, 0, g->mature, &mbusy, &mlimited);
    bool says = busy > 0;
    g->start = *s;
    if (g->settling && settled(g, nbusy, nlimited, says)) {
        g->settling = false;
        g->checks = GROWTH_GAIN_PERIODS;
    }
    if (!g->settling && g->foresaw)
        return sized(g, busy, secs);
    if (g->settling || judging(g))
        return 0;   /* the last addition awaits its judgement, or ended the growth */
    int k = says ? room_for(g, busy, mbusy, mlimited, secs) : step(g);
    if (g->periods < GROWTH_BASE_PERIODS)
        return 0;   /* one period is no baseline: it may hold the start, or a stall */
    if (k > 0) {   /* its total will be judged against the most these connections
                      moved in a period (a stall is no baseline) */
        g->rate_before = g->rate_best;
        g->foresaw = false;
        g->before = g->n;
        g->added = 0;
    }
    return k;
}

/* Whether s goes on from g->start: the same connections, nothing back. */
static bool goes_on(const struct growth *g, const struct growth_sample *s)
{
    if (s->n != g->start.n || s->n > GROWTH_CONNS_MAX || s->now < g->start.now ||
        s->bytes < g->start.bytes)
        return false;
    for (int i = 0; i < s->n; i++)
        if (s->busy_us[i] < g->start.busy_us[i] || s->limited_us[i] < g->start.limited_us[i])
            return false;
    return true;
}

/* The first connection will be window-limited within
 * GROWTH_PROBE_DOUBLINGS round trips (growth.h): the probe, up to the
 * limit, is taken now.  0: not foreseen. */
static int foreseen(struct growth *g, const struct growth_sample *s)
{
    if (g->n != 1 || g->settling || g->checks > 0 || s->n != 1 || s->ss_sndbuf_most == 0 ||
        s->ss_window == 0 ||
        (s->ss_window << GROWTH_PROBE_DOUBLINGS) < s->ss_sndbuf_most || s->min_rtt_ms <= 0 ||
        s->rtt_ms <= 0 || s->rtt_ms > GROWTH_QUEUE_MAX * s->min_rtt_ms)
        return 0;
    int k = g->max - g->n;
    if (k > 0) {
        g->one = (double)(s->ss_sndbuf_most / 2) / (s->min_rtt_ms / 1000.0);
        g->probe_best = 0;
        g->foresaw = true;
        g->before = g->n;
        g->added = 0;
    }
    return k;
}

int growth_sample(struct growth *g, const struct growth_sample *s)
{
    if (g->end != GROWTH_ON)
        return 0;
    int k = foreseen(g, s);
    if (k > 0)
        return k;
    if (!g->begun || !goes_on(g, s)) {
        g->begun = true;   /* a first sample, or the connections changed under it */
        g->start = *s;
        g->periods = 0;
        g->rate_best = 0;
        g->dsum = 0;
        g->dcount = 0;
        return 0;
    }
    if (s->delivered > 0) {
        g->dsum += s->delivered;
        g->dcount++;
    }
    if (s->now - g->start.now < 0.99 * period_of(s))   /* samples come on ticks */
        return 0;
    return judge(g, s);
}

void growth_added(struct growth *g, int k)
{
    if (k <= 0) {
        g->end = GROWTH_JOINS_FAILED;
        return;
    }
    g->mature = g->n;
    g->n += k;
    g->added += k;
    g->settling = true;
    g->settled_for = 0;
    g->begun = false;   /* the next sample counts the new connections too */
    if (g->n >= g->max && !g->foresaw)
        g->end = GROWTH_AT_MOST;   /* a probe is judged first */
}
