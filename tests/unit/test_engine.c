/*
 * test_engine.c - the engine, driven through its public header (weir.h)
 * over pipes, without the command line: pass-through, -z and decoding,
 * a producer command, several outputs, and setup failures that must be
 * reported before anything runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "weir/weir.h"

struct feed {
    int fd;
    const unsigned char *data;
    size_t len;
};

/* Writes the data into a pipe, then closes it: the engine's input. */
static void *feeder(void *arg)
{
    struct feed *f = arg;
    for (size_t off = 0; off < f->len;) {
        ssize_t w = write(f->fd, f->data + off, f->len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    close(f->fd);
    return NULL;
}

struct drain {
    int fd;
    unsigned char *buf;
    size_t len, cap;
};

/* Reads a pipe to its end: the engine's output. */
static void *drainer(void *arg)
{
    struct drain *d = arg;
    for (;;) {
        if (d->len == d->cap) {
            d->cap = d->cap ? d->cap * 2 : 65536;
            d->buf = realloc(d->buf, d->cap);
            if (!d->buf)
                abort();
        }
        ssize_t r = read(d->fd, d->buf + d->len, d->cap - d->len);
        if (r <= 0)
            break;
        d->len += (size_t)r;
    }
    close(d->fd);
    return NULL;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (i / 1000) % 3 == 0 ? (unsigned char)(seed >> 16) : (unsigned char)('a' + i % 7);
    }
}

static char in_path[64], out_path[2][64];

/* Run the engine on data through pipes with cfg's buffer and transform,
 * nout outputs; returns the exit status and what each output received. */
static int run_pipes(struct weir_config *cfg, const unsigned char *data, size_t len, int nout,
                     struct drain *got)
{
    int in[2], out[2][2];
    CHECK(pipe(in) == 0, "pipe");
    snprintf(in_path, sizeof in_path, "/proc/self/fd/%d", in[0]);
    cfg->input = WEIR_IN_FILE;
    cfg->input_path = in_path;
    cfg->noutputs = nout;
    for (int i = 0; i < nout; i++) {
        CHECK(pipe(out[i]) == 0, "pipe");
        snprintf(out_path[i], sizeof out_path[i], "/proc/self/fd/%d", out[i][1]);
        cfg->outputs[i] = (struct weir_output){.kind = WEIR_OUT_FILE, .path = out_path[i]};
    }
    struct weir_log log;
    log_init(&log, true, 0);
    struct weir_engine *e = NULL;
    struct weir_error err;
    int rc = weir_create(cfg, &log, &e, &err);
    CHECK(rc == 0, "weir_create: %s", err.msg);
    /* the engine opened its own descriptors for the pipes: ours may go */
    close(in[0]);
    for (int i = 0; i < nout; i++)
        close(out[i][1]);
    pthread_t tf, td[2];
    struct feed f = {.fd = in[1], .data = data, .len = len};
    pthread_create(&tf, NULL, feeder, &f);
    for (int i = 0; i < nout; i++) {
        got[i] = (struct drain){.fd = out[i][0]};
        pthread_create(&td[i], NULL, drainer, &got[i]);
    }
    struct weir_observer obs = {0};
    int status = weir_run(e, &obs);
    CHECK(weir_succeeded(e) == (status == 0), "weir_succeeded agrees with the status");
    weir_destroy(e);   /* closes the engine's output descriptors: the drains end */
    pthread_join(tf, NULL);
    for (int i = 0; i < nout; i++)
        pthread_join(td[i], NULL);
    return status;
}

static void round_trip(size_t len, uint64_t block, bool z)
{
    unsigned char *data = malloc(len + 1), *packed;
    fill(data, len, (unsigned)len);
    struct weir_config cfg;
    weir_config_defaults(&cfg);
    cfg.block = block;
    cfg.mem = block * 8;
    cfg.compress = z;
    struct drain a[1], b[1];
    CHECK(run_pipes(&cfg, data, len, 1, a) == 0, "engine %s of %zu bytes", z ? "-z" : "copy",
          len);
    packed = a[0].buf;
    size_t plen = a[0].len;
    if (z) {
        weir_config_defaults(&cfg);
        cfg.decode = true;
        CHECK(run_pipes(&cfg, packed, plen, 1, b) == 0, "engine -d of %zu bytes", plen);
        free(packed);
        packed = b[0].buf;
        plen = b[0].len;
    }
    CHECK(plen == len && (len == 0 || memcmp(packed, data, len) == 0),
          "round trip of %zu bytes (block %llu, %s): got %zu", len,
          (unsigned long long)block, z ? "-z then -d" : "copy", plen);
    free(packed);
    free(data);
}

static void two_outputs(void)
{
    size_t len = 3000001;
    unsigned char *data = malloc(len);
    fill(data, len, 7);
    struct weir_config cfg;
    weir_config_defaults(&cfg);
    struct drain got[2];
    CHECK(run_pipes(&cfg, data, len, 2, got) == 0, "two outputs");
    for (int i = 0; i < 2; i++) {
        CHECK(got[i].len == len && memcmp(got[i].buf, data, len) == 0, "output %d complete", i);
        free(got[i].buf);
    }
    free(data);
}

/* Setup failures are reported by weir_create, before a thread runs. */
static void setup_failures(void)
{
    struct weir_log log;
    log_init(&log, true, 0);
    struct weir_config cfg;
    struct weir_engine *e = NULL;
    struct weir_error err;
    weir_config_defaults(&cfg);
    cfg.input = WEIR_IN_FILE;
    cfg.input_path = "/nonexistent/weir-test-input";
    CHECK(weir_create(&cfg, &log, &e, &err) != 0 && err.status == WEIR_EXIT_INPUT &&
          strstr(err.msg, "No such file"), "a missing input: %s", err.msg);
    weir_destroy(e);
    weir_config_defaults(&cfg);
    static char *const missing[] = {"weir-no-such-command", NULL};
    cfg.input = WEIR_IN_COMMAND;
    cfg.command = missing;
    e = NULL;
    CHECK(weir_create(&cfg, &log, &e, &err) != 0 && err.status == WEIR_EXIT_INPUT &&
          strstr(err.msg, "producer 'weir-no-such-command': cannot run it"),
          "a producer that cannot start: %s", err.msg);
    weir_destroy(e);
}

/* A producer command: its output is the input, its exit status counts. */
static void producer(const char *script, int want, size_t want_len)
{
    int out[2];
    CHECK(pipe(out) == 0, "pipe");
    snprintf(out_path[0], sizeof out_path[0], "/proc/self/fd/%d", out[1]);
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    struct weir_config cfg;
    weir_config_defaults(&cfg);
    cfg.input = WEIR_IN_COMMAND;
    cfg.command = argv;
    cfg.noutputs = 1;
    cfg.outputs[0] = (struct weir_output){.kind = WEIR_OUT_FILE, .path = out_path[0]};
    struct weir_log log;
    log_init(&log, true, 0);
    struct weir_engine *e = NULL;
    struct weir_error err;
    CHECK(weir_create(&cfg, &log, &e, &err) == 0, "weir_create with a producer: %s", err.msg);
    close(out[1]);
    struct drain d = {.fd = out[0]};
    pthread_t t;
    pthread_create(&t, NULL, drainer, &d);
    struct weir_observer obs = {0};
    int status = weir_run(e, &obs);
    weir_destroy(e);
    pthread_join(t, NULL);
    CHECK(status == want, "producer '%s': exit %d, want %d", script, status, want);
    /* a failed stream stops the writers wherever they are: only a complete
     * one has a known length */
    CHECK(want != 0 || d.len == want_len, "producer '%s': %zu bytes, want %zu", script, d.len,
          want_len);
    free(d.buf);
}

int main(void)
{
    struct weir_error err;
    CHECK(weir_signals_block(&err) == 0, "signals: %s", err.msg);
    size_t sizes[] = {0, 1, 4095, 4096, 4097, 1000003};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        round_trip(sizes[i], 4096, false);
        round_trip(sizes[i], 4096, true);
        round_trip(sizes[i], 1 << 20, true);
    }
    two_outputs();
    setup_failures();
    producer("head -c 100000 /dev/zero", 0, 100000);
    producer("head -c 100000 /dev/zero; exit 3", WEIR_EXIT_INPUT, 100000);
    CHECK_DONE();
}
