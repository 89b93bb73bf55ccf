/* ratelimit.c - see ratelimit.h. */
#include "engine/ratelimit.h"

#include <time.h>

#include "base/sync.h"

void ratelimit_init(struct ratelimit *rl, uint64_t rate)
{
    rl->rate = (double)rate;
    rl->burst = rl->rate / 20.0 < 512.0 ? 512.0 : rl->rate / 20.0;
    rl->tokens = rl->burst;
    rl->last = clock_now();
}

size_t ratelimit_chunk(const struct ratelimit *rl, size_t want)
{
    if (rl->rate <= 0 || want <= (size_t)rl->burst)
        return want;
    return (size_t)rl->burst;
}

int ratelimit_take(struct ratelimit *rl, size_t n, atomic_bool *stop)
{
    if (rl->rate <= 0)
        return 0;
    double now = clock_now();
    rl->tokens += (now - rl->last) * rl->rate;
    if (rl->tokens > rl->burst)
        rl->tokens = rl->burst;
    rl->last = now;
    rl->tokens -= (double)n;
    while (rl->tokens < 0) {
        if (atomic_load(stop))
            return -1;
        double secs = -rl->tokens / rl->rate;
        struct timespec ts = {.tv_sec = (time_t)secs,
                              .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9)};
        nanosleep(&ts, NULL);   /* EINTR: recompute and re-check stop */
        now = clock_now();
        rl->tokens += (now - rl->last) * rl->rate;
        rl->last = now;
    }
    return 0;
}
