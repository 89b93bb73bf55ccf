/* progress.c - see progress.h. */
#include "cli/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/sync.h"
#include "cli/report.h"

/* A line holds every output's name escaped (at most 6 bytes a byte), a
 * message and the summary; 64 KiB is more than twice the worst case. */
#define LINE_MAX_BYTES (64u << 10)

/* ---- JSON ---------------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0: no
 * overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
        return 0;
    if (len == 4 && (cp < 0x10000 || cp > 0x10ffff))
        return 0;
    return len;
}

size_t progress_json_string(char *out, size_t len, size_t cap, const char *s)
{
    size_t at = len;
    if (!s) {
        if (cap - len < 4)
            return 0;
        memcpy(out + at, "null", 4);
        return 4;
    }
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    if (at >= cap)
        return 0;
    out[at++] = '"';
    for (size_t i = 0; i < n;) {
        char esc[8];
        size_t k = 0;
        size_t seq = utf8_sequence(p + i, n - i);
        unsigned c = p[i];
        const char *copy = NULL;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            k = 2;
        } else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') {
            esc[0] = '\\';
            esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : c == '\b' ? 'b' : 'f';
            k = 2;
        } else if (c < 0x20 || c == 0x7f || seq == 0) {
            /* a control character, or a byte that is not valid UTF-8 */
            k = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
            seq = 1;
        } else {
            copy = s + i;
            k = seq;
        }
        if (cap - at < k + 1)   /* and room for the closing quote */
            return 0;
        memcpy(out + at, copy ? copy : esc, k);
        at += k;
        i += seq ? seq : 1;
    }
    out[at++] = '"';
    return at - len;
}

struct line {
    char *p;
    size_t len, cap;
    bool overflow;
};

static void add(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(struct line *l, const char *fmt, ...)
{
    if (l->overflow)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(l->p + l->len, l->cap - l->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= l->cap - l->len)
        l->overflow = true;
    else
        l->len += (size_t)n;
}

static void add_string(struct line *l, const char *s)
{
    if (l->overflow)
        return;
    size_t n = progress_json_string(l->p, l->len, l->cap, s);
    if (n == 0)
        l->overflow = true;
    l->len += n;
}

static void add_u64(struct line *l, const char *key, uint64_t v)
{
    add(l, ",\"%s\":%llu", key, (unsigned long long)v);
}

/* A rate in bytes per second, rounded to a whole byte. */
static void add_rate(struct line *l, const char *key, double bytes, double secs)
{
    double v = secs > 0 && bytes > 0 ? bytes / secs : 0;
    add(l, ",\"%s\":%.0f", key, isfinite(v) ? v : 0);
}

/* What a counter gained since the previous line. */
static double gained(uint64_t now, uint64_t before)
{
    return now > before ? (double)(now - before) : 0;
}

/* ---- the target -------------------------------------------------------------- */

void progress_off(struct progress *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->target = PROGRESS_OFF;
    pr->fd = -1;
}

bool progress_on(const struct progress *pr)
{
    return pr->target != PROGRESS_OFF && !pr->stopped;
}

bool progress_on_stderr(const struct progress *pr)
{
    return pr->target == PROGRESS_STDERR || (pr->target == PROGRESS_FD && pr->fd == 2);
}

static double wall_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int progress_open(struct progress *pr, int fd, const char *path, double interval,
                  const bool closed[3], struct weir_log *log, struct weir_error *err)
{
    progress_off(pr);
    pr->log = log;
    pr->interval = interval;
    if (fd >= 0) {
        snprintf(pr->name, sizeof pr->name, "progress descriptor %d", fd);
        int fl = fd <= 2 && closed[fd] ? -1 : fcntl(fd, F_GETFL);
        if (fl < 0)
            return error_set(err, WEIR_EXIT_USAGE, "--progress=json=%d: descriptor %d is not "
                             "open (give it with %d>FILE)", fd, fd, fd);
        if ((fl & O_ACCMODE) == O_RDONLY)
            return error_set(err, WEIR_EXIT_USAGE, "--progress=json=%d: descriptor %d is not "
                             "open for writing", fd, fd);
        /* not for the commands weir runs: their reader would wait for
         * them too.  0-2 are theirs to share (a consumer writes weir's
         * standard output). */
        if (fd > 2 && fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
            return error_sys(err, WEIR_EXIT_USAGE, errno, "%s: fcntl", pr->name);
        pr->target = PROGRESS_FD;
        pr->fd = fd;
    } else if (path) {
        snprintf(pr->name, sizeof pr->name, "progress %s", path);
        /* not truncated yet: the engine may still find it is an input */
        int f = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
        if (f >= 0)
            pr->created = true;
        else if (errno == EEXIST)
            f = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (f < 0)
            return error_sys(err, WEIR_EXIT_USAGE, errno, "%s: open", pr->name);
        pr->target = PROGRESS_PATH;
        pr->fd = f;
        pr->path = path;
    } else {
        snprintf(pr->name, sizeof pr->name, "progress <stderr>");
        pr->target = PROGRESS_STDERR;
        pr->fd = STDERR_FILENO;
    }
    pr->buf = malloc(LINE_MAX_BYTES);
    if (!pr->buf) {
        progress_close(pr);
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "%s", pr->name);
    }
    pr->cap = LINE_MAX_BYTES;
    return 0;
}

void progress_config(const struct progress *pr, struct weir_config *cfg)
{
    /* standard error is weir's own, for its messages: not checked */
    if (pr->target == PROGRESS_FD || pr->target == PROGRESS_PATH) {
        cfg->progress_fd = pr->fd;
        cfg->progress_name = pr->name;
    }
}

void progress_close(struct progress *pr)
{
    if (pr->target == PROGRESS_PATH && pr->fd >= 0 && close(pr->fd) != 0 && errno != EINTR &&
        !pr->stopped)
        log_msg(pr->log, LOG_WARN, "%s: close: %s", pr->name, strerror(errno));
    free(pr->buf);
    progress_off(pr);
}

void progress_abandon(struct progress *pr)
{
    if (pr->target == PROGRESS_PATH && pr->created)
        (void)unlink(pr->path);   /* only what weir created, and nothing written */
    pr->created = false;
    pr->stopped = true;
}

/* The line failed: say so once (what failed, and why), and write no more. */
static void give_up(struct progress *pr, const char *what, const char *why)
{
    pr->stopped = true;
    log_msg(pr->log, LOG_WARN, "%s: %s: %s; no more progress lines (the transfer goes on)",
            pr->name, what, why);
}

/* Wait until fd can take a write, at most secs: 1 yes (or it has an error
 * that the write will tell), 0 not in time. */
static int writable(int fd, double secs)
{
    double until = clock_now() + secs;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        double left = until - clock_now();
        int r = poll(&pfd, 1, left > 0 ? (int)(left * 1000) + 1 : 0);
        if (r > 0)
            return 1;
        if (r == 0)
            return 0;
        if (errno != EINTR && errno != EAGAIN)
            return 1;   /* let write() say what is wrong */
    }
}

/* One write() that does not block.  poll() saying that a pipe can take a
 * write means room for a page, not for a line, and a blocking write() of
 * more would wait for the reader without bound, with the main thread (and
 * the signals it takes) behind it.  The descriptor may be shared (standard
 * error, a terminal, a pipe), so it is non-blocking only for this call, and
 * the caller holds the log's lock, which every message of weir's takes.
 * *flags_err: set when its flags could not be set back. */
static ssize_t write_now(int fd, const void *buf, size_t n, int *flags_err)
{
    int flags = fcntl(fd, F_GETFL);
    bool set = flags >= 0 && !(flags & O_NONBLOCK) &&
               fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
    ssize_t w = write(fd, buf, n);
    int e = errno;
    if (set && fcntl(fd, F_SETFL, flags) != 0)
        *flags_err = errno;
    errno = e;
    return w;
}

/* Write the line within wait seconds, or skip it. */
static void emit(struct progress *pr, struct line *l, double wait)
{
    if (l->overflow || l->len + 1 > l->cap) {
        /* cannot happen within the bounds above; never write half a line */
        give_up(pr, "write", strerror(EMSGSIZE));
        return;
    }
    l->p[l->len++] = '\n';
    double until = clock_now() + wait;
    if (!writable(pr->fd, wait))
        return;   /* skipped: its reader does not read */
    sync_lock(&pr->log->lock);
    size_t done = 0;
    int failed = 0, flags_err = 0;
    while (done < l->len && !flags_err) {
        ssize_t w = write_now(pr->fd, l->p + done, l->len - done, &flags_err);
        if (w > 0) {
            done += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN && done == 0)
            break;   /* it filled up since: skipped */
        if (w < 0 && errno == EAGAIN && writable(pr->fd, until - clock_now()))
            continue;
        failed = w < 0 && errno != EAGAIN ? errno : ETIMEDOUT;
        break;
    }
    sync_unlock(&pr->log->lock);
    if (failed == ETIMEDOUT) {
        char why[96];
        snprintf(why, sizeof why, "its reader took only part of a line in %g s", wait);
        give_up(pr, "write", why);
    } else if (failed) {
        give_up(pr, done ? "write (a line was cut short)" : "write", strerror(failed));
    } else if (flags_err) {
        give_up(pr, "fcntl (setting its flags back)", strerror(flags_err));
    }
}

/* ---- the lines ----------------------------------------------------------- */

/* What the outputs wrote: the slowest of those that did not fail (the
 * engine's out_bytes counts a failed one as done), or, when every one
 * failed, the most any of them wrote.  It never goes back: an output that
 * fails leaves the minimum to faster ones. */
static uint64_t written_out(const struct stats_snapshot *s)
{
    uint64_t slowest = UINT64_MAX, most = 0;
    for (int i = 0; i < s->noutputs; i++) {
        const struct stats_output *o = &s->outputs[i];
        if (o->bytes > most)
            most = o->bytes;
        if (o->state != STATS_OUT_FAILED && o->bytes < slowest)
            slowest = o->bytes;
    }
    if (s->noutputs == 0)
        return s->out_bytes;
    return slowest != UINT64_MAX ? slowest : most;
}

/* The user's data that bytes of the buffer hold: with -z the buffer holds
 * the compressed stream, taken at the ratio so far. */
static double data_of(const struct stats_snapshot *s, uint64_t bytes)
{
    if (!s->transform || s->decoding)
        return (double)bytes;
    double data = (double)(s->data_bytes - s->hole_bytes);
    double d = s->wire_bytes ? (double)bytes * data / (double)s->wire_bytes : 0;
    return d > data ? data : d;
}

/* What the outputs passed on, holes included, as written_out() takes it. */
static double done_out(const struct stats_snapshot *s)
{
    double slowest = -1, most = 0;
    for (int i = 0; i < s->noutputs; i++) {
        const struct stats_output *o = &s->outputs[i];
        double d = data_of(s, o->bytes) + (double)o->holes;
        if (d > most)
            most = d;
        if (o->state != STATS_OUT_FAILED && (slowest < 0 || d < slowest))
            slowest = d;
    }
    if (s->noutputs == 0)
        return data_of(s, s->out_bytes);
    return slowest >= 0 ? slowest : most;
}

/* The expected total and the share of it done (0 to 1).  --size counts
 * the user's data; so does a regular-file input's size, unless weir
 * decodes the file: then the data it holds is estimated from the file's
 * size at the ratio so far.  Done is the data the slowest output passed
 * on, holes included.  False: no total known. */
static bool progress_of(const struct stats_snapshot *s, uint64_t *total, double *share)
{
    double written = done_out(s);
    double data;
    if (s->expect) {
        *total = s->expect;
        data = (double)s->expect;
    } else if (s->input_size) {
        *total = s->input_size;
        data = (double)s->input_size;
        if (s->decoding && s->in_bytes >= s->input_size)
            data = (double)s->data_bytes;   /* read whole: its data is known */
        else if (s->decoding)
            data = s->in_bytes ? data * (double)s->data_bytes / (double)s->in_bytes : 0;
    } else {
        return false;
    }
    *share = data > 0 ? written / data : 0;
    if (*share > 1)
        *share = 1;
    return true;
}

static double wall_time(const struct progress *pr)
{
    return pr->real0 + (clock_now() - pr->mono0);
}

/* A connection's "streams" and, for each, its path as the system sees it
 * (null where it says nothing); other outputs have neither. */
static void add_paths(struct line *l, const struct stats_output *o)
{
    if (o->streams == 0)
        return;
    add(l, ",\"streams\":%u,\"connections\":[", o->streams);
    for (unsigned i = 0; i < o->streams && i < STATS_MAX_STREAMS; i++) {
        const struct stats_path *sp = &o->paths[i];
        add(l, "%s{\"rtt_ms\":", i ? "," : "");
        add(l, sp->known && sp->rtt_ms >= 0 ? "%.3f" : "null", sp->rtt_ms);
        add(l, ",\"cwnd\":");
        add(l, sp->known && sp->cwnd ? "%u" : "null", sp->cwnd);
        add(l, ",\"retrans\":");
        add(l, sp->known && sp->retrans != UINT64_MAX ? "%llu" : "null",
            (unsigned long long)sp->retrans);
        add(l, ",\"delivery_rate\":");
        add(l, sp->known && sp->delivery_rate ? "%llu" : "null",
            (unsigned long long)sp->delivery_rate);
        add(l, "}");
    }
    add(l, "]");
}

static void add_outputs(struct line *l, const struct stats_snapshot *s)
{
    add(l, ",\"outputs\":[");
    for (int i = 0; i < s->noutputs; i++) {
        const struct stats_output *o = &s->outputs[i];
        add(l, "%s{\"name\":", i ? "," : "");
        add_string(l, o->name);
        add(l, ",\"kind\":");
        add_string(l, o->kind);
        add_u64(l, "bytes", o->bytes);
        add_u64(l, "wire", o->net_bytes);
        add_u64(l, "holes", o->holes);
        add_u64(l, "reconnections", o->reconnections);
        add(l, ",\"state\":");
        add_string(l, stats_output_state_name(o->state));
        add_paths(l, o);
        add(l, "}");
    }
    add(l, "]");
}

/* The transform's fields: what it encoded, the codec and its levels. */
static void add_transform(struct line *l, const struct stats_snapshot *s)
{
    if (s->transform) {
        add_u64(l, "encoded", s->wire_bytes);
        add(l, ",\"codec\":\"%s\",\"level\":", s->codec ? s->codec : "lz4");
        add(l, s->level ? "%d" : "null", s->level);
        if (s->adapt && s->level_min <= s->level_max)
            add(l, ",\"levels_used\":[%d,%d]", s->level_min, s->level_max);
        else
            add(l, ",\"levels_used\":null");
        add(l, ",\"stored\":%s", s->stored ? "true" : "false");
    } else {
        add(l, ",\"encoded\":null,\"codec\":null,\"level\":null,\"levels_used\":null,"
            "\"stored\":null");
    }
}

/* The size, the share of it done and the time left, where they are known. */
static void add_size(struct line *l, const struct stats_snapshot *s, bool failed)
{
    uint64_t size;
    double share;
    bool known = progress_of(s, &size, &share);
    if (known && failed && share >= 1) {
        /* a failed transfer never claims all of it: what it counted as the
         * whole may be what it managed (a decode cut short, a corrupt end) */
        add(l, ",\"size\":%llu,\"percent\":null,\"eta\":null", (unsigned long long)size);
    } else if (known) {
        add(l, ",\"size\":%llu,\"percent\":%.1f", (unsigned long long)size, 100.0 * share);
        if (failed)
            add(l, ",\"eta\":null");
        else if (share >= 1)
            add(l, ",\"eta\":0");
        else if (share > 0 && s->elapsed > 0)
            add(l, ",\"eta\":%.1f", s->elapsed * (1 - share) / share);
        else
            add(l, ",\"eta\":null");
    } else {
        add(l, ",\"size\":null,\"percent\":null,\"eta\":null");
    }
}

/* Everything but the end line's own fields, without the closing brace. */
static void add_common(struct progress *pr, struct line *l, const char *event,
                       const struct stats_snapshot *s, enum stats_phase phase, bool failed)
{
    const struct stats_snapshot *p = &pr->last;
    l->len = 0;
    l->overflow = false;
    add(l, "{\"schema\":%d,\"time\":%.3f,\"event\":\"%s\",\"elapsed\":%.3f,\"phase\":",
        PROGRESS_SCHEMA, wall_time(pr), event, s->elapsed);
    add_string(l, stats_phase_name(phase));
    add(l, ",\"waiting_for\":");
    add_string(l, phase == STATS_DONE ? NULL : s->waiting);
    add_u64(l, "in", s->in_bytes);
    add_u64(l, "out", written_out(s));
    add_u64(l, "data", s->data_bytes);
    add_u64(l, "holes", s->hole_bytes);
    add_u64(l, "wire", s->net_bytes);
    add_u64(l, "reconnections", s->reconnections);
    add(l, ",\"reconnecting\":%s,\"gap_seconds\":%.3f", s->reconnecting ? "true" : "false",
        s->gap_secs);
    add_transform(l, s);
    double dt = s->elapsed - p->elapsed;
    add_rate(l, "in_rate", gained(s->in_bytes, p->in_bytes), dt);
    add_rate(l, "out_rate", gained(written_out(s), written_out(p)), dt);
    add_rate(l, "in_rate_avg", (double)s->in_bytes, s->elapsed);
    add_rate(l, "out_rate_avg", (double)written_out(s), s->elapsed);
    add_u64(l, "buffer", s->held);
    add_u64(l, "buffer_capacity", s->capacity);
    add(l, ",\"buffer_percent\":%.1f",
        s->capacity ? 100.0 * (double)s->held / (double)s->capacity : 0.0);
    add_size(l, s, failed);
    add_outputs(l, s);
}

/* The clocks of the lines start; a file that was there is emptied.  False
 * when that failed (said once: no lines then). */
static bool start(struct progress *pr)
{
    pr->begun = true;
    pr->real0 = wall_now();
    pr->mono0 = clock_now();
    pr->next = pr->mono0 + pr->interval;
    if (pr->target == PROGRESS_PATH && !pr->created) {
        /* the engine found it is no input or output: now it may be emptied */
        struct stat st;
        if (fstat(pr->fd, &st) != 0) {
            give_up(pr, "fstat", strerror(errno));
            return false;
        }
        if (S_ISREG(st.st_mode) && ftruncate(pr->fd, 0) != 0) {
            give_up(pr, "truncate", strerror(errno));
            return false;
        }
    }
    return true;
}

void progress_begin(struct progress *pr, const struct stats_snapshot *s)
{
    if (!progress_on(pr))
        return;
    pr->last = *s;
    if (!start(pr))
        return;
    struct line l = {.p = pr->buf, .cap = pr->cap};
    add_common(pr, &l, "start", s, s->phase, false);
    add(&l, "}");
    emit(pr, &l, PROGRESS_WAIT);
}

void progress_observe(struct progress *pr, const struct stats_snapshot *s, double now,
                      double tick, bool asked)
{
    if (!progress_on(pr) || !pr->begun)
        return;
    if (!asked) {
        if (now + tick / 2 < pr->next)
            return;
        pr->next = now + pr->interval;
    }
    struct line l = {.p = pr->buf, .cap = pr->cap};
    add_common(pr, &l, "progress", s, s->phase, false);
    add(&l, "}");
    pr->last = *s;
    emit(pr, &l, PROGRESS_WAIT);
}

void progress_end(struct progress *pr, const struct stats_snapshot *s, int status,
                  const char *message)
{
    if (!progress_on(pr))
        return;
    if (!pr->begun)
        progress_begin(pr, s);
    if (!progress_on(pr))
        return;
    bool ok = status == WEIR_EXIT_OK;
    struct line l = {.p = pr->buf, .cap = pr->cap};
    add_common(pr, &l, "end", s, STATS_DONE, !ok);
    add(&l, ",\"status\":%d,\"ok\":%s,\"message\":", status, ok ? "true" : "false");
    add_string(&l, ok ? NULL : message);
    /* the summary's figures, as the human summary has them */
    char text[512], why[128];
    double empty, full;
    stats_summary(s, ok, text, sizeof text);
    stats_shares(s, &empty, &full);
    add(&l, ",\"summary\":{\"bytes\":%llu,\"holes\":%llu,\"seconds\":%.3f",
        (unsigned long long)s->data_bytes, (unsigned long long)s->hole_bytes, s->elapsed);
    add_rate(&l, "rate", (double)s->data_bytes, s->elapsed);
    if (s->transform && s->wire_bytes)
        add(&l, ",\"encoded\":%llu,\"ratio\":%.3f", (unsigned long long)s->wire_bytes,
            (double)(s->data_bytes - s->hole_bytes) / (double)s->wire_bytes);
    else
        add(&l, ",\"encoded\":null,\"ratio\":null");
    add(&l, ",\"empty_percent\":%.1f,\"full_percent\":%.1f,\"verdict\":", empty * 100,
        full * 100);
    add_string(&l, stats_verdict(s, ok, why, sizeof why));
    add(&l, ",\"line\":");
    add_string(&l, text);
    add(&l, "}}");
    pr->last = *s;
    emit(pr, &l, PROGRESS_WAIT_END);
}

/* ---- a link test's lines -------------------------------------------------- */

static void link_head(struct progress *pr, struct line *l, const char *event)
{
    l->len = 0;
    l->overflow = false;
    add(l, "{\"schema\":%d,\"time\":%.3f,\"event\":\"%s\"", PROGRESS_SCHEMA,
        wall_time(pr), event);
}

static const char *const way_names[LINKTEST_WAYS] = {"out", "in", "both_out", "both_in"};

static void add_figure(struct line *l, const struct linktest_figure *f)
{
    if (!f->done) {
        add(l, "null");
        return;
    }
    add(l, "{\"bytes\":%llu,\"seconds\":%.6f", (unsigned long long)f->bytes, f->secs);
    add_rate(l, "rate", (double)f->bytes, f->secs);
    add(l, ",\"cpu_here\":%.3f,\"cpu_there\":%.3f}", f->cpu_here, f->cpu_there);
}

static void add_rtt(struct line *l, const struct linktest_result *r)
{
    if (r->pings == 0)
        add(l, ",\"rtt\":null");
    else
        add(l, ",\"rtt\":{\"pings\":%d,\"median\":%.6f,\"min\":%.6f,\"max\":%.6f}",
            r->pings, r->rtt_median, r->rtt_min, r->rtt_max);
}

void progress_link_begin(struct progress *pr, const struct linktest_config *c)
{
    if (!progress_on(pr) || !start(pr))
        return;
    struct line l = {.p = pr->buf, .cap = pr->cap};
    char listener[300];
    snprintf(listener, sizeof listener, strchr(c->host, ':') ? "[%s]:%s" : "%s:%s", c->host,
             c->port);
    link_head(pr, &l, "link-start");
    add(&l, ",\"listener\":");
    add_string(&l, listener);
    add(&l, ",\"duration\":%g,\"parallel\":%d,\"sizes\":[", c->duration, c->parallel);
    for (int i = 0; i < c->nsizes; i++)
        add(&l, "%s%u", i ? "," : "", c->sizes[i]);
    add(&l, "]}");
    emit(pr, &l, PROGRESS_WAIT);
}

void progress_link_rtt(struct progress *pr, const struct linktest_result *r)
{
    if (!progress_on(pr) || !pr->begun)
        return;
    struct line l = {.p = pr->buf, .cap = pr->cap};
    link_head(pr, &l, "link-rtt");
    add(&l, ",\"peer\":");
    add_string(&l, r->peer);
    add_rtt(&l, r);
    add(&l, "}");
    emit(pr, &l, PROGRESS_WAIT);
}

void progress_link_figure(struct progress *pr, const struct linktest_result *r, int row,
                          enum linktest_way way)
{
    if (!progress_on(pr) || !pr->begun)
        return;
    struct line l = {.p = pr->buf, .cap = pr->cap};
    link_head(pr, &l, "link-figure");
    add(&l, ",\"size\":%u,\"direction\":\"%s\",\"figure\":", r->rows[row].size,
        way_names[way]);
    add_figure(&l, &r->rows[row].fig[way]);
    add(&l, "}");
    emit(pr, &l, PROGRESS_WAIT);
}

void progress_link_end(struct progress *pr, const struct linktest_result *r, int status,
                       const char *message)
{
    if (!progress_on(pr))
        return;
    if (!pr->begun && !start(pr))
        return;
    bool ok = status == WEIR_EXIT_OK;
    struct line l = {.p = pr->buf, .cap = pr->cap};
    link_head(pr, &l, "link-end");
    add(&l, ",\"status\":%d,\"ok\":%s,\"message\":", status, ok ? "true" : "false");
    add_string(&l, ok ? NULL : message);
    add(&l, ",\"listener\":");
    add_string(&l, r->listener);
    add(&l, ",\"peer\":");
    add_string(&l, r->peer[0] ? r->peer : NULL);
    add(&l, ",\"key\":");
    add_string(&l, r->key_id[0] ? r->key_id : NULL);
    add(&l, ",\"loopback\":%s,\"duration\":%g,\"parallel\":%d,\"cpus_here\":%d,"
        "\"cpus_there\":%d", r->loopback ? "true" : "false", r->duration, r->parallel,
        r->cpus_here, r->cpus_there);
    add_rtt(&l, r);
    add(&l, ",\"rows\":[");
    for (int i = 0; i < r->nrows; i++) {
        const struct linktest_row *row = &r->rows[i];
        add(&l, "%s{\"size\":%u", i ? "," : "", row->size);
        for (int w = 0; w < LINKTEST_WAYS; w++) {
            add(&l, ",\"%s\":", way_names[w]);
            add_figure(&l, &row->fig[w]);
        }
        if (row->fig[LINKTEST_BOTH_OUT].done && row->fig[LINKTEST_BOTH_IN].done)
            add(&l, ",\"both_total\":%.0f}",
                row->fig[LINKTEST_BOTH_OUT].rate + row->fig[LINKTEST_BOTH_IN].rate);
        else
            add(&l, ",\"both_total\":null}");
    }
    static const char *const duplex[] = {"unknown", "full", "half"};
    add(&l, "],\"duplex\":\"%s\",\"duplex_ratio\":", duplex[r->duplex]);
    if (r->duplex_row >= 0)
        add(&l, "%.3f,\"duplex_size\":%u", r->duplex_ratio, r->rows[r->duplex_row].size);
    else
        add(&l, "null,\"duplex_size\":null");
    add(&l, ",\"cpu_bound\":%s,\"verdict\":", r->cpu_bound ? "true" : "false");
    add_string(&l, r->verdict);
    add(&l, "}");
    emit(pr, &l, PROGRESS_WAIT_END);
}
