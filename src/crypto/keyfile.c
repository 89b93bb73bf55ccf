/* keyfile.c - see keyfile.h. */
#include "crypto/keyfile.h"
#include "crypto/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEYFILE_MAX_BYTES (64 << 10)
#define KEY_B64 44   /* base64 of 32 bytes, with its one '=' */

int keyfile_valid_id(const char *s, size_t len)
{
    if (len == 0 || len > KEY_ID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '@' || c == '-'))
            return 0;
    }
    return 1;
}

/* Decode exactly KEY_BYTES from KEY_B64 characters of base64. */
static int decode_key(const char *b64, size_t len, unsigned char *out)
{
    if (len != KEY_B64 || b64[KEY_B64 - 1] != '=' || b64[KEY_B64 - 2] == '=')
        return -1;
    unsigned char tmp[KEY_BYTES + 3];
    int n = EVP_DecodeBlock(tmp, (const unsigned char *)b64, (int)len);
    /* EVP_DecodeBlock counts the padding as a zero byte */
    int rc = n == KEY_BYTES + 1 && tmp[KEY_BYTES] == 0 ? 0 : -1;
    if (rc == 0)
        memcpy(out, tmp, KEY_BYTES);
    OPENSSL_cleanse(tmp, sizeof tmp);
    return rc;
}

static int read_file(const char *path, char *buf, size_t cap, size_t *len,
                     struct weir_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return error_sys(err, WEIR_EXIT_USAGE, errno, "key file %s", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return error_sys(err, WEIR_EXIT_USAGE, e, "key file %s", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return error_set(err, WEIR_EXIT_USAGE, "key file %s: not a regular file", path);
    }
    if (st.st_mode & 077) {
        close(fd);
        return error_set(err, WEIR_EXIT_USAGE, "key file %s: permissions %04o on %s are too "
                         "open (chmod 600 %s)", path, (unsigned)(st.st_mode & 07777), path,
                         path);
    }
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, cap - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return error_sys(err, WEIR_EXIT_USAGE, e, "key file %s: read", path);
        }
        if (n == 0)
            break;
        got += (size_t)n;
        if (got == cap) {
            close(fd);
            return error_set(err, WEIR_EXIT_USAGE, "key file %s: larger than %d bytes", path,
                             KEYFILE_MAX_BYTES - 1);
        }
    }
    close(fd);
    *len = got;
    return 0;
}

/* One line: a comment, or "<identity> <base64>". */
static int parse_line(struct keyring *ring, const char *path, unsigned lineno, const char *line,
                      size_t len, struct weir_error *err)
{
    if (len == 0 || line[0] == '#')
        return 0;
    if (line[len - 1] == '\r')
        return error_set(err, WEIR_EXIT_USAGE, "key file %s: line %u ends in a carriage return "
                         "(Windows line endings: convert the file, e.g. with dos2unix)", path,
                         lineno);
    const char *sp = memchr(line, ' ', len);
    size_t idlen = sp ? (size_t)(sp - line) : len;
    if (!sp)
        return error_set(err, WEIR_EXIT_USAGE, "key file %s: line %u: not '<identity> <base64 "
                         "of 32 bytes>'", path, lineno);
    if (!keyfile_valid_id(line, idlen))
        return error_set(err, WEIR_EXIT_USAGE, "key file %s: line %u: an identity is 1 to %d "
                         "of A-Z a-z 0-9 . _ @ -", path, lineno, KEY_ID_MAX);
    if (keyfile_find(ring, line, idlen))
        return error_set(err, WEIR_EXIT_USAGE, "key file %s: line %u: identity '%.*s' is "
                         "there twice", path, lineno, (int)idlen, line);
    if (ring->nkeys == KEYFILE_MAX_KEYS)
        return error_set(err, WEIR_EXIT_USAGE, "key file %s: more than %d keys", path,
                         KEYFILE_MAX_KEYS);
    struct key *k = &ring->keys[ring->nkeys];
    if (decode_key(sp + 1, len - idlen - 1, k->secret))
        return error_set(err, WEIR_EXIT_USAGE, "key file %s: line %u: the key is not 32 bytes "
                         "of base64", path, lineno);
    memcpy(k->id, line, idlen);
    k->id[idlen] = '\0';
    ring->nkeys++;
    return 0;
}

static int parse(struct keyring *ring, const char *path, const char *text, size_t len,
                 struct weir_error *err)
{
    unsigned lineno = 0;
    size_t start = 0;
    while (start < len) {
        lineno++;
        const char *nl = memchr(text + start, '\n', len - start);
        if (!nl)
            return error_set(err, WEIR_EXIT_USAGE, "key file %s: line %u does not end in a "
                             "newline", path, lineno);
        size_t n = (size_t)(nl - (text + start));
        if (parse_line(ring, path, lineno, text + start, n, err))
            return -1;
        start += n + 1;
    }
    if (ring->nkeys == 0)
        return error_set(err, WEIR_EXIT_USAGE, "key file %s: no key in it", path);
    return 0;
}

const struct key *keyfile_find(const struct keyring *ring, const char *id, size_t idlen)
{
    for (size_t i = 0; i < ring->nkeys; i++)
        if (strlen(ring->keys[i].id) == idlen && memcmp(ring->keys[i].id, id, idlen) == 0)
            return &ring->keys[i];
    return NULL;
}

/* The locked allocation for a ring's keys (secret.h: the process stops
 * being dumpable first). */
static int ring_alloc(struct keyring *ring, const char *path, struct weir_error *err)
{
    memset(ring, 0, sizeof *ring);
    ring->mapped = sizeof(struct key) * KEYFILE_MAX_KEYS;
    ring->keys = secret_alloc(ring->mapped);
    if (!ring->keys) {
        int e = errno;
        ring->mapped = 0;
        return error_sys(err, WEIR_EXIT_INTERNAL, e, "key file %s", path);
    }
    return 0;
}

static int choose(struct keyring *ring, const char *path, const char *want_id,
                  const struct key **chosen, int rc, struct weir_error *err)
{
    if (rc == 0) {
        *chosen = want_id ? keyfile_find(ring, want_id, strlen(want_id)) : &ring->keys[0];
        if (want_id && !*chosen)
            rc = error_set(err, WEIR_EXIT_USAGE, "key file %s: no key named '%s'", path,
                           want_id);
    }
    if (rc != 0)
        keyfile_free(ring);
    return rc;
}

int keyfile_load_text(struct keyring *ring, const char *name, const char *text, size_t len,
                      const struct key **chosen, struct weir_error *err)
{
    if (ring_alloc(ring, name, err))
        return -1;
    return choose(ring, name, NULL, chosen, parse(ring, name, text, len, err), err);
}

int keyfile_load(struct keyring *ring, const char *path, const char *want_id,
                 const struct key **chosen, struct weir_error *err)
{
    if (ring_alloc(ring, path, err))
        return -1;
    char *text = secret_alloc(KEYFILE_MAX_BYTES);
    if (!text) {
        keyfile_free(ring);
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "key file %s", path);
    }
    size_t len = 0;
    int rc = read_file(path, text, KEYFILE_MAX_BYTES, &len, err);
    if (rc == 0)
        rc = parse(ring, path, text, len, err);
    secret_free(text, KEYFILE_MAX_BYTES);
    return choose(ring, path, want_id, chosen, rc, err);
}

int keyfile_new_text(char *buf, size_t cap, const char *id)
{
    unsigned char secret[KEY_BYTES];
    size_t idlen = strlen(id);
    if (!keyfile_valid_id(id, idlen) || cap < idlen + KEY_B64 + 3 ||
        RAND_priv_bytes(secret, KEY_BYTES) != 1) {
        OPENSSL_cleanse(secret, sizeof secret);
        return -1;
    }
    memcpy(buf, id, idlen);
    buf[idlen] = ' ';
    size_t n = idlen + 1 + (size_t)EVP_EncodeBlock((unsigned char *)buf + idlen + 1, secret,
                                                   KEY_BYTES);
    OPENSSL_cleanse(secret, sizeof secret);
    buf[n++] = '\n';
    buf[n] = '\0';
    return (int)n;
}

void keyfile_free(struct keyring *ring)
{
    secret_free(ring->keys, ring->mapped);
    memset(ring, 0, sizeof *ring);
}

static int sync_dir_of(const char *path)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return -1;
    int fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int keyfile_generate(const char *path, const char *id, struct weir_error *err)
{
    if (!keyfile_valid_id(id, strlen(id)))
        return error_set(err, WEIR_EXIT_USAGE, "--key-id: '%s': an identity is 1 to %d of "
                         "A-Z a-z 0-9 . _ @ -", id, KEY_ID_MAX);
    unsigned char *secret = secret_alloc(4096);
    if (!secret)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "key file %s", path);
    char *line = (char *)secret + 64;
    int rc = -1;
    if (RAND_priv_bytes(secret, KEY_BYTES) != 1) {
        error_set(err, WEIR_EXIT_INTERNAL, "key file %s: no random bytes from OpenSSL", path);
        goto out;
    }
    size_t n = (size_t)snprintf(line, 200, "%s ", id);
    n += (size_t)EVP_EncodeBlock((unsigned char *)line + n, secret, KEY_BYTES);
    line[n++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        error_sys(err, WEIR_EXIT_USAGE, errno, "key file %s", path);
        goto out;
    }
    ssize_t w = write(fd, line, n);
    int e = errno;
    if (w != (ssize_t)n || fsync(fd) != 0) {
        e = w < 0 ? e : w != (ssize_t)n ? EIO : errno;
        close(fd);
        unlink(path);
        error_sys(err, WEIR_EXIT_OUTPUT, e, "key file %s: write", path);
        goto out;
    }
    if (close(fd) != 0 || sync_dir_of(path) != 0) {
        e = errno;
        unlink(path);
        error_sys(err, WEIR_EXIT_OUTPUT, e, "key file %s", path);
        goto out;
    }
    rc = 0;
out:
    secret_free(secret, 4096);
    return rc;
}
