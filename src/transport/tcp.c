/* tcp.c - listening, connecting, tuning.  See tcp.h. */
#include "transport/tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/io.h"
#include "base/sync.h"
#include "os/os.h"

void tcp_format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], host, sizeof host);
            snprintf(buf, len, "%s:%u", host, ntohs(s6->sin6_port));
            return;
        }
        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
        return;
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
        port = ntohs(s4->sin_port);
    }
    snprintf(buf, len, "%s:%u", host, port);
}

int tcp_tune(int fd, double io_timeout)
{
    int one = 1;
    if (os_tcp_keepalive(fd, 60, 10, 6) != 0)
        return -1;
    /* unacknowledged data older than this fails the connection */
    if (io_timeout > 0 && os_tcp_user_timeout(fd, (unsigned)(io_timeout * 1000.0)) != 0)
        return -1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        return -1;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        return -1;
    return 0;
}

static int resolve_allowed(struct tcp_listener *l, const char *host, struct weir_error *err)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0)
        return error_set(err, WEIR_EXIT_NETWORK, "-I: cannot resolve allowed host '%s': %s",
                         host, gai_strerror(rc));
    for (ai = res; ai && l->nallowed < TCP_MAX_ALLOWED; ai = ai->ai_next) {
        memcpy(&l->allowed[l->nallowed++], ai->ai_addr, ai->ai_addrlen);
    }
    freeaddrinfo(res);
    snprintf(l->allow_name, sizeof l->allow_name, "%s", host);
    return 0;
}

/* v6only: -6 was given, so an IPv6 socket must not take IPv4 as well */
static int listen_on(struct tcp_listener *l, const struct addrinfo *ai, bool v6only,
                     struct weir_error *err)
{
    char where[80];
    tcp_format_addr(ai->ai_addr, where, sizeof where);
    /* non-blocking: the admission loop accepts until EAGAIN */
    int fd = os_socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0)
        return error_sys(err, WEIR_EXIT_NETWORK, errno, "listen %s: socket", where);
    int one = 1, zero = 0;
    /* the SYN of each connection is kept for tcp_syn_marked(); a kernel
     * without it only loses the mark, so its failure is not an error */
    os_tcp_save_syn(fd);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (ai->ai_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, v6only ? &one : &zero, sizeof zero) != 0)) {
        int e = errno;
        close(fd);
        return error_sys(err, WEIR_EXIT_NETWORK, e, "listen %s: setsockopt", where);
    }
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        close(fd);
        return error_sys(err, WEIR_EXIT_NETWORK, e, "listen %s", where);
    }
    struct sockaddr_storage ss;
    socklen_t slen = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &slen) != 0) {
        int e = errno;
        close(fd);
        return error_sys(err, WEIR_EXIT_NETWORK, e, "listen %s: getsockname", where);
    }
    tcp_format_addr((struct sockaddr *)&ss, l->addr, sizeof l->addr);
    l->fd = fd;
    return 0;
}

int tcp_listen(const struct tcp_settings *o, struct tcp_listener *l, struct weir_error *err)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
    if (o->allow_host[0] && resolve_allowed(l, o->allow_host, err))
        return -1;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE,
                             .ai_family = o->family};
    struct addrinfo *res;
    if (!o->bind_addr && o->family == AF_UNSPEC)
        hints.ai_family = AF_INET6;   /* dual stack: IPv6 and IPv4 on one socket */
    int rc = getaddrinfo(o->bind_addr, o->listen_port, &hints, &res);
    if (rc != 0 && hints.ai_family == AF_INET6 && !o->bind_addr) {
        hints.ai_family = AF_INET;
        rc = getaddrinfo(NULL, o->listen_port, &hints, &res);
    }
    if (rc != 0)
        return error_set(err, WEIR_EXIT_NETWORK, "listen %s:%s: %s",
                         o->bind_addr ? o->bind_addr : "*", o->listen_port, gai_strerror(rc));
    int result = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        result = listen_on(l, ai, o->family == AF_INET6, err);
        if (result == 0)
            break;
    }
    freeaddrinfo(res);
    if (result != 0 && !o->bind_addr && o->family == AF_UNSPEC) {
        /* no IPv6 on this host: fall back to IPv4 only */
        hints.ai_family = AF_INET;
        if (getaddrinfo(NULL, o->listen_port, &hints, &res) == 0) {
            result = listen_on(l, res, false, err);
            freeaddrinfo(res);
        }
    }
    return result;
}

int tcp_listener_adopt(const struct tcp_settings *o, int fd, struct tcp_listener *l,
                       struct weir_error *err)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
    struct sockaddr_storage ss;
    socklen_t slen = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &slen) != 0) {
        int e = errno;
        close(fd);
        return error_sys(err, WEIR_EXIT_NETWORK, e, "listening socket: getsockname");
    }
    if (o->allow_host[0] && resolve_allowed(l, o->allow_host, err)) {
        close(fd);
        return -1;
    }
    tcp_format_addr((struct sockaddr *)&ss, l->addr, sizeof l->addr);
    l->fd = fd;
    return 0;
}

static bool same_host(const struct sockaddr_storage *a, const struct sockaddr *peer)
{
    const unsigned char *pa = NULL, *pb = NULL;
    unsigned char v4a[16], v4b[16];
    size_t len = 16;
    static const unsigned char prefix[12] = {0,0,0,0,0,0,0,0,0,0,0xff,0xff};
    /* compare as IPv6, mapping IPv4 into ::ffff:0:0/96 */
    const struct sockaddr *sides[2] = {(const struct sockaddr *)a, peer};
    unsigned char *bufs[2] = {v4a, v4b};
    const unsigned char **outs[2] = {&pa, &pb};
    for (int i = 0; i < 2; i++) {
        if (sides[i]->sa_family == AF_INET) {
            memcpy(bufs[i], prefix, 12);
            memcpy(bufs[i] + 12, &((const struct sockaddr_in *)sides[i])->sin_addr, 4);
            *outs[i] = bufs[i];
        } else if (sides[i]->sa_family == AF_INET6) {
            *outs[i] = ((const struct sockaddr_in6 *)sides[i])->sin6_addr.s6_addr;
        } else {
            return false;
        }
    }
    return memcmp(pa, pb, len) == 0;
}

bool tcp_peer_allowed(const struct tcp_listener *l, const struct sockaddr *peer)
{
    if (l->nallowed == 0)
        return true;
    for (int i = 0; i < l->nallowed; i++)
        if (same_host(&l->allowed[i], peer))
            return true;
    return false;
}

void tcp_listener_close(struct tcp_listener *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

/* Set the traffic class of what fd sends next (IPv4 TOS, IPv6 TCLASS). */
static void set_class(int fd, int family, int value)
{
    if (family == AF_INET)
        (void)setsockopt(fd, IPPROTO_IP, IP_TOS, &value, sizeof value);
    else if (family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &value, sizeof value);
}

bool tcp_syn_marked(int fd)
{
    unsigned char syn[512];
    if (os_tcp_saved_syn(fd, syn, sizeof syn) < 2)
        return false;
    int version = syn[0] >> 4, cls;
    if (version == 4)
        cls = syn[1];
    else if (version == 6)
        cls = (syn[0] & 0x0f) << 4 | syn[1] >> 4;
    else
        return false;
    return (cls & 0xfc) == TCP_WEIR_MARK;   /* the ECN bits are the network's */
}

/* One non-blocking connect to one address, bounded by timeout_ms. */
static int connect_one(const struct addrinfo *ai, int timeout_ms, atomic_bool *stop,
                       bool mark)
{
    int fd = os_socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0)
        return -1;
    if (mark)   /* the SYN only: the class is reset below */
        set_class(fd, ai->ai_family, TCP_WEIR_MARK);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (io_wait(fd, POLLOUT, timeout_ms, stop) != 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 || soerr != 0) {
            close(fd);
            errno = soerr ? soerr : errno;
            return -1;
        }
    }
    if (mark)
        set_class(fd, ai->ai_family, 0);
    return fd;
}

static void pause_until(double until, atomic_bool *stop)
{
    while (!atomic_load(stop)) {
        double left = until - clock_now();
        if (left <= 0)
            return;
        struct timespec ts = {.tv_sec = (time_t)left,
                              .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
        if (nanosleep(&ts, NULL) == 0)
            return;
    }
}

/* One try at each address in turn: the first that connects, or -1 with
 * the last one's errno (ECANCELED at once on a stop). */
static int connect_any(const struct addrinfo *res, const struct tcp_settings *o,
                       double deadline, atomic_bool *stop)
{
    int last = EHOSTUNREACH;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        double left = deadline - clock_now();
        /* one try (--connect-timeout 0) still waits for a slow path's
         * answer, or a lost SYN's second chance */
        int ms = o->connect_timeout <= 0 || left > 5 ? 5000
                 : left > 0.2                        ? (int)(left * 1000)
                                                     : 200;
        int fd = connect_one(ai, ms, stop, !o->raw);
        if (fd >= 0)
            return fd;
        last = errno;
        if (last == ECANCELED)
            break;
    }
    errno = last;
    return -1;
}

int tcp_connect(const char *host, const char *port, const struct tcp_settings *o,
                atomic_bool *stop, struct weir_log *log, const char *name, int *out,
                struct weir_error *err)
{
    *out = -1;
    double deadline = clock_now() + o->connect_timeout;
    double backoff = 0.1;
    int last = 0;
    for (int attempt = 0;; attempt++) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = o->family,
                                 .ai_flags = AI_ADDRCONFIG}, *res;
        int rc = getaddrinfo(host, port, &hints, &res);
        if (rc != 0 && rc != EAI_AGAIN)
            return error_set(err, WEIR_EXIT_NETWORK, "%s: %s", name, gai_strerror(rc));
        if (rc == 0) {
            int fd = connect_any(res, o, deadline, stop);
            last = errno;
            freeaddrinfo(res);
            if (fd >= 0) {
                if (tcp_tune(fd, o->io_timeout) != 0) {
                    int e = errno;
                    close(fd);
                    return error_sys(err, WEIR_EXIT_NETWORK, e, "%s: setsockopt", name);
                }
                *out = fd;
                log_msg(log, LOG_DEBUG, "%s: connected", name);
                return 0;
            }
        } else {
            last = EAGAIN;
        }
        if (last == ECANCELED || atomic_load(stop))
            return error_sys(err, WEIR_EXIT_NETWORK, ECANCELED, "%s: connect", name);
        double now = clock_now();
        if (now >= deadline || o->connect_timeout <= 0)
            break;
        if (last == ECONNREFUSED && o->refusal_final)
            return error_sys(err, WEIR_EXIT_NETWORK, last, "%s: connect", name);
        if (attempt == 0)
            log_msg(log, LOG_INFO, "%s: %s; retrying for up to %g s", name, strerror(last),
                    o->connect_timeout);
        /* the last attempt is made at the deadline, not a backoff before it */
        pause_until(now + backoff < deadline ? now + backoff : deadline, stop);
        backoff = backoff * 2 > 1.0 ? 1.0 : backoff * 2;
    }
    if (o->connect_timeout > 0)
        return error_set(err, WEIR_EXIT_NETWORK, "%s: connect: %s (gave up after %g s)", name,
                         strerror(last), o->connect_timeout);
    return error_sys(err, WEIR_EXIT_NETWORK, last, "%s: connect", name);
}

int tcp_connect_addr(const struct sockaddr *sa, socklen_t len, double timeout,
                     double io_timeout, atomic_bool *stop, int *out)
{
    *out = -1;
    int fd = os_socket(sa->sa_family, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    set_class(fd, sa->sa_family, TCP_WEIR_MARK);
    double deadline = clock_now() + timeout;
    int e = 0;
    if (connect(fd, sa, len) != 0) {
        e = errno == EINPROGRESS ? 0 : errno;
        while (e == 0) {
            double left = deadline - clock_now();
            if (left <= 0) {
                e = ETIMEDOUT;
                break;
            }
            int ms = left > 0.1 ? 100 : (int)(left * 1000) + 1;
            if (io_wait(fd, POLLOUT, ms, stop) == 0)
                break;
            if (errno != ETIMEDOUT)
                e = errno;
        }
        int soerr = 0;
        socklen_t slen = sizeof soerr;
        if (e == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) != 0)
            e = errno;
        else if (e == 0)
            e = soerr;
    }
    set_class(fd, sa->sa_family, 0);
    if (e == 0 && tcp_tune(fd, io_timeout) != 0)
        e = errno;
    if (e != 0) {
        close(fd);
        errno = e;
        return -1;
    }
    *out = fd;
    return 0;
}

int tcp_pass_fd(int via, int fd, const void *msg, size_t len)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {(void *)msg, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space,
                       .msg_controllen = sizeof ctl.space};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return sendmsg(via, &m, MSG_DONTWAIT) < 0 ? -1 : 0;
}

int tcp_take_fd(int via)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    char msg[256];
    struct iovec iov = {msg, sizeof msg};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space,
                       .msg_controllen = sizeof ctl.space};
    if (recvmsg(via, &m, MSG_DONTWAIT) < 0)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    int fd = -1;
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&fd, CMSG_DATA(c), sizeof fd);
    if (fd < 0 || (m.msg_flags & MSG_CTRUNC)) {
        if (fd >= 0)
            close(fd);
        errno = EBADMSG;
        return -1;
    }
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}
