/*
 * main.c - weir's command line: options, logging, the engine, the status
 * line and the summary, the exit status.
 *
 * main() is the only place that prints a fatal setup error and the only
 * place that exits.  Everything after setup is the engine's (weir.h); this
 * file only draws what the engine reports.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "weir/error.h"
#include "weir/keyfile.h"
#include "weir/log.h"
#include "weir/options.h"
#include "weir/report.h"
#include "weir/weir.h"

#ifndef WEIR_VERSION
#define WEIR_VERSION "0.0.0"
#endif

#define STATUS_INTERVAL 0.5   /* seconds between redraws of the status line */

/* A descriptor 0, 1 or 2 that is closed at startup would be handed to the
 * first file or socket weir opens, and messages or data meant for it would
 * land there (weir -o out 2>&- would write "weir: ..." into out).  Each
 * closed one gets /dev/null first; which ones were closed is remembered, so
 * that a closed standard input or output used as the data's endpoint is an
 * error rather than an empty input or a silent sink.  Returns -1 when even
 * /dev/null cannot be opened. */
static int standard_descriptors(bool closed[3])
{
    for (int fd = 0; fd < 3; fd++) {
        closed[fd] = fcntl(fd, F_GETFD) < 0 && errno == EBADF;
        if (!closed[fd])
            continue;
        /* the lowest free descriptor is fd: 0-2 are filled in order */
        int got = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (got != fd) {
            if (got >= 0)
                close(got);
            return -1;
        }
    }
    return 0;
}

/* The engine's observer: the status line, redrawn in place on a terminal,
 * or printed whole when SIGUSR1 asks for it. */
static void draw_status(void *ctx, const struct stats_snapshot *prev,
                        const struct stats_snapshot *now, bool whole_line)
{
    struct weir_log *log = ctx;
    char line[400];
    stats_status_line(prev, now, line, sizeof line);
    if (whole_line)
        log_status_line(log, line);
    else
        log_status(log, line);
}

/* --genkey FILE: a new key named --key-id or after this host. */
static int genkey(const struct weir_options *opts)
{
    char host[256] = "";
    const char *id = opts->key_id;
    if (!id) {
        if (gethostname(host, sizeof host - 1) != 0 || !host[0])
            snprintf(host, sizeof host, "weir");
        id = host;
    }
    struct weir_error err;
    if (keyfile_generate(opts->genkey, id, &err)) {
        fprintf(stderr, "weir: %s\n", err.msg);
        return err.status;
    }
    if (!opts->quiet)
        fprintf(stderr, "weir: wrote the key '%s' to %s (mode 0600): copy it to the other "
                "host the same way\n", id, opts->genkey);
    return WEIR_EXIT_OK;
}

static int run(const struct weir_options *opts, struct weir_log *log)
{
    struct weir_config cfg;
    struct weir_error err;
    options_to_config(opts, &cfg);
    /* test-only: change keys every few records, so that tests cross epochs */
    const char *epochs = getenv("WEIR_TEST_EPOCH_RECORDS");
    if (epochs)
        cfg.epoch_records = strtoull(epochs, NULL, 10);
    if (weir_signals_block(&err)) {
        log_msg(log, LOG_ERROR, "%s", err.msg);
        return err.status;
    }
    struct weir_engine *engine = NULL;
    int status;
    if (weir_create(&cfg, log, &engine, &err)) {
        log_msg(log, LOG_ERROR, "%s", err.msg);
        status = err.status;
        /* a signal while starting: the transfer was begun and is not done */
        if (status > WEIR_EXIT_SIGNAL && !opts->quiet)
            log_status_line(log, "summary: INCOMPLETE: nothing was transferred (interrupted "
                            "while starting)");
    } else {
        struct weir_observer obs = {.status = draw_status, .ctx = log,
                                    .interval = log->tty && !opts->quiet ? STATUS_INTERVAL
                                                                          : 0};
        status = weir_run(engine, &obs);
        struct stats_snapshot s;
        weir_snapshot(engine, &s);
        log_status_end(log);
        if (!opts->quiet) {
            char line[512];
            stats_summary(&s, weir_succeeded(engine), line, sizeof line);
            log_status_line(log, line);
        }
    }
    weir_destroy(engine);
    return status;
}

int main(int argc, char **argv)
{
    bool closed[3];
    if (standard_descriptors(closed) != 0)
        return WEIR_EXIT_INTERNAL;   /* not even stderr to say so */
    struct weir_options opts;
    struct weir_error err;
    if (options_parse(argc, argv, &opts, &err)) {
        fprintf(stderr, "weir: %s\n", err.msg);
        return err.status;
    }
    opts.stdin_closed = closed[0];
    opts.stdout_closed = closed[1];
    if ((opts.help || opts.version) && closed[1]) {
        fprintf(stderr, "weir: output <stdout>: standard output is closed\n");
        return WEIR_EXIT_OUTPUT;
    }
    if (opts.help) {
        options_usage(stdout);
        return fflush(stdout) == 0 ? WEIR_EXIT_OK : WEIR_EXIT_OUTPUT;
    }
    if (opts.version) {
        printf("weir %s\n", WEIR_VERSION);
        return fflush(stdout) == 0 ? WEIR_EXIT_OK : WEIR_EXIT_OUTPUT;
    }
    if (opts.genkey)
        return genkey(&opts);
    if (opts.print_pid)   /* mbuffer's --pid: scripts read it to signal weir */
        fprintf(stderr, "weir: PID is %ld\n", (long)getpid());
    /* -L: the buffer's pages are locked as they are first used, so that
     * -m stays a bound rather than an allocation */
    if (opts.lock_memory && mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0) {
        fprintf(stderr, "weir: -L: cannot lock the buffer in memory: %s (RLIMIT_MEMLOCK, "
                "or CAP_IPC_LOCK)\n", strerror(errno));
        return WEIR_EXIT_INTERNAL;
    }
    struct weir_log log;
    log_init(&log, opts.quiet, opts.verbosity);
    if (opts.log_path && log_open_file(&log, opts.log_path)) {
        fprintf(stderr, "weir: log %s: open: %s\n", opts.log_path, strerror(errno));
        return WEIR_EXIT_USAGE;
    }
    int status = run(&opts, &log);
    log_close(&log);
    return status;
}
