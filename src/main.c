/*
 * main.c - weir's entry point: options, logging, the pipeline, the exit status.
 *
 * main() is the only place that prints a fatal setup error and the only
 * place that exits.  Everything after setup is the pipeline's (pipeline.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "weir/error.h"
#include "weir/log.h"
#include "weir/options.h"
#include "weir/pipeline.h"

#ifndef WEIR_VERSION
#define WEIR_VERSION "0.0.0"
#endif

int main(int argc, char **argv)
{
    struct weir_options opts;
    struct weir_error err;
    if (options_parse(argc, argv, &opts, &err)) {
        fprintf(stderr, "weir: %s\n", err.msg);
        return err.status;
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
