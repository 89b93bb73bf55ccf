/*
 * main.c - weir's entry point: options, logging, the pipeline, the exit status.
 *
 * main() is the only place that prints a fatal setup error and the only
 * place that exits.  Everything after setup is the pipeline's (pipeline.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weir/error.h"
#include "weir/log.h"
#include "weir/options.h"
#include "weir/pipeline.h"

#ifndef WEIR_VERSION
#define WEIR_VERSION "0.0.0"
#endif

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
    struct weir_log log;
    log_init(&log, opts.quiet, opts.verbosity);
    if (opts.log_path && log_open_file(&log, opts.log_path)) {
        fprintf(stderr, "weir: log %s: open: %s\n", opts.log_path, strerror(errno));
        return WEIR_EXIT_USAGE;
    }
    if (pipeline_signals_block(&err)) {
        log_msg(&log, LOG_ERROR, "%s", err.msg);
        return err.status;
    }
    struct pipeline *p = NULL;
    int status;
    if (pipeline_create(&opts, &log, &p, &err)) {
        log_msg(&log, LOG_ERROR, "%s", err.msg);
        status = err.status;
    } else {
        status = pipeline_run(p);
    }
    pipeline_destroy(p);
    log_close(&log);
    return status;
}
