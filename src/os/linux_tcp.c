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
#include <string.h>
#include <sys/socket.h>

/* Whether the kernel filled the field that ends at `end` bytes. */
#define FILLED(len, field) \
    ((size_t)(len) >= offsetof(struct tcp_info, field) + sizeof(((struct tcp_info *)0)->field))

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
    return 0;
}
