/* log.c - see include/weir/log.h. */
#include "base/sync.h"
#include "weir/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void log_init(struct weir_log *log, bool quiet, int verbosity)
{
    sync_mutex_init(&log->lock);
    log->file = NULL;
    log->path = NULL;
    log->quiet = quiet;
    log->verbosity = verbosity;
    log->tty = isatty(STDERR_FILENO) == 1;
    log->status_drawn = false;
}

int log_open_file(struct weir_log *log, const char *path)
{
    log->file = fopen(path, "ae");   /* close-on-exec: children never hold it */
    log->path = path;
    return log->file ? 0 : -1;
}

void log_close(struct weir_log *log)
{
    if (log->file)
        fclose(log->file);
    log->file = NULL;
}

static bool log_wanted(const struct weir_log *log, enum log_level level)
{
    switch (level) {
    case LOG_ERROR:
    case LOG_NOTICE:
        return true;
    case LOG_WARN:
    case LOG_INFO:
        return !log->quiet;
    case LOG_DEBUG:
        return !log->quiet && log->verbosity > 0;
    }
    return true;
}

/* The -l file's level: the terminal's, but -q quiets the terminal only. */
static bool file_wanted(const struct weir_log *log, enum log_level level)
{
    return log->file && (level != LOG_DEBUG || log->verbosity > 0);
}

bool log_enabled(struct weir_log *log, enum log_level level)
{
    sync_lock(&log->lock);
    bool on = log_wanted(log, level) || file_wanted(log, level);
    sync_unlock(&log->lock);
    return on;
}

/* Append to the -l file; a file that fails (a full disk) is said so once,
 * on stderr, and left. */
static void file_write_locked(struct weir_log *log, const char *line, size_t len)
{
    if (fwrite(line, 1, len, log->file) == len && fflush(log->file) == 0)
        return;
    int e = errno;
    fprintf(stderr, "weir: log file %s: write: %s; no more lines go there (the transfer "
            "goes on)\n", log->path ? log->path : "(-l)", strerror(e));
    fflush(stderr);
    fclose(log->file);
    log->file = NULL;
}

static void log_erase_locked(struct weir_log *log)
{
    if (log->status_drawn) {
        fputs("\r\033[K", stderr);
        log->status_drawn = false;
    }
}

void log_msg(struct weir_log *log, enum log_level level, const char *fmt, ...)
{
    /* the whole line is formatted first and written at once, so another
     * process reading the log never sees half a message */
    char line[2048] = "weir: ";
    size_t pre = strlen(line);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + pre, sizeof line - pre - 1, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? pre : pre + (size_t)n;
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    sync_lock(&log->lock);
    if (log_wanted(log, level)) {
        log_erase_locked(log);
        fwrite(line, 1, len, stderr);
        fflush(stderr);
    }
    if (file_wanted(log, level))
        file_write_locked(log, line, len);
    sync_unlock(&log->lock);
}

void log_status(struct weir_log *log, const char *line)
{
    sync_lock(&log->lock);
    if (log->tty && !log->quiet) {
        fprintf(stderr, "\r%s\033[K", line);
        fflush(stderr);
        log->status_drawn = true;
    }
    sync_unlock(&log->lock);
}

void log_status_line(struct weir_log *log, const char *line)
{
    sync_lock(&log->lock);
    log_erase_locked(log);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    if (log->file) {
        char buf[2048];
        int n = snprintf(buf, sizeof buf, "%s\n", line);
        file_write_locked(log, buf, n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n
                                                                     : sizeof buf - 1);
    }
    sync_unlock(&log->lock);
}

void log_status_end(struct weir_log *log)
{
    sync_lock(&log->lock);
    if (log->status_drawn) {
        fputc('\n', stderr);
        fflush(stderr);
        log->status_drawn = false;
    }
    sync_unlock(&log->lock);
}

void log_passthrough(struct weir_log *log, const void *buf, size_t n)
{
    sync_lock(&log->lock);
    log_erase_locked(log);
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;   /* nowhere to say it: stderr is gone */
        p += w;
        n -= (size_t)w;
    }
    sync_unlock(&log->lock);
}
