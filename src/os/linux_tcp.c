/* linux_tcp.c - os.h's view of a connection's path on Linux: TCP_INFO as
 * the kernel's own header lays it out.  A file of its own because that
 * header and the C library's <netinet/tcp.h> (which linux.c uses, and
 * whose struct tcp_info stops before the figures read here) cannot be
 * included together.  An older kernel gives a shorter struct: a figure
 * past what it filled stays unknown. */
#include "os/os.h"

#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* Whether the kernel filled the field that ends at `end` bytes. */
#define FILLED(len, field) \
    ((size_t)(len) >= offsetof(struct tcp_info, field) + sizeof(((struct tcp_info *)0)->field))

/* The first slow start: tcp_info says so with an ssthresh not yet set. */
#define SSTHRESH_UNSET 0x7fffffffU

/* The most a connection's send buffer grows to: the ceiling of the
 * kernel's tuning (net.ipv4.tcp_wmem's third figure, the namespace's), or
 * the size it has when one was set above that.  0: cannot say. */
static uint64_t sndbuf_most(int fd)
{
    unsigned long lo, def, most = 0;
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_wmem", "re");
    if (f) {
        if (fscanf(f, "%lu %lu %lu", &lo, &def, &most) != 3)
            most = 0;
        (void)fclose(f);   /* read only: nothing to lose */
    }
    int now = 0;
    socklen_t len = sizeof now;
    if (most == 0 || getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &now, &len) != 0)
        return 0;
    return now > 0 && (unsigned long)now > most ? (uint64_t)now : most;
}

/* A connection in its first slow start: its window now and where its send
 * buffer stops it (os.h). */
static void slow_start(int fd, const struct tcp_info *ti, socklen_t len, struct os_tcp_stats *st)
{
    /* nothing sent again either: a controller that keeps its ssthresh unset
     * through a loss (BBR's start) has found the link, not its window */
    if (!FILLED(len, tcpi_min_rtt) || ti->tcpi_snd_ssthresh < SSTHRESH_UNSET ||
        ti->tcpi_snd_mss == 0 || ti->tcpi_total_retrans != 0)
        return;
    st->ss_window = (uint64_t)ti->tcpi_snd_cwnd * ti->tcpi_snd_mss;
    st->ss_sndbuf_most = sndbuf_most(fd);
}

int os_tcp_stats(int fd, struct os_tcp_stats *st)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    os_tcp_stats_unknown(st);
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return -1;
    if (FILLED(len, tcpi_rtt) && ti.tcpi_rtt > 0)
        st->rtt_ms = ti.tcpi_rtt / 1000.0;
    if (FILLED(len, tcpi_snd_cwnd))
        st->cwnd = ti.tcpi_snd_cwnd;
    if (FILLED(len, tcpi_total_retrans))
        st->retrans = ti.tcpi_total_retrans;
    if (FILLED(len, tcpi_delivery_rate))
        st->delivery_rate = ti.tcpi_delivery_rate;
    if (FILLED(len, tcpi_sndbuf_limited)) {
        st->busy_us = ti.tcpi_busy_time;
        st->rwnd_limited_us = ti.tcpi_rwnd_limited;
        st->sndbuf_limited_us = ti.tcpi_sndbuf_limited;
    }
    if (FILLED(len, tcpi_min_rtt) && ti.tcpi_min_rtt > 0 && ti.tcpi_min_rtt != UINT32_MAX)
        st->min_rtt_ms = ti.tcpi_min_rtt / 1000.0;
    slow_start(fd, &ti, len, st);
    return 0;
}
