/*
 * log.h - messages on stderr (and the -l log file), and the live status line.
 *
 * Contract: every message is one line "weir: <text>".  Any thread may call
 * these functions; a mutex keeps lines whole and lets the status line (which
 * is redrawn in place with '\r' on a terminal) be erased before a message is
 * printed over it.  The struct is owned by main() and outlives every thread.
 *
 * The -l file takes what the terminal takes, at the same levels, except
 * that -q quiets only the terminal: a quiet weir still keeps its record in
 * the file (errors, notices, warnings and information; debug lines with
 * -v).  A file that cannot take a line is said so once on stderr, and no
 * more lines go there.
 */
#ifndef WEIR_LOG_H
#define WEIR_LOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum log_level {
    LOG_ERROR,   /* always printed */
    LOG_NOTICE,  /* printed even with -q (e.g. the port picked for -I 0) */
    LOG_WARN,    /* suppressed by -q */
    LOG_INFO,    /* suppressed by -q */
    LOG_DEBUG,   /* only with -v */
};

struct weir_log {
    pthread_mutex_t lock;
    FILE *file;          /* -l FILE, or NULL */
    const char *path;    /* its name, for the one message if it fails */
    bool quiet;          /* -q */
    int verbosity;       /* number of -v */
    bool tty;            /* stderr is a terminal: the status line is drawn */
    bool status_drawn;   /* guarded by lock: a status line is on screen */
};

void log_init(struct weir_log *log, bool quiet, int verbosity);
/* Opens (appends to) the -l file.  Returns -1 with errno on failure. */
int log_open_file(struct weir_log *log, const char *path);
void log_close(struct weir_log *log);
/* Whether a message of this level goes anywhere (the terminal or the
 * file): callers that count what they log (a flood's bound) count only
 * these. */
bool log_enabled(struct weir_log *log, enum log_level level);
void log_msg(struct weir_log *log, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Redraw the status line in place (terminal only). */
void log_status(struct weir_log *log, const char *line);
/* Print a status line as a whole line (SIGUSR1, like dd). */
void log_status_line(struct weir_log *log, const char *line);
/* A child's stderr, passed through untouched (the status line is erased
 * first, and redrawn at its next turn). */
void log_passthrough(struct weir_log *log, const void *buf, size_t n);
/* End an in-place status line with a newline, if one is drawn. */
void log_status_end(struct weir_log *log);

#endif
