/*
 * test_growth.c - when --streams auto takes another connection
 * (engine/growth.h), driven with made-up figures: a path the window limits
 * doubles its connections while each doubling raises the total, and stops
 * when one does not; a path the link limits, a slow producer, and joins
 * that fail take none; a system that says nothing is probed; the limit
 * holds; clocks and counters that go back restart the period; the new
 * connections' slow start is waited for before the gain is judged; a
 * writer that stalls and catches up, or a slow start of the transfer,
 * fakes no gain; a first connection
 * about to meet its send buffer's most in slow start probes, and the
 * probe's total says how many stay.
 */
#include <stdio.h>

#include "check.h"
#include "engine/growth.h"

/* A made-up path, sampled every 0.1 s: its connections' counters. */
struct path {
    double now;
    uint64_t bytes;
    uint64_t busy[GROWTH_CONNS_MAX], limited[GROWTH_CONNS_MAX];
    double rtt_ms;
    bool says;
    double slow_for;   /* a connection that joined is not window-limited this long */
    double since[GROWTH_CONNS_MAX];   /* when each joined */
    double min_rtt_ms;                /* the first's least round trip */
    uint64_t ss_window, ss_most;      /* the first's slow start (0: past it) */
    int left;                         /* connections the rule let go */
};

static struct growth_sample sample_of(const struct path *p, int n)
{
    struct growth_sample s = {.now = p->now, .bytes = p->bytes, .rtt_ms = p->rtt_ms, .n = n,
                              .min_rtt_ms = p->min_rtt_ms, .ss_window = p->ss_window,
                              .ss_sndbuf_most = p->ss_most};
    for (int i = 0; i < n; i++) {
        s.busy_us[i] = p->busy[i];
        s.limited_us[i] = p->limited[i];
    }
    return s;
}

/* Run the rule for secs seconds at `rate` bytes a second in total; each
 * connection is busy `busy` of the time and limited `lim` of that (none
 * in its first slow_for seconds).  The sum of what it asked for;
 * *asked_at_n: how many there were at the last ask. */
static int run(struct growth *g, struct path *p, double secs, double rate, double busy,
               double lim, int *asked_at_n)
{
    int asked = 0;
    for (double t = 0; t < secs - 1e-9; t += 0.1) {
        p->now += 0.1;
        p->bytes += (uint64_t)(rate * 0.1);
        for (int i = 0; p->says && i < g->n; i++) {
            uint64_t b = (uint64_t)(busy * 0.1 * 1e6);
            p->busy[i] += b;
            if (p->now - p->since[i] >= p->slow_for)
                p->limited[i] += (uint64_t)(lim * (double)b);
        }
        struct growth_sample s = sample_of(p, g->n);
        int k = growth_sample(g, &s);
        if (k < 0)
            p->left -= k;
        if (k > 0) {
            if (asked_at_n)
                *asked_at_n = g->n;
            asked += k;
            for (int i = g->n; i < g->n + k && i < GROWTH_CONNS_MAX; i++)
                p->since[i] = p->now;
            growth_added(g, k);
        }
    }
    return asked;
}

/* A long path whose window holds 25 MB/s a connection, on a link of
 * 150 MB/s: four, then eight, while each step gains. */
static void window_limited(void)
{
    struct growth g;
    growth_init(&g, 1, 16);
    struct path p = {.rtt_ms = 100, .says = true};
    /* one connection, limited by its window: four after two periods (a
     * period is two round trips, 0.25 s at least; the first sample begins
     * it) */
    CHECK(run(&g, &p, 0.6, 25e6, 1.0, 0.9, NULL) == 0, "nothing before two periods are over");
    CHECK(run(&g, &p, 0.1, 25e6, 1.0, 0.9, NULL) == 3, "four when the window limits one");
    CHECK(g.n == 4, "four now (%d)", g.n);
    /* four: four times the total; the new ones window-limited at once, so
     * the gain is judged over the next two periods, and they double */
    int at = 0;
    CHECK(run(&g, &p, 0.5, 100e6, 1.0, 0.9, NULL) == 0, "none while one period showed the gain");
    CHECK(run(&g, &p, 0.3, 100e6, 1.0, 0.9, &at) == 4 && at == 4,
          "four more when four gained (asked at n=%d)", at);
    CHECK(g.n == 8 && g.end == GROWTH_ON, "eight, and still growing");
    /* eight fill the link and the window no longer limits them: judged
     * after GROWTH_SETTLE_MAX periods, a gain, and nothing more */
    CHECK(run(&g, &p, 3, 150e6, 1.0, 0.1, NULL) == 0, "none while the link limits");
    CHECK(g.n == 8 && g.end == GROWTH_ON && !g.settling, "eight, watching (%d, end %d)", g.n,
          g.end);
}

/* Connections added that do not raise the total: the growth ends. */
static void no_gain(void)
{
    struct growth g;
    growth_init(&g, 1, 16);
    struct path p = {.rtt_ms = 50, .says = true};
    CHECK(run(&g, &p, 0.7, 30e6, 1.0, 1.0, NULL) == 3, "three more at first");
    /* the total stays near 30 MB/s (a receiver that reads no faster):
     * 1.1 times is under the 1.75 asked of three more on one */
    CHECK(run(&g, &p, 5, 33e6, 1.0, 1.0, NULL) == 0, "no more once it did not gain");
    CHECK(g.end == GROWTH_NO_GAIN && g.n == 4, "ended for good at four (end %d, n %d)", g.end,
          g.n);
    CHECK(run(&g, &p, 5, 90e6, 1.0, 1.0, NULL) == 0, "and stays ended");
}

/* A busy host: the writer stalls in one period and catches up in the
 * next.  Neither is taken for a gain: the baseline is the most of the
 * periods before the addition, two at least, and the gain must show in
 * two periods after it. */
static void stalls(void)
{
    struct growth g;
    growth_init(&g, 1, 16);
    struct path p = {.rtt_ms = 50, .says = true};
    CHECK(run(&g, &p, 0.4, 10e6, 1.0, 0.0, NULL) == 0, "none while the window does not limit");
    /* the window limits in a period in which the writer stalled: half */
    CHECK(run(&g, &p, 0.3, 5e6, 1.0, 1.0, NULL) == 3, "three more in the stalled period");
    CHECK(g.rate_before > 9.9e6 && g.rate_before < 10.1e6, "judged against the period before the stall (%.0f)",
          g.rate_before);
    CHECK(run(&g, &p, 3, 10e6, 1.0, 1.0, NULL) == 0 && g.end == GROWTH_NO_GAIN && g.n == 4,
          "the same 10 MB/s over four is no gain (end %d, n %d)", g.end, g.n);

    growth_init(&g, 1, 16);
    p = (struct path){.rtt_ms = 50, .says = true};
    CHECK(run(&g, &p, 0.7, 10e6, 1.0, 1.0, NULL) == 3, "three more at first");
    /* the period after the addition: the writer catches up at twice the rate */
    CHECK(run(&g, &p, 0.4, 20e6, 1.0, 1.0, NULL) == 0 && g.end == GROWTH_ON,
          "one period of twice the total decides nothing");
    CHECK(run(&g, &p, 0.3, 10e6, 1.0, 1.0, NULL) == 0 && g.end == GROWTH_NO_GAIN && g.n == 4,
          "and the next, back at 10 MB/s, ends the growth at four (end %d, n %d)", g.end, g.n);

    /* a first period that held the start (a receiver slow to begin, a busy
     * host): a fifth of the rate, window-limited all the time */
    growth_init(&g, 1, 16);
    p = (struct path){.rtt_ms = 50, .says = true};
    CHECK(run(&g, &p, 0.4, 2e6, 1.0, 1.0, NULL) == 0, "no addition on one period alone");
    CHECK(run(&g, &p, 0.3, 10e6, 1.0, 1.0, NULL) == 3, "three more after the second");
    CHECK(g.rate_before > 9.9e6 && g.rate_before < 10.1e6,
          "judged against the better period, not the start (%.0f)", g.rate_before);
    CHECK(run(&g, &p, 3, 10.5e6, 1.0, 1.0, NULL) == 0 && g.end == GROWTH_NO_GAIN && g.n == 4,
          "the same rate over four is no gain (end %d, n %d)", g.end, g.n);
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
    CHECK(run(&g, &p, 0.7, 20e6, 0, 0, NULL) == 3, "probed with three more");
    CHECK(run(&g, &p, 1.0, 60e6, 0, 0, NULL) == 4, "four more after a gain");
    CHECK(run(&g, &p, 3, 61e6, 0, 0, NULL) == 0 && g.end == GROWTH_NO_GAIN && g.n == 8,
          "no more once a doubling gains nothing (end %d, n %d)", g.end, g.n);
}

/* The limit; joins that fail; a fixed count. */
static void limits(void)
{
    struct growth g;
    growth_init(&g, 1, 3);
    struct path p = {.rtt_ms = 10, .says = true};
    for (int i = 0; i < 60; i++)   /* the total scales with the connections */
        run(&g, &p, 0.1, 10e6 * g.n, 1.0, 1.0, NULL);
    CHECK(g.n == 3 && g.end == GROWTH_AT_MOST, "at most 3 (%d, end %d)", g.n, g.end);

    growth_init(&g, 1, 16);
    p = (struct path){.rtt_ms = 10, .says = true};
    int k = 0;
    for (int i = 0; i < 40 && !k; i++) {
        p.now += 0.1;
        p.bytes += 1000000;
        p.busy[0] += 100000;
        p.limited[0] += 100000;
        struct growth_sample s = sample_of(&p, 1);
        k = growth_sample(&g, &s);
    }
    CHECK(k == 3, "asked for three");
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
    struct path p = {.now = 10, .bytes = 1000000, .rtt_ms = 20, .says = true};
    p.busy[0] = p.limited[0] = 900000;
    struct growth_sample s = sample_of(&p, 1);
    CHECK(growth_sample(&g, &s) == 0, "a first sample begins a period");
    s.now = 10.6;
    s.bytes = 10;   /* fewer bytes than before */
    CHECK(growth_sample(&g, &s) == 0, "counters that went back begin it again");
    s.now = 11.2;
    s.bytes = 30000000;
    s.busy_us[0] = s.limited_us[0] = 1500000;
    CHECK(growth_sample(&g, &s) == 0, "a whole period after that is judged, and is no baseline");
    s.now = 11.8;
    s.bytes = 60000000;
    s.busy_us[0] = s.limited_us[0] = 2100000;
    CHECK(growth_sample(&g, &s) == 3, "two are");
    growth_added(&g, 3);
    s.n = 1;   /* a sample from before the join took effect */
    s.now = 12;
    CHECK(growth_sample(&g, &s) == 0, "a sample of another count of connections begins again");
}

/* The new connections' slow start: the total is judged only once they
 * are past it (window-limited themselves, or after GROWTH_SETTLE_MAX
 * periods), and nothing is added meanwhile. */
static void slow_start(void)
{
    struct growth g;
    growth_init(&g, 1, 16);
    struct path p = {.rtt_ms = 100, .says = true, .slow_for = 0.9};
    p.since[0] = -1000;   /* the first is past its slow start */
    CHECK(run(&g, &p, 0.7, 25e6, 1.0, 1.0, NULL) == 3, "three more when the first is limited");
    CHECK(run(&g, &p, 0.7, 25e6, 1.0, 1.0, NULL) == 0 && g.settling && g.end == GROWTH_ON,
          "no judgement, and none added, while the new ones are in slow start");
    int at = 0;
    CHECK(run(&g, &p, 0.6, 100e6, 1.0, 1.0, &at) == 4 && at == 4,
          "once they are window-limited, the gain is judged and four more join");
}

/* A first connection in its first slow start whose window is within three
 * doublings of the most its send buffer grows to probes at once, up to the
 * limit, unless a queue has built on the path or the figures are unknown;
 * once the probe's connections are past their slow start, its total over
 * what one window moves says how many stay. */
static void foresight(void)
{
    struct growth g;
    growth_init(&g, 1, 8);
    struct path p = {.rtt_ms = 100, .says = true, .min_rtt_ms = 100, .ss_most = 4000000,
                     .slow_for = 0.5};
    p.ss_window = 400000;
    CHECK(run(&g, &p, 0.1, 5e6, 1.0, 0.0, NULL) == 0,
          "a window more than three doublings from the most: nothing");
    p.ss_window = 600000;
    p.rtt_ms = 160;
    CHECK(run(&g, &p, 0.1, 10e6, 1.0, 0.0, NULL) == 0,
          "a round trip risen by half (a queue at a bottleneck): nothing foreseen");
    p.rtt_ms = 100;
    p.ss_most = 0;
    CHECK(run(&g, &p, 0.1, 10e6, 1.0, 0.0, NULL) == 0, "the most unknown: nothing foreseen");
    p.ss_most = 4000000;
    CHECK(run(&g, &p, 0.1, 10e6, 1.0, 0.0, NULL) == 7 && g.n == 8 && g.foresaw,
          "within three doublings, in slow start: a probe to the limit at once, not after a "
          "period");
    CHECK(g.one > 19.9e6 && g.one < 20.1e6,
          "what one connection's window moves is half the send buffer's most a round trip "
          "(%.0f)", g.one);
    CHECK(run(&g, &p, 0.4, 50e6, 1.0, 0.9, NULL) == 0 && p.left == 0 && g.end == GROWTH_ON,
          "nothing leaves while the probe's connections are in slow start");
    CHECK(run(&g, &p, 1.0, 50e6, 1.0, 0.9, NULL) == 0 && p.left == 5 && g.n == 3 &&
              g.end == GROWTH_SIZED,
          "50 MB/s over windows of 20 each: three carry on, five leave (%d left)", p.left);
    CHECK(run(&g, &p, 2.0, 50e6, 1.0, 1.0, NULL) == 0 && p.left == 5,
          "after the probe, nothing more is added or let go");

    /* a link that one connection fills: all but the first leave */
    growth_init(&g, 1, 8);
    p = (struct path){.rtt_ms = 100, .says = true, .min_rtt_ms = 100, .ss_most = 4000000,
                      .ss_window = 2100000};
    CHECK(run(&g, &p, 0.1, 10e6, 1.0, 0.0, NULL) == 7, "foreseen again on a new rule");
    CHECK(run(&g, &p, 3.0, 15e6, 1.0, 0.2, NULL) == 0 && p.left == 7 && g.n == 1,
          "15 MB/s, which one window carries (never window-limited: judged after the "
          "longest settling): the probe's seven leave (%d)", p.left);

    /* the data slow while the probe is judged (a producer, not the path):
     * nothing is judged, nothing leaves, until the path is what limits */
    growth_init(&g, 1, 8);
    p = (struct path){.rtt_ms = 100, .says = true, .min_rtt_ms = 100, .ss_most = 4000000,
                      .ss_window = 2100000};
    CHECK(run(&g, &p, 0.1, 10e6, 1.0, 0.0, NULL) == 7, "a probe, then a slow producer");
    CHECK(run(&g, &p, 3.0, 2e6, 0.2, 1.0, NULL) == 0 && p.left == 0 && g.end == GROWTH_ON,
          "busy a fifth of the time: the probe is not judged, all eight stay (%d left)",
          p.left);
    CHECK(run(&g, &p, 1.0, 50e6, 1.0, 1.0, NULL) == 0 && p.left == 5 && g.n == 3,
          "busy again at 50 MB/s: judged then, three stay (%d left)", p.left);

    /* a link that needs them all: none leaves, and the growth is over */
    growth_init(&g, 1, 8);
    p = (struct path){.rtt_ms = 100, .says = true, .min_rtt_ms = 100, .ss_most = 4000000,
                      .ss_window = 3000000};
    CHECK(run(&g, &p, 0.1, 10e6, 1.0, 0.0, NULL) == 7, "a probe from a larger window");
    CHECK(g.one > 19.9e6 && g.one < 20.1e6, "whatever the window when foreseen (%.0f)", g.one);
    CHECK(run(&g, &p, 2.0, 180e6, 1.0, 1.0, NULL) == 0 && p.left == 0 && g.n == 8 &&
              g.end == GROWTH_SIZED,
          "180 MB/s: all eight stay, and nothing more is asked");
}

int main(void)
{
    window_limited();
    no_gain();
    stalls();
    not_the_window();
    says_nothing();
    limits();
    going_back();
    slow_start();
    foresight();
    CHECK_DONE();
}
