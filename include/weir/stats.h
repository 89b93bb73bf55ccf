/*
 * stats.h - what the engine can say about a transfer while it runs: the
 * snapshot that the status line and the summary are made of.
 *
 * Contract: the engine fills a struct stats_snapshot under its lock
 * (weir_snapshot); the command line formats it (report.h).
 *
 * "data" bytes are the bytes of the user's stream; "wire" bytes are what an
 * endpoint carried when that differs (compressed or framed as a weir stream).
 * The buffer "fill" is the share of the buffer's capacity held by data that
 * the slowest live output has not written yet.
 */
#ifndef WEIR_STATS_H
#define WEIR_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stats_snapshot {
    double elapsed;        /* seconds since the input was opened */
    uint64_t in_bytes;     /* bytes read from the input endpoint */
    uint64_t out_bytes;    /* bytes written by the slowest live output */
    uint64_t data_bytes;   /* bytes of the user's data seen so far */
    uint64_t wire_bytes;   /* bytes on the wire side, when a transform runs */
    bool transform;        /* compression or decoding is active */
    uint64_t held;         /* bytes held in the buffer */
    uint64_t capacity;     /* bytes the buffer can hold */
    double t_empty;        /* seconds the buffer was empty (input side slower) */
    double t_full;         /* seconds the reader waited for space (output slower) */
    uint64_t expect;       /* --size, or 0 */
    double t_input_end;    /* seconds from start to the end of input, or 0 */
    double t_workers;      /* seconds the outputs waited for the transform workers */
    const char *workers_name;   /* "compression" or "decoding" */
    const char *waiting;   /* after the input: what the end still waits for, or NULL */
    uint64_t peer_written; /* a weir receiver's keepalives: what its outputs wrote */
};

#endif
