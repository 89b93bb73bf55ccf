/*
 * test_resume_key.c - a keyed listener takes a broken session back only
 * under the key it began with.
 *
 * A real weir listener (the built weir binary, run as a child:
 * weir --key-file FILE -I 127.0.0.1:0 --reconnect 15 -o OUT) holds two keys
 * in its file, "alpha" and "beta".  This process is the sender, built from
 * the same library functions a weir sender uses (connection.c: greeting,
 * keyed greeting, TLS handshake, stream header, framed blocks, 'R' to
 * resume, the trailer and the answer):
 *
 *   1. alpha begins a transfer; the listener names the session ('N': a
 *      genuine token, drawn by the listener) and confirms ('C') the first
 *      blocks; then the connection is reset, mid-stream;
 *   2. beta, holding only its own key, passes the handshake (its key is in
 *      the listener's file) and offers alpha's token: the listener must not
 *      take it back (no 'C'), must say so in its log, and keeps waiting;
 *   3. the control: alpha comes back with the same token and is taken back
 *      where the listener stopped; the rest of the stream follows, the
 *      listener answers success for exactly these bytes and this chain,
 *      exits 0, and its output is the whole input.
 *
 * Every wait is bounded; the listener dies with this process
 * (PR_SET_PDEATHSIG) and is killed at exit.  WEIR names the weir binary;
 * without it, the weir next to this test's build directory is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#include "crypto/keyfile.h"
#include "crypto/seal.h"
#include "crypto/tls.h"
#include "format/codec.h"
#include "link/session.h"
#include "transport/tcp.h"
#include "transport/transport.h"
#include "weir/error.h"
#include "weir/log.h"

#define BLOCK 65536u   /* the stream header's block size */
#define BEFORE 4       /* blocks sent before the cut */
#define AFTER 4        /* and after alpha is back */
#define WAIT 5.0       /* seconds, for any one step */

/* the listener's window for the sender's return; also bounds its life if
 * this test stops talking to it */
#define WINDOW "15"

#define REFUSED_OTHER_KEY "it asked to resume a transfer that began under another key"
#define WAITING_LINE "waiting up to"
#define BACK_LINE "the sender is back after"

static char dir[PATH_MAX];
static char lerr_path[PATH_MAX + 16];
static pid_t listener = -1;
static atomic_bool never;
static struct weir_log quiet_log;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* At exit, whatever failed: the listener goes, the scratch folder too. */
static void cleanup(void)
{
    if (listener > 0) {
        kill(listener, SIGKILL);
        waitpid(listener, NULL, 0);
        listener = -1;
    }
    if (dir[0]) {
        const char *names[] = {"alpha.key", "beta.key", "listener.key", "out", "lerr"};
        char p[PATH_MAX + 32];
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            snprintf(p, sizeof p, "%s/%s", dir, names[i]);
            unlink(p);
        }
        rmdir(dir);
        dir[0] = '\0';
    }
}

/* The whole of a small file, NUL-ended, into buf; its length (0 when it
 * cannot be read). */
static size_t slurp(const char *path, char *buf, size_t cap)
{
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        for (;;) {
            ssize_t r = read(fd, buf + n, cap - 1 - n);
            if (r > 0 && n + (size_t)r < cap - 1) {
                n += (size_t)r;
                continue;
            }
            if (r > 0)
                n += (size_t)r;
            if (r < 0 && errno == EINTR)
                continue;
            break;
        }
        close(fd);
    }
    buf[n] = '\0';
    return n;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *at = strstr(hay, needle); at; at = strstr(at + 1, needle))
        n++;
    return n;
}

static char log_text[65536];

/* Wait until the listener's log holds at least `times` lines with text,
 * within secs; the log as it stands is in log_text either way. */
static bool log_has(const char *text, int times, double secs)
{
    double until = now() + secs;
    for (;;) {
        slurp(lerr_path, log_text, sizeof log_text);
        if (count_of(log_text, text) >= times)
            return true;
        if (now() > until)
            return false;
        nap_ms(20);
    }
}

/* Concatenate two key files into a third, made as weir wants it (0600). */
static void join_keys(const char *a, const char *b, const char *both)
{
    char ka[512], kb[512];
    size_t na = slurp(a, ka, sizeof ka), nb = slurp(b, kb, sizeof kb);
    CHECK(na > 0 && nb > 0, "the two key files can be read (%zu and %zu bytes)", na, nb);
    int fd = open(both, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "create %s: %s", both, strerror(errno));
    CHECK(write(fd, ka, na) == (ssize_t)na && write(fd, kb, nb) == (ssize_t)nb,
          "write %s", both);
    CHECK(close(fd) == 0, "close %s", both);
}

/* The weir binary: WEIR, or ../weir from this test's directory. */
static void find_weir(char *out, size_t cap)
{
    const char *env = getenv("WEIR");
    if (env && env[0]) {
        snprintf(out, cap, "%s", env);
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
        self[n] = '\0';
        snprintf(out, cap, "%s/../weir", dirname(self));
    }
    CHECK(access(out, X_OK) == 0, "the weir binary %s (set WEIR to name it): %s", out,
          strerror(errno));
}

/* Start the keyed, resumable listener; its port. */
static int start_listener(const char *weir, const char *keys, const char *out)
{
    int fd = open(lerr_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "create %s: %s", lerr_path, strerror(errno));
    pid_t parent = getpid();
    listener = fork();
    CHECK(listener >= 0, "fork: %s", strerror(errno));
    if (listener == 0) {
        /* the listener must not outlive this test, however it ends */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(fd, 2) < 0)
            _exit(127);
        execl(weir, weir, "--key-file", keys, "-I", "127.0.0.1:0", "--reconnect", WINDOW,
              "--accept-timeout", WINDOW, "-o", out, (char *)NULL);
        _exit(127);
    }
    close(fd);
    CHECK(log_has("listening on", 1, 10), "the listener says where it listens: %s", log_text);
    const char *colon = strrchr(strstr(log_text, "listening on"), ':');
    int port = colon ? atoi(colon + 1) : 0;
    CHECK(port > 0 && port < 65536, "the listener's port (%d)", port);
    return port;
}

/* The listener's exit status, within secs (-1: still running). */
static int listener_exit(double secs)
{
    double until = now() + secs;
    for (;;) {
        int st;
        pid_t r = waitpid(listener, &st, WNOHANG);
        CHECK(r >= 0, "waitpid: %s", strerror(errno));
        if (r == listener) {
            listener = -1;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (now() > until)
            return -1;
        nap_ms(20);
    }
}

/* A sender's key: the ring of its own key file, and a client context. */
struct sender_key {
    struct keyring ring;
    struct tls_context *ctx;
    const char *id;
};

static void load_sender_key(struct sender_key *k, const char *path, const char *id)
{
    struct weir_error err;
    const struct key *mine;
    CHECK(keyfile_load(&k->ring, path, id, &mine, &err) == 0, "load %s: %s", path, err.msg);
    CHECK(mine && strcmp(mine->id, id) == 0, "%s holds the key '%s'", path, id);
    CHECK(tls_context_new(&k->ctx, &k->ring, mine, false, &err) == 0, "%s's context: %s", id,
          err.msg);
    k->id = id;
}

/* Connect to the listener as the sender with key k, as weir's writer_open
 * and rejoin do: the listener's greeting (a keyed weir receiver that may
 * resume), this end's keyed greeting, the TLS handshake; then t carries
 * sealed records under k. */
static void reach(int port, struct sender_key *k, struct session_out *s, struct transport *t)
{
    struct weir_error err;
    char where[16];
    snprintf(where, sizeof where, "%d", port);
    struct tcp_settings set = {.family = AF_INET, .connect_timeout = WAIT};
    int fd;
    CHECK(tcp_connect("127.0.0.1", where, &set, &never, &quiet_log, "listener", &fd, &err) == 0,
          "%s connects: %s", k->id, err.msg);
    transport_tcp(t, fd, "listener");
    s->t = t;
    s->greeted = false;
    CHECK(session_read_greeting(s, WAIT, &never, &err) == 0, "%s hears the greeting: %s", k->id,
          err.msg);
    CHECK((s->peer_features & CODEC_FEATURE_KEY) && (s->peer_features & CODEC_FEATURE_RESUME),
          "the listener has a key and resumes (features %#x)", (unsigned)s->peer_features);
    CHECK(session_greet_keyed(s, (int)(WAIT * 1000), &never, &err) == 0, "%s greets: %s",
          k->id, err.msg);
    CHECK(session_handshake(t, k->ctx, WAIT, SEAL_EPOCH_RECORDS, &never, NULL, NULL, 0, &err) ==
              STEP_OK,
          "%s passes the handshake (its key is in the listener's file): %s", k->id, err.msg);
    CHECK(t->sealed != NULL, "%s's connection carries sealed records", k->id);
}

/* Read the listener's records until one that is not a keepalive. */
static void next_record(struct transport *t, struct codec_record *r, const char *what)
{
    struct weir_error err;
    unsigned char raw[CODEC_RECORD_MAX];
    size_t got;
    bool eof;
    do {
        int rc = session_read_record(t, (int)(WAIT * 1000), &never, r, raw, &got, &eof, &err);
        if (rc != 0)
            slurp(lerr_path, log_text, sizeof log_text);
        CHECK(rc == 0, "%s: %s; the listener's log:\n%s", what, err.msg, log_text);
    } while (r->type == 'K');
}

static void send_blocks(struct session_out *s, const unsigned char *data, int first, int n)
{
    for (int i = first; i < first + n; i++)
        CHECK(session_frame(s, data + (size_t)i * BLOCK, BLOCK, (int)(WAIT * 1000), &never) ==
                  (ssize_t)BLOCK,
              "block %d goes out: %s", i, strerror(errno));
}

/* A connection given up on, as weir's sender lets one go: reset, closed. */
static void cut(struct transport *t)
{
    struct weir_error ignored;
    t->ops->abort(t);
    transport_close(t, false, &never, &ignored);
    transport_none(t);
}

int main(void)
{
    struct weir_error err;
    atexit(cleanup);
    signal(SIGPIPE, SIG_IGN);
    log_init(&quiet_log, true, 0);
    char weir[PATH_MAX + 16];
    find_weir(weir, sizeof weir);

    snprintf(dir, sizeof dir, "/tmp/weir-resume-key.XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "a scratch folder: %s", strerror(errno));
    char a_path[PATH_MAX + 16], b_path[PATH_MAX + 16], both[PATH_MAX + 16], out[PATH_MAX + 16];
    snprintf(a_path, sizeof a_path, "%s/alpha.key", dir);
    snprintf(b_path, sizeof b_path, "%s/beta.key", dir);
    snprintf(both, sizeof both, "%s/listener.key", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(lerr_path, sizeof lerr_path, "%s/lerr", dir);

    /* keyfile_generate makes a new file of one key (it never appends): the
     * listener's file is both of them, each sender holds only its own */
    CHECK(keyfile_generate(a_path, "alpha", &err) == 0, "alpha's key: %s", err.msg);
    CHECK(keyfile_generate(b_path, "beta", &err) == 0, "beta's key: %s", err.msg);
    join_keys(a_path, b_path, both);
    struct keyring lring;
    const struct key *first;
    CHECK(keyfile_load(&lring, both, NULL, &first, &err) == 0, "the listener's file: %s",
          err.msg);
    CHECK(lring.nkeys == 2 && keyfile_find(&lring, "alpha", 5) && keyfile_find(&lring, "beta", 4),
          "the listener's file holds alpha and beta (%zu keys)", lring.nkeys);
    keyfile_free(&lring);
    struct sender_key alpha, beta;
    load_sender_key(&alpha, a_path, "alpha");
    load_sender_key(&beta, b_path, "beta");

    /* the stream: blocks of a pattern any misplaced byte would break */
    size_t total = (size_t)(BEFORE + AFTER) * BLOCK;
    unsigned char *data = malloc(total);
    CHECK(data != NULL, "memory for the stream");
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < total; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        data[i] = (unsigned char)x;
    }

    int port = start_listener(weir, both, out);

    /* 1. alpha begins; the listener names the session and confirms what it
     * holds; then the connection is reset in the middle of the stream */
    struct session_out s;
    struct transport t;
    session_out_init(&s, &t, true, true, false, BLOCK);
    s.resume = true;
    reach(port, &alpha, &s, &t);
    CHECK(session_begin(&s, (int)(WAIT * 1000), &never, &err) == 0, "the stream header: %s",
          err.msg);
    struct codec_record r;
    next_record(&t, &r, "the session's name");
    CHECK(r.type == 'N', "the listener names the session (got '%c')", r.type);
    unsigned char token[CODEC_TOKEN_SIZE];
    memcpy(token, r.token, sizeof token);
    send_blocks(&s, data, 0, BEFORE);
    uint64_t held = 0;
    for (double until = now() + WAIT; held < s.sent;) {
        CHECK(now() < until, "the listener confirms the %llu bytes sent (it said %llu)",
              (unsigned long long)s.sent, (unsigned long long)held);
        next_record(&t, &r, "a confirmation");
        CHECK(r.type == 'C', "only confirmations come while the stream flows (got '%c')",
              r.type);
        held = r.bytes;
    }
    CHECK(held == s.sent, "the listener holds what was sent (%llu of %llu bytes)",
          (unsigned long long)held, (unsigned long long)s.sent);
    cut(&t);
    CHECK(log_has(WAITING_LINE, 1, WAIT), "the listener waits for alpha to come back: %s",
          log_text);

    /* 2. beta, with alpha's token: its handshake passes, its resume must not */
    struct session_out sb;
    struct transport tb;
    session_out_init(&sb, &tb, true, true, false, BLOCK);
    sb.resume = true;
    sb.rejoining = true;
    reach(port, &beta, &sb, &tb);
    uint64_t at = UINT64_MAX;
    bool told = false;
    int rc = session_rejoin(&sb, token, WAIT, &never, &at, &told, &err);
    int why = errno;
    cut(&tb);
    bool logged = log_has(REFUSED_OTHER_KEY, 1, rc == 0 ? 0.5 : WAIT);
    CHECK(rc != 0 && at == UINT64_MAX,
          "beta, with alpha's token, is not taken back (it was, at byte %llu); the "
          "listener's log:\n%s", (unsigned long long)at, log_text);
    /* past the handshake, a keyed listener tells a refused peer nothing:
     * it closes the connection, which beta reads as sealed records that end
     * without their last (EPIPE), not as an answer */
    CHECK(!told && (why == EPIPE || why == ECONNRESET),
          "the listener closes beta's connection without a word (%s)", err.msg);
    CHECK(logged, "the listener logs why it refused beta: %s", log_text);
    CHECK(count_of(log_text, BACK_LINE) == 0 && !strstr(log_text, "with the key 'beta'"),
          "and did not take beta as its sender: %s", log_text);

    /* 3. the control: alpha, with the same token, is taken back where the
     * listener stopped, and the transfer ends whole */
    s.rejoining = true;
    reach(port, &alpha, &s, &t);
    at = UINT64_MAX;
    CHECK(session_rejoin(&s, token, WAIT, &never, &at, &told, &err) == 0,
          "alpha, with its token, is taken back: %s", err.msg);
    CHECK(at == held, "it resumes where the listener stopped (byte %llu, held %llu)",
          (unsigned long long)at, (unsigned long long)held);
    CHECK(log_has(BACK_LINE, 1, WAIT) && strstr(log_text, "with the key 'alpha': the sender is "
                                                          "back"),
          "the listener logs alpha's return: %s", log_text);
    send_blocks(&s, data, BEFORE, AFTER);
    bool says_read = false;
    /* both greetings offer it: the trailer ends the stream, and the sender
     * says it read the answer ('D', the last sealed record) before it
     * closes */
    says_read = s.peer_features & CODEC_FEATURE_ANSWER_READ;
    if (!says_read)
        transport_sealed_last(&t);   /* the trailer ends this direction (writer_end) */
    CHECK(session_trailer(&s, (int)(WAIT * 1000), &never) == 0, "the trailer: %s",
          strerror(errno));
    if (!says_read)
        CHECK(t.ops->half_close(&t, &err) == 0, "the end of the stream: %s", err.msg);
    do
        next_record(&t, &r, "the answer");
    while (r.type == 'C');
    CHECK(r.type == 'S' && r.code == 0, "the listener answers success ('%c', code %d: %s)",
          r.type, r.type == 'S' ? r.code : -1, r.type == 'S' ? r.msg : "");
    CHECK(r.bytes == session_framed_bytes(&s) && r.bytes == total,
          "for every byte (%llu of %zu)", (unsigned long long)r.bytes, total);
    CHECK(r.chain == session_framed_chain(&s), "and for this stream (its chain)");
    if (says_read) {
        unsigned char d[CODEC_SESSION_SIZE];
        size_t n = codec_done(d, r.bytes, r.chain);
        transport_sealed_last(&t);
        CHECK(transport_write_all(&t, d, n, (int)(WAIT * 1000), &never) == 0 &&
                  t.ops->half_close(&t, &err) == 0,
              "alpha says it read the answer: %s", strerror(errno));
    }
    int st = listener_exit(WAIT);
    slurp(lerr_path, log_text, sizeof log_text);
    CHECK(st == 0, "the listener exits 0 (status %d): %s", st, log_text);
    CHECK(transport_close(&t, true, &never, &err) == 0, "alpha's connection closes: %s",
          err.msg);
    CHECK(count_of(log_text, BACK_LINE) == 1 && count_of(log_text, REFUSED_OTHER_KEY) == 1,
          "one refusal, one return: %s", log_text);
    unsigned char *got = malloc(total + 1);
    CHECK(got != NULL, "memory for the output");
    int fd = open(out, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0, "the output %s: %s", out, strerror(errno));
    size_t n = 0;
    for (ssize_t k; (k = read(fd, got + n, total + 1 - n)) > 0;)
        n += (size_t)k;
    close(fd);
    CHECK(n == total && memcmp(got, data, total) == 0,
          "the output is the stream, once (%zu bytes of %zu)", n, total);

    printf("# the listener's log:\n%s", log_text);   /* what it said, for the record */
    free(got);
    free(data);
    tls_context_free(alpha.ctx);
    tls_context_free(beta.ctx);
    keyfile_free(&alpha.ring);
    keyfile_free(&beta.ring);
    log_close(&quiet_log);
    CHECK_DONE();
}
