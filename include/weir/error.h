/*
 * error.h - exit statuses and the error record.
 *
 * Contract: a struct weir_error carries one failure: the exit status it maps
 * to and a one-line message of the shape "<object>: <what failed>: <cause>".
 * Functions that can fail fill one in and return -1; they never print and
 * never exit.  The pipeline keeps the first fatal error (the first error
 * wins) and main() prints it and exits with its status.
 *
 * The exit statuses are few and distinct; man/weir.1 documents them.
 */
#ifndef WEIR_ERROR_H
#define WEIR_ERROR_H

#include <stdarg.h>

enum weir_status {
    WEIR_EXIT_OK = 0,
    WEIR_EXIT_INTERNAL = 1,   /* resources: memory, threads, descriptors */
    WEIR_EXIT_USAGE = 2,      /* bad options, rejected before any I/O */
    WEIR_EXIT_INPUT = 3,      /* reading the input failed */
    WEIR_EXIT_OUTPUT = 4,     /* writing an output failed, or it closed early */
    WEIR_EXIT_NETWORK = 5,    /* connect, accept, reset, timeout, receiver error */
    WEIR_EXIT_INTEGRITY = 6,  /* a weir stream is truncated or corrupt */
    WEIR_EXIT_SIGNAL = 128,   /* plus the signal number */
};

/* What one step of a thread's work came to.  The reader, the writers, the
 * decoder and the session all return these: STEP_FAIL means a weir_error
 * was filled in; STEP_STOP means the engine is stopping and there is
 * nothing to report (the error that stopped it was reported already). */
enum weir_step {
    STEP_OK = 0,
    STEP_FAIL = 1,
    STEP_STOP = 2,
};

#define WEIR_ERROR_MAX 512

struct weir_error {
    int status;               /* enum weir_status, or 128+signal */
    char msg[WEIR_ERROR_MAX]; /* without the "weir: " prefix and newline */
};

/* Fill *e and return -1, so callers can write "return error_set(...)". */
int error_set(struct weir_error *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int error_vset(struct weir_error *e, int status, const char *fmt, va_list ap);
/* As error_set, with ": strerror(err)" appended. */
int error_sys(struct weir_error *e, int status, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
