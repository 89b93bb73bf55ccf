/*
 * pipeline.h - the engine: one reader, one writer per output, the buffer
 * between them, and the main thread's loop of signals, status and shutdown.
 *
 * Contract: main() parses options, then calls pipeline_create() (which
 * reserves the buffer, opens files and binds the listening socket, so that
 * every setup error is reported before a byte moves), then pipeline_run()
 * from the main thread, which starts the threads, handles signals, draws the
 * status line, joins everything, prints the summary and returns the exit
 * status.  pipeline_destroy() frees what is left.  The thread model is
 * explained at the top of pipeline.c.
 *
 * Before pipeline_create(), main() must call pipeline_signals_block() so
 * that every thread inherits a mask in which only the pipeline's wake-up
 * signal is delivered asynchronously.
 */
#ifndef WEIR_PIPELINE_H
#define WEIR_PIPELINE_H

#include "weir/error.h"
#include "weir/log.h"
#include "weir/options.h"

struct pipeline;

int pipeline_signals_block(struct weir_error *err);
int pipeline_create(const struct weir_options *o, struct weir_log *log,
                    struct pipeline **out, struct weir_error *err);
int pipeline_run(struct pipeline *p);
void pipeline_destroy(struct pipeline *p);

#endif
