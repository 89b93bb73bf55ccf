/*
 * test_growth.c - when --streams auto takes another connection
 * (engine/growth.h), driven with made-up figures: a path the window limits
 * doubles its connections while each doubling raises the total, and stops
 * when one does not; a path the link limits, a slow producer, and joins
 * that fail take none; a system that says nothing is probed; the limit
 * holds; clocks and counters that go back restart the period.
 */
#include <stdio.h>

#include "check.h"
#include "engine/growth.h"

/* A made-up path: n connections, each moving `per` bytes a second, with
 * their busy and window-limited shares; it is sampled every 0.1 s. */
struct path {
    double now;
    uint64_t bytes, busy, limited;
    double rtt_ms;
    bool says;
};

/* Run the rule for secs seconds at `rate` bytes a second in total; the
 * connections are busy `busy` of the time and limited `lim` of that.  The
 * sum of what it asked for. */
static int run(struct growth *g, struct path *p, double secs, double rate, double busy,
               double lim, int *asked_at_n)
{
    int asked = 0;
    for (double t = 0; t < secs; t += 0.1) {
        p->now += 0.1;
        p->bytes += (uint64_t)(rate * 0.1);
        uint64_t b = (uint64_t)(busy * g->n * 0.1 * 1e6);
        p->busy += p->says ? b : 0;
        p->limited += p->says ? (uint64_t)(lim * (double)b) : 0;
        struct growth_sample s = {.now = p->now, .bytes = p->bytes, .busy_us = p->busy,
                                  .limited_us = p->limited, .rtt_ms = p->rtt_ms};
        int k = growth_sample(g, &s);
        if (k > 0) {
            if (asked_at_n)
                *asked_at_n = g->n;
            asked += k;
            growth_added(g, k);
        }
    }
    return asked;
}

/* A long path whose window holds 25 MB/s a connection, on a link of
 * `link` bytes a second: doubling while it gains. */
static void window_limited(void)
{
    struct growth g;
    growth_init(&g, 1, 16);
    struct path p = {.rtt_ms = 100, .says = true};
    /* one connection, limited by its window: it doubles after a period
     * (5 round trips: 0.5 s) */
    CHECK(run(&g, &p, 0.45, 25e6, 1.0, 0.9, NULL) == 0, "nothing before a period is over");
    CHECK(run(&g, &p, 0.2, 25e6, 1.0, 0.9, NULL) == 1, "one more when the window limits one");
    CHECK(g.n == 2, "two now (%d)", g.n);
    /* two: twice the total; after the slow start's period and the one
     * compared, it doubles again */
    int at = 0;
    CHECK(run(&g, &p, 1.6, 50e6, 1.0, 0.9, &at) == 2 && at == 2, "two more when two gained "
          "(asked at n=%d)", at);
    CHECK(g.n == 4 && g.end == GROWTH_ON, "four, and still growing");
    /* four fill the link (100 MB/s) and the window no longer limits them:
     * nothing more, and the growth goes on watching */
    CHECK(run(&g, &p, 3, 100e6, 1.0, 0.1, NULL) == 0, "none while the link limits");
    CHECK(g.n == 4 && g.end == GROWTH_ON, "four, watching (%d, end %d)", g.n, g.end);
}

/* Connections added that do not raise the total: the growth ends. */
static void no_gain(void)
{
    struct growth g;
    growth_init(&g, 1, 16);
    struct path p = {.rtt_ms = 50, .says = true};
    CHECK(run(&g, &p, 0.65, 30e6, 1.0, 1.0, NULL) == 1, "one more at first");
    /* the total stays at 30 MB/s (a receiver that reads no faster): 1.1
     * times is under the 1.25 asked of a doubling */
    CHECK(run(&g, &p, 5, 33e6, 1.0, 1.0, NULL) == 0, "no more once it did not gain");
    CHECK(g.end == GROWTH_NO_GAIN && g.n == 2, "ended for good at two (end %d, n %d)", g.end,
          g.n);
    CHECK(run(&g, &p, 5, 90e6, 1.0, 1.0, NULL) == 0, "and stays ended");
}

/* The link, not the window; the producer, not the path. */
static void not_the_window(void)
{
    struct growth g;
    growth_init(&g, 1, 16);
    struct path p = {.rtt_ms = 80, .says = true};
    CHECK(run(&g, &p, 10, 100e6, 1.0, 0.3, NULL) == 0, "none when the window limits 30%%");
    CHECK(g.n == 1 && g.end == GROWTH_ON, "one, still watching");
    CHECK(run(&g, &p, 10, 5e6, 0.2, 1.0, NULL) == 0, "none when busy a fifth of the time");
    CHECK(g.n == 1, "still one");
}

/* A system that says nothing of its connections: probed, then judged by
 * the total alone. */
static void says_nothing(void)
{
    struct growth g;
    growth_init(&g, 1, 16);
    struct path p = {.rtt_ms = -1, .says = false};
    CHECK(run(&g, &p, 0.65, 20e6, 0, 0, NULL) == 1, "probed with one more");
    CHECK(run(&g, &p, 1.1, 40e6, 0, 0, NULL) == 2, "two more after a gain");
    CHECK(run(&g, &p, 3, 41e6, 0, 0, NULL) == 0 && g.end == GROWTH_NO_GAIN,
          "no more once a doubling gains nothing (end %d)", g.end);
}

/* The limit; joins that fail; a fixed count. */
static void limits(void)
{
    struct growth g;
    growth_init(&g, 1, 3);
    struct path p = {.rtt_ms = 10, .says = true};
    double rate = 10e6;
    for (int i = 0; i < 6; i++, rate *= 2)
        run(&g, &p, 1.0, rate, 1.0, 1.0, NULL);
    CHECK(g.n == 3 && g.end == GROWTH_AT_MOST, "at most 3 (%d, end %d)", g.n, g.end);

    growth_init(&g, 1, 16);
    p = (struct path){.rtt_ms = 10, .says = true};
    struct growth_sample s = {0};
    int k = 0;
    for (double t = 0; t < 2 && !k; t += 0.1) {
        s = (struct growth_sample){.now = t, .bytes = (uint64_t)(t * 1e7),
                                   .busy_us = (uint64_t)(t * 1e6),
                                   .limited_us = (uint64_t)(t * 1e6), .rtt_ms = 10};
        k = growth_sample(&g, &s);
    }
    CHECK(k == 1, "asked for one");
    growth_added(&g, 0);
    CHECK(g.end == GROWTH_JOINS_FAILED && g.n == 1, "none joined: the growth ends");

    growth_init(&g, 4, 4);
    CHECK(g.end == GROWTH_AT_MOST, "a fixed count never grows");
}

/* Figures that go back (the connections changed under the sample):
 * the period starts again rather than judge nonsense. */
static void going_back(void)
{
    struct growth g;
    growth_init(&g, 1, 16);
    struct growth_sample s = {.now = 10, .bytes = 1000000, .busy_us = 900000,
                              .limited_us = 900000, .rtt_ms = 20};
    CHECK(growth_sample(&g, &s) == 0, "a first sample begins a period");
    s.now = 10.6;
    s.bytes = 10;   /* fewer bytes than before */
    CHECK(growth_sample(&g, &s) == 0, "counters that went back begin it again");
    s.now = 11.2;
    s.bytes = 30000000;
    s.busy_us = 1500000;
    s.limited_us = 1500000;
    CHECK(growth_sample(&g, &s) == 1, "a whole period after that is judged");
}

int main(void)
{
    window_limited();
    no_gain();
    not_the_window();
    says_nothing();
    limits();
    going_back();
    CHECK_DONE();
}
