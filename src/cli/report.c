/* report.c - see report.h. */
#include "cli/report.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void stats_bytes(uint64_t n, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, len, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, units[u]);
}

static void stats_rate(double bytes, double secs, char *buf, size_t len)
{
    char b[24];
    stats_bytes(secs > 0 ? (uint64_t)(bytes / secs) : 0, b, sizeof b);
    snprintf(buf, len, "%s/s", b);
}

void stats_duration(double secs, char *buf, size_t len)
{
    if (secs < 0)
        secs = 0;
    unsigned long t = (unsigned long)(secs + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%lu:%02lu", t / 60, t % 60);
}

static double fill_share(const struct stats_snapshot *s)
{
    return s->capacity ? (double)s->held / (double)s->capacity : 0;
}

/* "1.00 TiB" or "1.00 TiB, of which 1023 GiB holes" */
static void total_with_holes(const struct stats_snapshot *s, char *buf, size_t len)
{
    char total[32], holes[32];
    stats_bytes(s->data_bytes, total, sizeof total);
    if (!s->hole_bytes) {
        snprintf(buf, len, "%s", total);
        return;
    }
    stats_bytes(s->hole_bytes, holes, sizeof holes);
    snprintf(buf, len, "%s, of which %s holes", total, holes);
}

/* Data over wire, holes left out: the wire has only their records (an LZ4
 * frame's blocks of zeros for them are not counted either). */
static double ratio(const struct stats_snapshot *s)
{
    return (double)(s->data_bytes - s->hole_bytes) / (double)s->wire_bytes;
}

/* The codec and, compressing, its level ("zstd 3", "lz4 1"); with
 * --adapt the levels used so far ("zstd -5..9 adaptive, some stored"), or
 * at the status line the one in use. */
static void codec_name(const struct stats_snapshot *s, bool range, char *buf, size_t len)
{
    const char *codec = s->codec ? s->codec : "lz4";
    if (s->adapt && range && s->level_min <= s->level_max)
        snprintf(buf, len, "%s %d..%d adaptive%s", codec, s->level_min, s->level_max,
                 s->stored ? ", some stored" : "");
    else if (s->adapt && range)
        snprintf(buf, len, "%s adaptive%s", codec, s->stored ? ", stored" : "");
    else if (s->storing)
        snprintf(buf, len, "%s adaptive, storing", codec);
    else if (s->level)
        snprintf(buf, len, "%s %d%s", codec, s->level, s->adapt ? " adaptive" : "");
    else
        snprintf(buf, len, "%s", codec);
}

/* What the ETA is measured against: --size, else the input file's size
 * (not when it is decoded: its data is larger than it). */
static uint64_t expected(const struct stats_snapshot *s)
{
    return s->expect ? s->expect : s->decoding ? 0 : s->input_size;
}

/* What this end waits for, or else how far the far end's outputs wrote
 * (a weir receiver's), appended at buf: what snprintf returns. */
static int peer_words(const struct stats_snapshot *now, char *buf, size_t len)
{
    char w[32] = "";
    if (now->peer_written)
        stats_bytes(now->peer_written, w, sizeof w);
    if (now->waiting)
        return snprintf(buf, len, "  waiting for %s%s%s%s", now->waiting, w[0] ? " (" : "", w,
                        w[0] ? " written)" : "");
    return w[0] ? snprintf(buf, len, "  receiver wrote %s", w) : 0;
}

void stats_status_line(const struct stats_snapshot *prev, const struct stats_snapshot *now,
                       char *buf, size_t len)
{
    double dt = now->elapsed - prev->elapsed;
    char in[32], out[32], total[80], el[16], bar[11];
    stats_rate((double)(now->in_bytes - prev->in_bytes), dt, in, sizeof in);
    stats_rate((double)(now->out_bytes - prev->out_bytes), dt, out, sizeof out);
    total_with_holes(now, total, sizeof total);
    stats_duration(now->elapsed, el, sizeof el);
    double fill = fill_share(now);
    int hashes = (int)(fill * 10 + 0.5);
    for (int i = 0; i < 10; i++)
        bar[i] = i < hashes ? '#' : '.';
    bar[10] = '\0';
    int n = snprintf(buf, len, "in %s  out %s  total %s  buf [%s] %3.0f%%  %s", in, out,
                     total, bar, fill * 100, el);
    if (n < 0 || (size_t)n >= len)
        return;
    if (now->transform && now->wire_bytes && now->data_bytes > now->hole_bytes) {
        char codec[48];
        codec_name(now, false, codec, sizeof codec);
        n += snprintf(buf + n, len - (size_t)n, "  %s ratio %.2f", codec, ratio(now));
    }
    if (now->streams > 1 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, "  %u connections", now->streams);
    if ((now->reconnecting || now->reconnections) && (size_t)n < len) {
        n += snprintf(buf + n, len - (size_t)n, "  %s%u reconnection%s",
                      now->reconnecting ? "RECONNECTING, " : "", now->reconnections,
                      now->reconnections == 1 ? "" : "s");
        if ((size_t)n >= len)
            return;
    }
    if ((size_t)n < len) {
        n += peer_words(now, buf + n, len - (size_t)n);
        if ((size_t)n >= len)
            return;
    }
    uint64_t expect = expected(now);
    if (expect && (size_t)n < len) {
        double done = (double)now->data_bytes / (double)expect;
        double rate = now->elapsed > 0 ? (double)now->data_bytes / now->elapsed : 0;
        char eta[16] = "?";
        if (rate > 0 && done < 1)
            stats_duration(((double)expect - (double)now->data_bytes) / rate, eta,
                           sizeof eta);
        else if (done >= 1)
            snprintf(eta, sizeof eta, "0:00");
        snprintf(buf + n, len - (size_t)n, "  %3.0f%%  ETA %s", done > 1 ? 100 : done * 100,
                 eta);
    }
}

static const char *verdict(const struct stats_snapshot *s, double empty, double full,
                           char *buf, size_t len)
{
    double workers = s->elapsed > 0 ? s->t_workers / s->elapsed : 0;
    if (workers >= 0.5 && s->workers_name) {
        snprintf(buf, len, "%s was the bottleneck (outputs waited on it %.0f%% of the time)",
                 s->workers_name, workers > 1 ? 100 : workers * 100);
        return buf;
    }
    if (empty >= 0.5)
        return "input was the bottleneck";
    if (full >= 0.5)
        return "output was the bottleneck";
    if (s->t_input_end > 0 && s->t_input_end < 0.8 * s->elapsed)
        return "output was the slower side; the buffer absorbed the difference";
    if (empty + full < 0.2)
        return "input and output kept pace with each other";
    return empty > full ? "input was the slower side" : "output was the slower side";
}

void stats_shares(const struct stats_snapshot *s, double *empty, double *full)
{
    *empty = s->elapsed > 0 ? s->t_empty / s->elapsed : 0;
    *full = s->elapsed > 0 ? s->t_full / s->elapsed : 0;
    if (*empty > 1)
        *empty = 1;
    if (*full > 1)
        *full = 1;
}

const char *stats_verdict(const struct stats_snapshot *s, bool complete, char *buf, size_t len)
{
    /* a verdict on which side was slower means nothing for a transfer that
     * failed or moved nothing */
    if (!complete || s->data_bytes == 0)
        return NULL;
    double empty, full;
    stats_shares(s, &empty, &full);
    return verdict(s, empty, full, buf, len);
}

const char *stats_phase_name(enum stats_phase phase)
{
    switch (phase) {
    case STATS_CONNECTING: return "connecting";
    case STATS_WAITING: return "waiting";
    case STATS_TRANSFERRING: return "transferring";
    case STATS_DRAINING: return "draining";
    case STATS_ANSWER: return "waiting for the answer";
    case STATS_STOPPING: return "stopping";
    case STATS_DONE: return "done";
    }
    return "unknown";
}

const char *stats_output_state_name(enum stats_output_state state)
{
    switch (state) {
    case STATS_OUT_CONNECTING: return "connecting";
    case STATS_OUT_WRITING: return "writing";
    case STATS_OUT_FLUSHING: return "flushing";
    case STATS_OUT_ANSWER: return "waiting for the answer";
    case STATS_OUT_CONSUMER: return "waiting for the consumer";
    case STATS_OUT_DONE: return "done";
    case STATS_OUT_FAILED: return "failed";
    case STATS_OUT_STOPPED: return "stopped";
    }
    return "unknown";
}

void stats_summary(const struct stats_snapshot *s, bool complete, char *buf, size_t len)
{
    char total[80], rate[32], el[32];
    total_with_holes(s, total, sizeof total);
    stats_rate((double)s->data_bytes, s->elapsed, rate, sizeof rate);
    snprintf(el, sizeof el, "%.2f s", s->elapsed);
    double empty, full;
    stats_shares(s, &empty, &full);
    int n = snprintf(buf, len, "summary: %s%s%s in %s, %s", complete ? "" : "INCOMPLETE: ",
                     total, s->hole_bytes ? "," : "", el, rate);
    if (n < 0 || (size_t)n >= len)
        return;
    if (s->streams > 1)
        n += snprintf(buf + n, len - (size_t)n, " over %u connections", s->streams);
    if (n < 0 || (size_t)n >= len)
        return;
    if (s->reconnections || s->reconnecting) {
        n += snprintf(buf + n, len - (size_t)n, "; %u reconnection%s, %.1f s without a "
                      "connection", s->reconnections, s->reconnections == 1 ? "" : "s",
                      s->gap_secs);
        if (n < 0 || (size_t)n >= len)
            return;
    }
    if (s->transform && s->wire_bytes) {
        char wire[32], wrate[32];
        stats_bytes(s->wire_bytes, wire, sizeof wire);
        stats_rate((double)s->wire_bytes, s->elapsed, wrate, sizeof wrate);
        char codec[48];
        codec_name(s, true, codec, sizeof codec);
        n += snprintf(buf + n, len - (size_t)n, "; wire %s, %s, %s", wire, wrate, codec);
        if (n >= 0 && (size_t)n < len && s->data_bytes > s->hole_bytes)
            n += snprintf(buf + n, len - (size_t)n, ", ratio %.2f", ratio(s));
        if (n < 0 || (size_t)n >= len)
            return;
    }
    char why[128];
    const char *v = stats_verdict(s, complete, why, sizeof why);
    if (v)
        snprintf(buf + n, len - (size_t)n, "; buffer empty %.0f%% and full %.0f%% of the time: %s",
                 empty * 100, full * 100, v);
}

void stats_rate_text(double bytes_per_sec, char *buf, size_t len)
{
    char b[24];
    stats_bytes(bytes_per_sec > 0 ? (uint64_t)bytes_per_sec : 0, b, sizeof b);
    snprintf(buf, len, "%s/s", b);
}

/* Append one line (fmt has no newline), whole or not at all. */
static void table_line(char *buf, size_t len, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void table_line(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
    if (*at >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n + 2 > len - *at) {
        buf[*at] = '\0';
        *at = len;   /* no more lines */
        return;
    }
    buf[*at + (size_t)n] = '\n';
    buf[*at + (size_t)n + 1] = '\0';
    *at += (size_t)n + 1;
}

static void figure_text(const struct linktest_figure *f, char *buf, size_t len)
{
    if (f->done)
        stats_rate_text(f->rate, buf, len);
    else
        snprintf(buf, len, "-");
}

void stats_link_table(const struct linktest_result *r, char *buf, size_t len)
{
    size_t at = 0;
    if (len)
        buf[0] = '\0';
    char key[100];
    if (r->key_id[0])
        snprintf(key, sizeof key, "the key '%s'", r->key_id);
    else
        snprintf(key, sizeof key, "no key");
    table_line(buf, len, &at, "link test to %s (%s): %d connection%s each way, %g s a "
               "measurement, %s", r->listener, r->peer, r->parallel,
               r->parallel == 1 ? "" : "s", r->duration, key);
    if (r->pings > 0)
        table_line(buf, len, &at, "round trip: %.3f ms (median of %d; %.3f to %.3f ms)",
                   r->rtt_median * 1e3, r->pings, r->rtt_min * 1e3, r->rtt_max * 1e3);
    table_line(buf, len, &at, "%10s  %12s  %12s  %12s  %12s  %12s", "write size", "out", "in",
               "both: out", "both: in", "both: total");
    for (int i = 0; i < r->nrows; i++) {
        const struct linktest_row *row = &r->rows[i];
        char size[32], f[LINKTEST_WAYS][32], total[32];
        linktest_size_name(row->size, size, sizeof size);
        for (int w = 0; w < LINKTEST_WAYS; w++)
            figure_text(&row->fig[w], f[w], sizeof f[w]);
        if (row->fig[LINKTEST_BOTH_OUT].done && row->fig[LINKTEST_BOTH_IN].done)
            stats_rate_text(row->fig[LINKTEST_BOTH_OUT].rate + row->fig[LINKTEST_BOTH_IN].rate,
                            total, sizeof total);
        else
            snprintf(total, sizeof total, "-");
        table_line(buf, len, &at, "%10s  %12s  %12s  %12s  %12s  %12s", size,
                   f[LINKTEST_OUT], f[LINKTEST_IN], f[LINKTEST_BOTH_OUT], f[LINKTEST_BOTH_IN],
                   total);
    }
    table_line(buf, len, &at, "out: from this host to %s; in: from it to this host; each "
               "figure taken where the bytes arrived", r->peer);
    table_line(buf, len, &at, "duplex: %s", r->verdict);
}
