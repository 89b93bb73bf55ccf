/*
 * growth.c - when a spread transfer takes another connection.  See
 * growth.h.
 */
#include "engine/growth.h"

void growth_init(struct growth *g, int n, int max)
{
    *g = (struct growth){.n = n, .max = max};
    if (n >= max)
        g->end = GROWTH_AT_MOST;
}

static double period_of(const struct growth_sample *s)
{
    double p = s->rtt_ms > 0 ? GROWTH_PERIOD_RTTS * s->rtt_ms / 1000.0 : GROWTH_PERIOD_MIN;
    return p < GROWTH_PERIOD_MIN ? GROWTH_PERIOD_MIN : p > GROWTH_PERIOD_MAX ? GROWTH_PERIOD_MAX
                                                                                 : p;
}

/* Whether the addition under test raised the total enough (the growth
 * ends when not). */
static bool gained(struct growth *g)
{
    double want = g->rate_before * (1.0 + GROWTH_GAIN_MIN * g->added / g->before);
    g->added = 0;
    if (g->rate >= want)
        return true;
    g->end = GROWTH_NO_GAIN;
    return false;
}

/* A period ended (from g->start to s): how many to add. */
static int judge(struct growth *g, const struct growth_sample *s)
{
    double secs = s->now - g->start.now;
    g->rate = (double)(s->bytes - g->start.bytes) / secs;
    uint64_t busy = s->busy_us - g->start.busy_us;
    uint64_t limited = s->limited_us - g->start.limited_us;
    bool says = s->busy_us > 0;
    g->start = *s;
    if (g->settling) {
        g->settling = false;   /* the new connections' slow start */
        return 0;
    }
    if (g->added && !gained(g))
        return 0;
    if (says && (double)busy < GROWTH_BUSY_MIN * g->n * secs * 1e6)
        return 0;   /* the data, not the path, is what is slow */
    if (says && (double)limited < GROWTH_LIMITED_MIN * (double)busy)
        return 0;   /* the link, not the window: more would only compete */
    int k = g->n < g->max - g->n ? g->n : g->max - g->n;
    g->rate_before = g->rate;
    g->before = g->n;
    return k;
}

int growth_sample(struct growth *g, const struct growth_sample *s)
{
    if (g->end != GROWTH_ON)
        return 0;
    if (!g->begun || s->now < g->start.now || s->bytes < g->start.bytes ||
        s->busy_us < g->start.busy_us || s->limited_us < g->start.limited_us) {
        g->begun = true;   /* a first sample, or the connections changed under it */
        g->start = *s;
        return 0;
    }
    if (s->now - g->start.now < period_of(s))
        return 0;
    return judge(g, s);
}

void growth_added(struct growth *g, int k)
{
    if (k <= 0) {
        g->end = GROWTH_JOINS_FAILED;
        return;
    }
    g->n += k;
    g->added = k;
    g->settling = true;
    g->begun = false;   /* the next sample counts the new connections too */
    if (g->n >= g->max)
        g->end = GROWTH_AT_MOST;
}
