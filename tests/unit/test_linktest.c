/*
 * test_linktest.c - a link test's pieces that need no network: the 'L'
 * record survives a round trip for every op and is rejected with any byte
 * flipped or any reserved field set; a data connection's token depends on
 * the secret, the test, the direction and the index, and on nothing else;
 * the sweeps; the verdict on duplex from figures made up to be full duplex,
 * half duplex, over loopback and CPU-bound; the table's lines.
 */
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "check.h"
#include "cli/report.h"
#include "format/codec.h"
#include "linktest/linktest.h"

static void records(void)
{
    static const unsigned char ops[] = "HWJRUNMPQE";
    for (size_t i = 0; i < sizeof ops - 1; i++) {
        struct codec_link l = {.op = ops[i], .n = 7 + (uint32_t)i, .a = 0x1122334455667788ull,
                               .b = 99, .c = 1ull << 40};
        if (ops[i] == CODEC_LINK_RUN)
            l.dir = CODEC_LINK_BOTH;
        if (ops[i] == CODEC_LINK_JOIN)
            l.dir = CODEC_LINK_IN;
        for (int k = 0; k < CODEC_TOKEN_SIZE; k++)
            l.token[k] = (unsigned char)(k * 17 + i);
        unsigned char rec[CODEC_LINK_SIZE];
        CHECK(codec_link(rec, &l) == CODEC_LINK_SIZE, "an L record is 64 bytes");
        CHECK(codec_record_length(rec) == CODEC_LINK_SIZE, "its length word says so");
        struct codec_record r;
        char why[96];
        CHECK(codec_parse_record(rec, sizeof rec, &r, why, sizeof why) == 0, "op %c: %s",
              ops[i], why);
        CHECK(r.type == 'L' && r.link.op == l.op && r.link.dir == l.dir && r.link.n == l.n &&
              r.link.a == l.a && r.link.b == l.b && r.link.c == l.c &&
              memcmp(r.link.token, l.token, CODEC_TOKEN_SIZE) == 0, "op %c round trip", ops[i]);
        /* any flipped bit is caught, by the length word, the checksum or both */
        for (size_t b = 0; b < sizeof rec * 8; b++) {
            unsigned char bad[CODEC_LINK_SIZE];
            memcpy(bad, rec, sizeof bad);
            bad[b / 8] ^= (unsigned char)(1u << (b % 8));
            CHECK(codec_parse_record(bad, sizeof bad, &r, why, sizeof why) != 0,
                  "op %c with bit %zu flipped is rejected", ops[i], b);
        }
    }
    /* well sealed, but not a valid record: an unknown op, a reserved byte, a
     * direction where none belongs or the wrong one */
    struct {
        unsigned char op, dir, at11;
        const char *what;
    } bad[] = {
        {'X', 0, 0, "an unknown op"},
        {CODEC_LINK_PING, 0, 1, "byte 11 set"},
        {CODEC_LINK_PING, CODEC_LINK_OUT, 0, "a ping with a direction"},
        {CODEC_LINK_RUN, 0, 0, "a run without one"},
        {CODEC_LINK_RUN, 'Z', 0, "a run with an unknown one"},
        {CODEC_LINK_JOIN, CODEC_LINK_BOTH, 0, "a join both ways"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct codec_link l = {.op = bad[i].op, .dir = bad[i].dir};
        unsigned char rec[CODEC_LINK_SIZE];
        codec_link(rec, &l);
        rec[11] = bad[i].at11;
        codec_put64(rec + 56, XXH3_64bits(rec, 56));   /* sealed again, as a forger would */
        struct codec_record r;
        char why[96];
        CHECK(codec_parse_record(rec, sizeof rec, &r, why, sizeof why) != 0 &&
              strstr(why, "malformed weir link-test record"), "%s is refused", bad[i].what);
    }
    /* a tester's greeting */
    unsigned char g[CODEC_GREETING_SIZE];
    codec_greeting(g, CODEC_ROLE_TESTER, CODEC_FEATURE_KEY);
    struct codec_record r;
    char why[96];
    CHECK(codec_parse_record(g, sizeof g, &r, why, sizeof why) == 0 &&
          r.role == CODEC_ROLE_TESTER && r.features == CODEC_FEATURE_KEY, "a tester's greeting");
}

static void tokens(void)
{
    unsigned char s1[LINKTEST_SECRET_SIZE] = {1}, s2[LINKTEST_SECRET_SIZE] = {2};
    unsigned char t[6][CODEC_TOKEN_SIZE], again[CODEC_TOKEN_SIZE];
    CHECK(linktest_token(s1, 42, CODEC_LINK_OUT, 0, t[0]) == 0, "a token");
    CHECK(linktest_token(s1, 42, CODEC_LINK_OUT, 0, again) == 0 &&
          memcmp(t[0], again, sizeof again) == 0, "the same inputs give the same token");
    CHECK(linktest_token(s2, 42, CODEC_LINK_OUT, 0, t[1]) == 0, "another secret");
    CHECK(linktest_token(s1, 43, CODEC_LINK_OUT, 0, t[2]) == 0, "another test");
    CHECK(linktest_token(s1, 42, CODEC_LINK_IN, 0, t[3]) == 0, "another direction");
    CHECK(linktest_token(s1, 42, CODEC_LINK_OUT, 1, t[4]) == 0, "another index");
    CHECK(linktest_token(s1, 42, CODEC_LINK_OUT, 1u << 24, t[5]) == 0, "a high index");
    for (int i = 0; i < 6; i++)
        for (int j = i + 1; j < 6; j++)
            CHECK(memcmp(t[i], t[j], CODEC_TOKEN_SIZE) != 0, "tokens %d and %d differ", i, j);
}

static void sweeps(void)
{
    uint32_t s[LINKTEST_SIZES_MAX];
    CHECK(linktest_sweep("short", s) == 3 && s[0] == 1024 && s[1] == 65536 && s[2] == 1048576,
          "the short sweep");
    CHECK(linktest_sweep("full", s) == 11 && s[0] == 1024 && s[10] == 1048576, "the full sweep");
    for (int i = 1; i < 11; i++)
        CHECK(s[i] == 2 * s[i - 1], "the full sweep doubles");
    CHECK(linktest_sweep("fast", s) == 0, "an unknown sweep");
    char b[32];
    linktest_size_name(1024, b, sizeof b);
    CHECK(strcmp(b, "1 KiB") == 0, "1 KiB: %s", b);
    linktest_size_name(4u << 20, b, sizeof b);
    CHECK(strcmp(b, "4 MiB") == 0, "4 MiB: %s", b);
    linktest_size_name(1536 * 1024, b, sizeof b);
    CHECK(strcmp(b, "1536 KiB") == 0, "1536 KiB: %s", b);
    linktest_size_name(1500, b, sizeof b);
    CHECK(strcmp(b, "1500 B") == 0, "1500 B: %s", b);
}

static void figure(struct linktest_figure *f, double rate, double cpu)
{
    f->done = true;
    f->bytes = (uint64_t)rate;
    f->secs = 1;
    f->rate = rate;
    f->cpu_here = f->cpu_there = cpu;
}

/* One row of made-up figures: one way alone, and each way at once. */
static void made_up(struct linktest_result *r, double one, double both_each, double cpu)
{
    memset(r, 0, sizeof *r);
    snprintf(r->listener, sizeof r->listener, "dst:9090");
    snprintf(r->peer, sizeof r->peer, "192.0.2.7:9090");
    r->parallel = 1;
    r->duration = 2;
    r->cpus_here = r->cpus_there = 8;
    r->nrows = 2;
    r->rows[0].size = 1024;
    figure(&r->rows[0].fig[LINKTEST_OUT], one / 2, cpu);
    figure(&r->rows[0].fig[LINKTEST_IN], one / 2, cpu);
    figure(&r->rows[0].fig[LINKTEST_BOTH_OUT], both_each / 2, cpu);
    figure(&r->rows[0].fig[LINKTEST_BOTH_IN], both_each / 2, cpu);
    r->rows[1].size = 65536;
    figure(&r->rows[1].fig[LINKTEST_OUT], one, cpu);
    figure(&r->rows[1].fig[LINKTEST_IN], one * 0.9, cpu);
    figure(&r->rows[1].fig[LINKTEST_BOTH_OUT], both_each, cpu);
    figure(&r->rows[1].fig[LINKTEST_BOTH_IN], both_each, cpu);
}

static void verdicts(void)
{
    struct linktest_result r;
    made_up(&r, 100e6, 98e6, 0.2);
    linktest_judge(&r);
    CHECK(r.duplex == LINKTEST_DUPLEX_FULL && r.duplex_row == 1 && !r.cpu_bound,
          "both ways at once near twice one way: full duplex (%s)", r.verdict);
    CHECK(strstr(r.verdict, "1.96 times") && strstr(r.verdict, "(64 KiB writes): full duplex"),
          "the verdict says the ratio and the size: %s", r.verdict);
    made_up(&r, 100e6, 50e6, 0.2);
    linktest_judge(&r);
    CHECK(r.duplex == LINKTEST_DUPLEX_HALF && strstr(r.verdict, "probably half duplex") &&
          !strstr(r.verdict, "but"), "both ways at once as much as one: half duplex (%s)",
          r.verdict);
    r.loopback = true;
    linktest_judge(&r);
    CHECK(strstr(r.verdict, "over loopback"), "over loopback the verdict says so: %s", r.verdict);
    made_up(&r, 100e6, 50e6, 1.9);   /* two threads each end, both near a core */
    linktest_judge(&r);
    CHECK(r.cpu_bound && strstr(r.verdict, "busy on CPU"), "a busy end is named: %s",
          r.verdict);
    made_up(&r, 100e6, 50e6, 0.2);
    r.rows[1].fig[LINKTEST_BOTH_IN].done = false;
    r.rows[0].fig[LINKTEST_OUT].done = false;
    linktest_judge(&r);
    CHECK(r.duplex == LINKTEST_DUPLEX_UNKNOWN && r.duplex_row < 0 &&
          strstr(r.verdict, "not measured"), "no row with every direction: unknown");

    /* the table: a line each for the test, the round trip, the columns, each
     * row, which way is which, and the verdict; a missing figure is "-" */
    made_up(&r, 100e6, 98e6, 0.2);
    r.pings = 20;
    r.rtt_median = 0.000412;
    r.rtt_min = 0.00038;
    r.rtt_max = 0.000905;
    r.rows[0].fig[LINKTEST_IN].done = false;
    linktest_judge(&r);
    char text[4096];
    stats_link_table(&r, text, sizeof text);
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    CHECK(lines == 7, "the table has 7 lines:\n%s", text);
    const char *first = "link test to dst:9090 (192.0.2.7:9090): 1 connection each way, 2 s a "
                        "measurement, no key\n";
    CHECK(strncmp(text, first, strlen(first)) == 0, "the first line:\n%s", text);
    CHECK(strstr(text, "\nround trip: 0.412 ms (median of 20; 0.380 to 0.905 ms)\n"),
          "the round trip:\n%s", text);
    CHECK(strstr(text, "     1 KiB    47.7 MiB/s             -"), "a missing figure:\n%s", text);
    CHECK(strstr(text, "\nduplex: both ways at once carried 1.96 times"), "the verdict:\n%s",
          text);
    char small[200];
    stats_link_table(&r, small, sizeof small);
    CHECK(strlen(small) < sizeof small && small[strlen(small) - 1] == '\n',
          "a short buffer gets whole lines only");
}

int main(void)
{
    records();
    tokens();
    sweeps();
    verdicts();
    CHECK_DONE();
}
