/*
 * ratelimit.h - a token bucket for -r and -R.
 *
 * Contract: one bucket per thread that is limited (the reader for -r, each
 * writer for -R); it is not shared and has no lock.  ratelimit_chunk() says
 * how many bytes to move at most in one call, so that no burst exceeds about
 * 1/20 s of the rate; ratelimit_take() accounts for bytes moved and sleeps
 * until the rate allows more.  The sleep ends early, returning -1, when *stop
 * is set (the thread is woken by the pipeline's signal).  A rate of 0 means
 * unlimited: both calls return at once.
 */
#ifndef WEIR_RATELIMIT_H
#define WEIR_RATELIMIT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct ratelimit {
    double rate;     /* bytes per second, 0 = unlimited */
    double burst;    /* bucket capacity in bytes */
    double tokens;   /* may go negative: a debt to sleep off */
    double last;     /* monotonic time of the last refill */
};

void ratelimit_init(struct ratelimit *rl, uint64_t rate);
size_t ratelimit_chunk(const struct ratelimit *rl, size_t want);
int ratelimit_take(struct ratelimit *rl, size_t n, atomic_bool *stop);

#endif
