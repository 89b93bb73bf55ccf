/*
 * transport_digest.c - a message digest of the data as an output (-H,
 * --md5, --hash ALGO).  See src/transport/transport.h.
 *
 * The digest is one more reader of the buffer, on its own writer thread,
 * so it costs the other outputs nothing but a share of the CPU; the result
 * is kept in the transport when it closes after a complete stream.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"

static ssize_t digest_read(struct transport *t, void *buf, size_t n, int timeout_ms,
                           atomic_bool *stop)
{
    (void)t, (void)buf, (void)n, (void)timeout_ms, (void)stop;
    errno = EBADF;
    return -1;
}

static ssize_t digest_writev(struct transport *t, const struct iovec *iov, int cnt,
                             int timeout_ms, atomic_bool *stop)
{
    (void)timeout_ms;
    if (stop && atomic_load(stop)) {
        errno = ECANCELED;
        return -1;
    }
    size_t total = 0;
    for (int i = 0; i < cnt; i++) {
        if (EVP_DigestUpdate(t->digest, iov[i].iov_base, iov[i].iov_len) != 1) {
            errno = EIO;
            return total > 0 ? (ssize_t)total : -1;
        }
        total += iov[i].iov_len;
    }
    return (ssize_t)total;
}

static int digest_wait(struct transport *t, short events, int timeout_ms, atomic_bool *stop)
{
    (void)t, (void)events, (void)timeout_ms;
    if (stop && atomic_load(stop)) {
        errno = ECANCELED;
        return -1;
    }
    return 0;
}

static int digest_half_close(struct transport *t, struct weir_error *err)
{
    (void)t, (void)err;
    return 0;
}

static void digest_abort(struct transport *t)
{
    (void)t;
}

static int digest_close(struct transport *t, bool success, atomic_bool *stop,
                        struct weir_error *err)
{
    (void)stop;
    int rc = 0;
    if (t->digest && success) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        if (EVP_DigestFinal_ex(t->digest, md, &len) != 1) {
            rc = error_set(err, WEIR_EXIT_INTERNAL, "%s: the digest could not be finished",
                           t->name);
        } else {
            for (unsigned i = 0; i < len && 2 * i + 2 < sizeof t->digest_hex; i++)
                snprintf(t->digest_hex + 2 * i, 3, "%02x", md[i]);
        }
    }
    EVP_MD_CTX_free(t->digest);
    t->digest = NULL;
    return rc;
}

static const struct transport_ops digest_ops = {
    .read = digest_read, .writev = digest_writev, .wait = digest_wait,
    .half_close = digest_half_close, .abort = digest_abort, .close = digest_close,
};

int transport_digest(struct transport *t, const char *algo, struct weir_error *err)
{
    transport_none(t);
    snprintf(t->name, sizeof t->name, "%s digest", algo);
    t->status = WEIR_EXIT_INTERNAL;
    const EVP_MD *md = EVP_get_digestbyname(algo);
    if (!md)
        return error_set(err, WEIR_EXIT_USAGE, "--hash: '%s' is not a digest this weir knows",
                         algo);
    t->digest = EVP_MD_CTX_new();
    if (!t->digest || EVP_DigestInit_ex(t->digest, md, NULL) != 1) {
        EVP_MD_CTX_free(t->digest);
        t->digest = NULL;
        return error_set(err, WEIR_EXIT_INTERNAL, "%s: cannot start the digest", t->name);
    }
    t->ops = &digest_ops;
    t->kind = TRANSPORT_DIGEST;
    snprintf(t->digest_algo, sizeof t->digest_algo, "%s", EVP_MD_get0_name(md));
    return 0;
}
