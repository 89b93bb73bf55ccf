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

#include "linktest/linktest.h"
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
/* The shares of the time the buffer was empty and full, each 0 to 1. */
void stats_shares(const struct stats_snapshot *s, double *empty, double *full);
/* Which side limited the transfer, in buf or a constant; NULL when it
 * failed or moved nothing (the summary then gives no verdict). */
const char *stats_verdict(const struct stats_snapshot *s, bool complete, char *buf, size_t len);
/* The words for a phase and an output's state ("transferring", "done"). */
const char *stats_phase_name(enum stats_phase phase);
const char *stats_output_state_name(enum stats_output_state state);

/* A link test's table (linktest.h), several lines each ending in '\n':
 * the test, the round trip, a row per write size, which way is which, and
 * the verdict on duplex.  Cut short (whole lines) when len is too small. */
void stats_link_table(const struct linktest_result *r, char *buf, size_t len);
/* "812 MiB/s" */
void stats_rate_text(double bytes_per_sec, char *buf, size_t len);

#endif
