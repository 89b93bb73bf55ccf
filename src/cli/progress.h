/*
 * progress.h - --progress=json: the transfer as lines of JSON, one object a
 * line, for programs.  The schema is in man/weir.1 (PROGRESS FOR PROGRAMS);
 * fields are added, never renamed or removed.
 *
 * Contract: the command line's, made from the engine's snapshots (stats.h);
 * the engine never sees it.  Everything runs on the main thread:
 *
 *   progress_open()     before the engine exists: a descriptor that is not
 *                       open for writing, or a file that cannot be opened,
 *                       is a usage error.  A file is opened without being
 *                       truncated, so that the engine's same-file check
 *                       (weir_config.progress_fd, progress_config) can still
 *                       refuse it untouched.
 *   progress_abandon()  weir refused to start (exit 2): nothing is written,
 *                       and a file weir created is removed.
 *   progress_begin()    a file is truncated; the "start" line.
 *   progress_observe()  from the engine's observer: a "progress" line when
 *                       one is due (every interval) or asked for (SIGUSR1).
 *   progress_end()      the "end" line, with the exit status and summary.
 *   progress_close()    closes a file weir opened.
 *
 * Each line is built in a buffer and written with one write() (a short
 * write is finished), under the log's lock so that no message from another
 * thread lands inside it.  A target that cannot take a line (a pipe whose
 * reader stalls) is waited for at most PROGRESS_WAIT seconds (the end line:
 * PROGRESS_WAIT_END), and the line is skipped if it still cannot; the writes
 * never block (the descriptor is non-blocking for each write() only), so
 * the main thread is never held longer, also by a pipe that takes part of a
 * line.  A write that fails (EPIPE, EBADF, ENOSPC, a line taken only in
 * part within the bound) is reported once, as a warning, and ends the
 * progress: it never fails or stops the transfer.
 */
#ifndef WEIR_PROGRESS_H
#define WEIR_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "linktest/linktest.h"
#include "weir/error.h"
#include "weir/log.h"
#include "weir/stats.h"
#include "weir/weir.h"

#define PROGRESS_SCHEMA 1
#define PROGRESS_WAIT 1.0       /* seconds a progress line waits for its target */
#define PROGRESS_WAIT_END 5.0   /* and the end line */

enum progress_target {
    PROGRESS_OFF,
    PROGRESS_STDERR,   /* no target given: standard error */
    PROGRESS_FD,       /* json=FD: a descriptor weir inherited */
    PROGRESS_PATH,     /* json=PATH: a file weir creates or truncates */
};

struct progress {
    enum progress_target target;
    int fd;                  /* -1 while off */
    bool created;            /* PROGRESS_PATH: weir created the file */
    const char *path;
    char name[320];          /* "progress FILE", "progress descriptor 3" */
    struct weir_log *log;
    bool stopped;            /* a write failed: no more lines */
    bool begun;              /* the start line was written (or tried) */
    double interval;         /* seconds between progress lines */
    double next;             /* monotonic time the next one is due */
    double real0, mono0;     /* the wall clock at the start, and the monotonic clock */
    struct stats_snapshot last;   /* the previous line's, for the rates */
    char *buf;               /* one line */
    size_t cap;
};

/* fd >= 0: json=FD; else path: json=PATH; else standard error.  closed:
 * which of the standard descriptors main() found closed (and filled with
 * /dev/null).  Fails with WEIR_EXIT_USAGE, naming the descriptor or file. */
int progress_open(struct progress *pr, int fd, const char *path, double interval,
                  const bool closed[3], struct weir_log *log, struct weir_error *err);
/* Off: every other call does nothing. */
void progress_off(struct progress *pr);
bool progress_on(const struct progress *pr);
/* The lines go to standard error (the status line must not be drawn there). */
bool progress_on_stderr(const struct progress *pr);
/* Tell the engine which descriptor no input or output may be. */
void progress_config(const struct progress *pr, struct weir_config *cfg);
void progress_abandon(struct progress *pr);
void progress_begin(struct progress *pr, const struct stats_snapshot *s);
/* now: monotonic seconds; tick: the observer's interval (a line is due
 * when it is at most half a tick away); asked: SIGUSR1 asked for one. */
void progress_observe(struct progress *pr, const struct stats_snapshot *s, double now,
                      double tick, bool asked);
/* status: weir's exit status; message: the failure's, or NULL. */
void progress_end(struct progress *pr, const struct stats_snapshot *s, int status,
                  const char *message);
void progress_close(struct progress *pr);

/* A link test's lines (--link-test; the schema is in man/weir.1): its start,
 * the round trip, each figure as it comes, and the end with the whole
 * table, the exit status and the message of a failure. */
void progress_link_begin(struct progress *pr, const struct linktest_config *c);
void progress_link_rtt(struct progress *pr, const struct linktest_result *r);
void progress_link_figure(struct progress *pr, const struct linktest_result *r, int row,
                          enum linktest_way way);
void progress_link_end(struct progress *pr, const struct linktest_result *r, int status,
                       const char *message);

/* Append s to a JSON line as a string: quotes, backslashes and control
 * characters escaped, valid UTF-8 as it is, and every byte that is not part
 * of valid UTF-8 as \u00XX (its value).  NULL is null.  Returns the bytes
 * the string took, or 0 when it did not fit in cap - len (out is then
 * unchanged beyond len).  For the unit test. */
size_t progress_json_string(char *out, size_t len, size_t cap, const char *s);

#endif
