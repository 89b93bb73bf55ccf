/*
 * delayline.c - a long path for the bench, where the kernel has no netem:
 * two TUN devices, one in each of two network namespaces, and every packet
 * between them held for a one-way delay, a share of them dropped at random.
 *
 *   delayline NS_A DEV_A NS_B DEV_B DELAY_MS [LOSS_PERCENT [QUEUE_MIB]]
 *
 * It makes DEV_A in the named namespace NS_A and DEV_B in NS_B (ip netns
 * add), prints "ready" on standard output once both exist, and forwards
 * until SIGINT or SIGTERM; then it prints what it passed and dropped, each
 * way, on standard error.  The addresses, the links and a rate limit (tbf)
 * are the caller's (bench/longpath.sh).  Each direction is a FIFO: the delay
 * is the same for every packet, so packets leave in the order they came.
 * A full queue (QUEUE_MIB each way, default 256) drops what arrives, as a
 * router's would, and says how many.
 *
 * Without loss the devices take TCP's segmentation offload (IFF_VNET_HDR,
 * TUNSETOFFLOAD): a sender's 64 KiB super-packet crosses as one read and
 * one write, as it crosses a veth pair, so the line spends a fortieth of
 * the system calls it would spend on 1500-byte packets and a 1 Gbit/s
 * path does not take a whole core.  With loss it forwards packet by packet,
 * so that what it drops is one segment, as a router would.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define SLOT_SMALL 2048                 /* a packet's room: the devices' MTU stays under it */
#define SLOT_LARGE (65536 + 256)        /* a super-packet's, with its virtio_net_hdr */
#define BURST 256          /* packets read from a device at a time */

static volatile sig_atomic_t stopping;

struct slot {
    uint64_t due;          /* when it leaves, in ns of CLOCK_MONOTONIC */
    size_t len;
    unsigned char *data;   /* room for slot_size bytes */
};

struct line {
    const char *name;      /* "A to B" */
    int in, out;
    struct slot *q;
    unsigned char *spare;  /* where a packet that finds the queue full is read to */
    size_t cap, head, count, slot_size;
    uint64_t passed, lost, full, refused;
};

static void die(const char *what, const char *obj)
{
    fprintf(stderr, "delayline: %s%s%s: %s\n", what, obj ? " " : "", obj ? obj : "",
            strerror(errno));
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Enter the named namespace, make the TUN device there, come back; the
 * descriptor stays bound to the device. */
static int open_tun(const char *ns, const char *dev, bool offload)
{
    char path[256];
    snprintf(path, sizeof path, "/var/run/netns/%s", ns);
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int there = open(path, O_RDONLY | O_CLOEXEC);
    if (home < 0 || there < 0)
        die("cannot open the namespace", home < 0 ? "/proc/self/ns/net" : path);
    if (setns(there, CLONE_NEWNET) != 0)
        die("setns", path);
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        die("open", "/dev/net/tun");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", dev);
    if (ioctl(fd, TUNSETIFF, &ifr) != 0)
        die("TUNSETIFF", dev);
    /* the header that comes with each packet says how it was cut; the
     * line passes it on with the packet, so the far device cuts it alike */
    if (offload && ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) != 0)
        die("TUNSETOFFLOAD", dev);
    if (setns(home, CLONE_NEWNET) != 0)
        die("setns back", "/proc/self/ns/net");
    close(home);
    close(there);
    return fd;
}

/* A random number in [0, 1), xorshift64*: enough to drop a share. */
static double uniform(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* Read what the device has, up to BURST packets, into the queue. */
static void take(struct line *l, uint64_t delay, double loss, uint64_t *rng)
{
    for (int i = 0; i < BURST; i++) {
        bool room = l->count < l->cap;
        struct slot *s = room ? &l->q[(l->head + l->count) % l->cap] : NULL;
        ssize_t n = read(l->in, s ? s->data : l->spare, l->slot_size);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n < 0)
            die("read", l->name);
        if (!room) {
            l->full++;
            continue;
        }
        if (loss > 0 && uniform(rng) < loss) {
            l->lost++;
            continue;
        }
        s->len = (size_t)n;
        s->due = now_ns() + delay;
        l->count++;
    }
}

/* Write every packet that is due; the time of the next, or 0. */
static uint64_t give(struct line *l, uint64_t now)
{
    while (l->count > 0) {
        struct slot *s = &l->q[l->head];
        if (s->due > now)
            return s->due;
        if (write(l->out, s->data, s->len) < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return now + 100000;   /* the device is busy: again in 0.1 ms */
            if (errno != EINVAL && errno != EIO)
                die("write", l->name);
            l->refused++;   /* the kernel would not take it (the device went down) */
        } else {
            l->passed++;
        }
        l->head = (l->head + 1) % l->cap;
        l->count--;
    }
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static void run(struct line *ab, struct line *ba, uint64_t delay, double loss)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    while (!stopping) {
        uint64_t now = now_ns(), next = 0;
        uint64_t a = give(ab, now), b = give(ba, now);
        next = a && (!b || a < b) ? a : b;
        struct pollfd p[2] = {{.fd = ab->in, .events = POLLIN}, {.fd = ba->in, .events = POLLIN}};
        struct timespec wait = {1, 0};
        if (next) {
            uint64_t left = next > now ? next - now : 0;
            wait.tv_sec = (time_t)(left / 1000000000u);
            wait.tv_nsec = (long)(left % 1000000000u);
        }
        if (ppoll(p, 2, &wait, NULL) < 0 && errno != EINTR)
            die("ppoll", NULL);
        if (p[0].revents & POLLIN)
            take(ab, delay, loss, &rng);
        if (p[1].revents & POLLIN)
            take(ba, delay, loss, &rng);
    }
}

static void queue(struct line *l, const char *name, int in, int out, size_t mib, bool offload)
{
    l->name = name;
    l->in = in;
    l->out = out;
    l->slot_size = offload ? SLOT_LARGE : SLOT_SMALL;
    l->cap = mib * 1024 * 1024 / l->slot_size;
    l->q = calloc(l->cap, sizeof *l->q);
    unsigned char *room = malloc((l->cap + 1) * l->slot_size);
    if (!l->q || !room)
        die("malloc", name);
    for (size_t i = 0; i < l->cap; i++)
        l->q[i].data = room + i * l->slot_size;
    l->spare = room + l->cap * l->slot_size;
}

int main(int argc, char **argv)
{
    if (argc < 6 || argc > 8) {
        fprintf(stderr, "usage: delayline NS_A DEV_A NS_B DEV_B DELAY_MS [LOSS_PERCENT "
                        "[QUEUE_MIB]]\n");
        return 2;
    }
    double delay_ms = atof(argv[5]);
    double loss = argc > 6 ? atof(argv[6]) / 100.0 : 0;
    size_t mib = argc > 7 ? (size_t)atol(argv[7]) : 256;
    if (delay_ms < 0 || delay_ms > 10000 || loss < 0 || loss >= 1 || mib < 1 || mib > 8192) {
        fprintf(stderr, "delayline: DELAY_MS 0 to 10000, LOSS_PERCENT 0 to under 100, "
                        "QUEUE_MIB 1 to 8192\n");
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    bool offload = loss == 0 && !getenv("DELAYLINE_NO_OFFLOAD");
    int a = open_tun(argv[1], argv[2], offload), b = open_tun(argv[3], argv[4], offload);
    struct line ab, ba;
    memset(&ab, 0, sizeof ab);
    memset(&ba, 0, sizeof ba);
    queue(&ab, "A to B", a, b, mib, offload);
    queue(&ba, "B to A", b, a, mib, offload);
    printf("ready\n");
    fflush(stdout);
    run(&ab, &ba, (uint64_t)(delay_ms * 1e6), loss);
    for (struct line *l = &ab; l; l = l == &ab ? &ba : NULL)
        fprintf(stderr, "delayline: %s: %llu passed, %llu dropped at random, %llu dropped "
                "with the queue full, %llu refused by the kernel\n", l->name,
                (unsigned long long)l->passed, (unsigned long long)l->lost,
                (unsigned long long)l->full, (unsigned long long)l->refused);
    return 0;
}
