/*
 * test_resume_key.c - a resumable session belongs to the key it began
 * under.  A keyed listener whose file holds two keys ("alpha" and "beta")
 * waits for the sender of a session that began under alpha: a connection
 * that passes the handshake under beta and offers the session's token is
 * refused and not admitted, while one under alpha with the same token is
 * taken back.  Both sides run here, over loopback: the listener's
 * admission (listener_admit) on a thread, the sender's greeting, handshake
 * and resume request through the same functions a weir sender uses.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "crypto/keyfile.h"
#include "crypto/seal.h"
#include "crypto/tls.h"
#include "link/listener.h"
#include "link/session.h"
#include "transport/tcp.h"
#include "transport/transport.h"

static char dir[64];
static const unsigned char token[CODEC_TOKEN_SIZE] = "the session 0123";

struct admission {
    struct tcp_listener l;
    struct listener_config cfg;
    struct weir_log log;
    atomic_bool stop;
    int rc, err;
    struct listener_peer peer;
    struct transport t;
};

static void *admit(void *arg)
{
    struct admission *a = arg;
    unsigned char ahead[LISTENER_AHEAD_MAX];
    size_t nahead = 0;
    struct weir_error err;
    a->rc = listener_admit(&a->l, &a->cfg, &a->stop, &a->log, &a->t, ahead, &nahead, &a->peer,
                           &err);
    a->err = errno;
    if (a->rc == 0)
        a->t.ops->close(&a->t, false, &a->stop, &err);
    return NULL;
}

/* One sender's try: greet, shake hands under key id, ask for the session
 * of token; 0 when the listener answered where it stands, -1 otherwise. */
static int try_resume(int port, struct keyring *ring, const char *id)
{
    struct weir_error err;
    const struct key *k = keyfile_find(ring, id, strlen(id));
    CHECK(k != NULL, "the key %s is in the file", id);
    struct tls_context *ctx;
    CHECK(tls_context_new(&ctx, ring, k, false, &err) == 0, "client context: %s", err.msg);
    struct tcp_settings s = {.family = AF_INET, .connect_timeout = 5};
    atomic_bool stop = false;
    struct weir_log log;
    log_init(&log, true, 0);
    int fd;
    char where[16];
    snprintf(where, sizeof where, "%d", port);
    CHECK(tcp_connect("127.0.0.1", where, &s, &stop, &log, "listener", &fd, &err) == 0,
          "connect: %s", err.msg);
    struct transport t;
    transport_tcp(&t, fd, "listener");
    struct session_out so;
    session_out_init(&so, &t, true, false, false, 0);
    so.rejoining = true;
    CHECK(session_read_greeting(&so, 5, &stop, &err) == 0, "greeting: %s", err.msg);
    CHECK(so.peer_features & CODEC_FEATURE_RESUME, "the listener offers resuming");
    CHECK(session_greet_keyed(&so, 5000, &stop, &err) == 0, "keyed greeting: %s", err.msg);
    CHECK(session_handshake(&t, ctx, 5, SEAL_EPOCH_RECORDS, &stop, NULL, NULL, 0, &err) == 0,
          "the handshake under %s: %s", id, err.msg);
    uint64_t at = 0;
    bool refused = false;
    int rc = session_rejoin(&so, token, 2, &stop, &at, &refused, &err);
    t.ops->close(&t, false, &stop, &err);
    tls_context_free(ctx);
    log_close(&log);
    return rc;
}

static void start(struct admission *a, struct tls_context *server, pthread_t *th)
{
    struct weir_error err;
    memset(a, 0, sizeof *a);
    log_init(&a->log, true, 0);
    struct tcp_settings s = {.family = AF_INET, .bind_addr = "127.0.0.1"};
    snprintf(s.listen_port, sizeof s.listen_port, "0");
    CHECK(tcp_listen(&s, &a->l, &err) == 0, "listen: %s", err.msg);
    a->cfg = (struct listener_config){.tls = server, .epoch_records = SEAL_EPOCH_RECORDS,
                                      .accept_timeout = 4, .io_timeout = 0,
                                      .handshake_timeout = 3, .channel_fd = -1,
                                      .resume = true, .resume_token = token,
                                      .resume_identity = "alpha"};
    CHECK(pthread_create(th, NULL, admit, a) == 0, "the listener's thread");
}

static int port_of(const struct tcp_listener *l)
{
    const char *colon = strrchr(l->addr, ':');
    return colon ? atoi(colon + 1) : 0;
}

int main(void)
{
    struct weir_error err;
    snprintf(dir, sizeof dir, "/tmp/weir-resume-key.XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "a scratch folder");
    char a_path[128], b_path[128], both[128];
    snprintf(a_path, sizeof a_path, "%s/a.key", dir);
    snprintf(b_path, sizeof b_path, "%s/b.key", dir);
    snprintf(both, sizeof both, "%s/both.key", dir);
    CHECK(keyfile_generate(a_path, "alpha", &err) == 0, "alpha: %s", err.msg);
    CHECK(keyfile_generate(b_path, "beta", &err) == 0, "beta: %s", err.msg);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cat '%s' '%s' > '%s' && chmod 600 '%s'", a_path, b_path, both,
             both);
    CHECK(system(cmd) == 0, "one file with both keys");
    struct keyring ring;
    const struct key *first;
    CHECK(keyfile_load(&ring, both, NULL, &first, &err) == 0, "load: %s", err.msg);
    struct tls_context *server;
    CHECK(tls_context_new(&server, &ring, NULL, true, &err) == 0, "server: %s", err.msg);

    /* beta, with alpha's session's token: refused, and not admitted */
    struct admission a;
    pthread_t th;
    start(&a, server, &th);
    CHECK(try_resume(port_of(&a.l), &ring, "beta") != 0,
          "a sender under another key is not taken back");
    pthread_join(th, NULL);
    log_close(&a.log);
    CHECK(a.rc != 0 && a.err == ETIMEDOUT,
          "the listener admitted nobody (rc %d, %s)", a.rc, strerror(a.err));
    tcp_listener_close(&a.l);

    /* the control: alpha, with the same token, is taken back */
    start(&a, server, &th);
    try_resume(port_of(&a.l), &ring, "alpha");   /* nobody sends it where it stands here */
    pthread_join(th, NULL);
    log_close(&a.log);
    CHECK(a.rc == 0 && a.peer.rejoined && strcmp(a.peer.identity, "alpha") == 0,
          "the session's own sender is taken back (rc %d, rejoined %d, identity '%s')", a.rc,
          a.peer.rejoined, a.peer.identity);
    tcp_listener_close(&a.l);

    tls_context_free(server);
    keyfile_free(&ring);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "clean up");
    CHECK_DONE();
}
