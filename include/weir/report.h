/*
 * report.h - the command line's words for a transfer: the status line and
 * the summary, made from the engine's snapshots (stats.h).
 *
 * Contract: pure formatting into the caller's buffer.  No state, no lock;
 * main() calls them, from the engine's observer and after weir_run().
 */
#ifndef WEIR_REPORT_H
#define WEIR_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/stats.h"

/* "1.50 GiB", "512 B" */
void stats_bytes(uint64_t n, char *buf, size_t len);
/* "0:07", "1:02:03" */
void stats_duration(double secs, char *buf, size_t len);
/* One status line from two snapshots (rates are the difference). */
void stats_status_line(const struct stats_snapshot *prev, const struct stats_snapshot *now,
                       char *buf, size_t len);
/* The summary line, starting "summary:". */
void stats_summary(const struct stats_snapshot *s, bool complete, char *buf, size_t len);

#endif
