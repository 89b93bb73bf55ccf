/*
 * test_options.c - sizes parse as documented and options combine correctly.
 */
#include <string.h>

#include "check.h"
#include "cli/progress.h"
#include "options/options.h"

/* s as progress lines write it */
static int json_is(const char *s, const char *want)
{
    char out[256];
    size_t n = progress_json_string(out, 0, sizeof out, s);
    return n == strlen(want) && memcmp(out, want, n) == 0;
}

static int parse(struct weir_options *o, struct weir_error *e, const char *a1,
                 const char *a2, const char *a3, const char *a4)
{
    char *argv[6] = {"weir", (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
    int argc = 1;
    while (argc < 5 && argv[argc])
        argc++;
    return options_parse(argc, argv, o, e);
}

int main(void)
{
    struct { const char *s; uint64_t v; } good[] = {
        {"0", 0}, {"12", 12}, {"4k", 4096}, {"4K", 4096}, {"1.5M", 1572864},
        {"2G", 2147483648ull}, {"1T", 1099511627776ull}, {"64MiB", 67108864},
        {"10B", 10}, {"3kB", 3072},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        uint64_t v;
        CHECK(options_parse_size(good[i].s, &v) == 0 && v == good[i].v, "size %s", good[i].s);
    }
    const char *badsz[] = {"", "k", "12q", "-1", "1.5", "4kk", "1e3", " 4k", "4k ", "nan",
                           "99999999999T"};
    for (size_t i = 0; i < sizeof badsz / sizeof *badsz; i++) {
        uint64_t v;
        CHECK(options_parse_size(badsz[i], &v) != 0, "bad size '%s' accepted", badsz[i]);
    }

    struct weir_options o;
    struct weir_error e;
    CHECK(parse(&o, &e, NULL, NULL, NULL, NULL) == 0, "defaults: %s", e.msg);
    CHECK(o.noutputs == 0 && !o.listen && o.nblocks == o.mem / o.block, "defaults");
    CHECK(parse(&o, &e, "-m", "1M", "-s", "4k") == 0 && o.nblocks == 256, "-m 1M -s 4k");
    CHECK(parse(&o, &e, "-b", "10", "-s", "1k") == 0 && o.mem == 10240, "-b 10 -s 1k");
    CHECK(parse(&o, &e, "-m", "10k", "-b", "5") == 0 && o.block == 2048, "-m -b");
    CHECK(parse(&o, &e, "-I", "host:123", NULL, NULL) == 0 &&
          strcmp(o.allow_host, "host") == 0 && strcmp(o.listen_port, "123") == 0, "-I h:p");
    CHECK(parse(&o, &e, "-I", "0", NULL, NULL) == 0 && !o.allow_host[0], "-I 0");
    CHECK(parse(&o, &e, "-O", "[::1]:80", "-O", "h:9") == 0 && o.noutputs == 2 &&
          strcmp(o.outputs[0].host, "::1") == 0 && strcmp(o.outputs[1].port, "9") == 0,
          "two -O");
    CHECK(parse(&o, &e, "-T", "3", "-z", NULL) == 0 && o.threads == 3 && o.compress &&
          o.level == 1, "-T 3 -z");
    CHECK(parse(&o, &e, "--compress=9", NULL, NULL, NULL) == 0 && o.level == 9, "level");
    CHECK(parse(&o, &e, "-m", "50%", NULL, NULL) == 0 && o.mem > 0, "-m 50%%");
    CHECK(parse(&o, &e, "-s", "1G", "-m", "1G") != 0, "one block is too few");
    CHECK(e.status == WEIR_EXIT_USAGE, "usage status");
    CHECK(parse(&o, &e, "-z", "-I", "0", NULL) != 0, "-z -I is refused");
    CHECK(parse(&o, &e, "-z", "-I", "0", "--raw") == 0, "-z -I --raw parses");
    CHECK(parse(&o, &e, "--zstd", NULL, NULL, NULL) == 0 && o.block == 4u << 20 &&
          o.mem == 512u << 20, "--zstd: 4 MiB blocks (%llu)", (unsigned long long)o.block);
    CHECK(parse(&o, &e, "--adapt", "-s", "1M", NULL) == 0 && o.block == 1u << 20,
          "--adapt -s 1M keeps -s");
    CHECK(parse(&o, &e, "--zstd", "-m", "32M", NULL) == 0 && o.block == 1u << 20,
          "--zstd -m 32M: 1 MiB blocks, 16 of 4 MiB do not fit");
    CHECK(parse(&o, &e, "--zstd", "-b", "10", NULL) == 0 && o.block == 1u << 20 &&
          o.mem == 10u << 20, "--zstd -b 10 keeps the 1 MiB default");
    CHECK(parse(&o, &e, "-e", NULL, NULL, NULL) == 0 && o.stop_on_error, "-e");
    CHECK(parse(&o, &e, NULL, NULL, NULL, NULL) == 0 && !o.sparse, "no --sparse");
    {
        struct weir_config c;
        CHECK(parse(&o, &e, "--sparse", "-z", NULL, NULL) == 0 && o.sparse, "--sparse -z");
        options_to_config(&o, &c);
        CHECK(c.sparse && c.compress, "--sparse reaches the engine");
    }
    CHECK(parse(&o, &e, "--sparse", "-I", "0", NULL) != 0 && strstr(e.msg, "--sparse with -I"),
          "--sparse -I without --raw is refused (a weir stream's holes are its sender's): %s",
          e.msg);
    CHECK(parse(&o, &e, "--sparse", "--raw", "-I", "0") == 0, "--sparse --raw -I (plain bytes)");
    CHECK(parse(&o, &e, "--sparse", "-d", NULL, NULL) != 0 && strstr(e.msg, "--sparse with -d"),
          "--sparse -d is refused: %s", e.msg);

    /* --progress and --interval */
    CHECK(parse(&o, &e, NULL, NULL, NULL, NULL) == 0 && !o.progress, "no --progress");
    CHECK(parse(&o, &e, "--progress=json", NULL, NULL, NULL) == 0 && o.progress &&
          !o.progress_to_fd && !o.progress_path && o.interval == 1, "--progress=json");
    CHECK(parse(&o, &e, "--progress=json=3", "--interval", "0.2", NULL) == 0 &&
          o.progress_to_fd && o.progress_fd == 3 && o.interval == 0.2, "json=3 --interval 0.2");
    CHECK(parse(&o, &e, "--progress", "json=./3", NULL, NULL) == 0 && !o.progress_to_fd &&
          strcmp(o.progress_path, "./3") == 0, "json=./3 is a file");
    CHECK(parse(&o, &e, "--progress=json=p.jsonl", NULL, NULL, NULL) == 0 &&
          strcmp(o.progress_path, "p.jsonl") == 0, "json=PATH");
    const char *bad_progress[][2] = {
        {"--progress=xml", NULL}, {"--progress=json=", NULL}, {"--progress=jsonl", NULL},
        {"--progress=json=99999999999", NULL}, {"--interval", "1"},
        {"--progress=json", "--interval=0"}, {"--progress=json", "--interval=nan"},
        {"--progress=json", "--interval=9999999"}, {"--progress=json", "--progress=json"},
    };
    for (size_t i = 0; i < sizeof bad_progress / sizeof *bad_progress; i++) {
        CHECK(parse(&o, &e, bad_progress[i][0], bad_progress[i][1], NULL, NULL) != 0 &&
              e.status == WEIR_EXIT_USAGE, "%s %s accepted", bad_progress[i][0],
              bad_progress[i][1] ? bad_progress[i][1] : "");
    }

    /* JSON strings: escapes, UTF-8 kept, other bytes as \u00XX */
    CHECK(json_is(NULL, "null"), "NULL");
    CHECK(json_is("plain", "\"plain\""), "plain");
    CHECK(json_is("a\"b\nc", "\"a\\\"b\\nc\""), "quote and newline");
    CHECK(json_is("\\\t\r\b\f\001\177", "\"\\\\\\t\\r\\b\\f\\u0001\\u007f\""), "controls");
    CHECK(json_is("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""),
          "UTF-8 is kept");
    CHECK(json_is("\xff\xc3h", "\"\\u00ff\\u00c3h\""), "bytes that are not UTF-8");
    CHECK(json_is("\xc0\xaf", "\"\\u00c0\\u00af\""), "an overlong form");
    CHECK(json_is("\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\""), "a surrogate");
    CHECK(json_is("\xf4\x90\x80\x80", "\"\\u00f4\\u0090\\u0080\\u0080\""), "above U+10FFFF");
    CHECK(json_is("\xe2\x82", "\"\\u00e2\\u0082\""), "a cut sequence");
    char small[8];
    CHECK(progress_json_string(small, 0, sizeof small, "\xff\xff") == 0, "no room: 0");
    CHECK(progress_json_string(small, 0, sizeof small, "abcde") == 7, "just room");
    CHECK_DONE();
}
