/*
 * test_seal.c - the encrypted connection's parts: key files (generated,
 * parsed, refused when open to others or malformed, never echoing a key),
 * the TLS 1.3 PSK handshake between two ends in memory (matching keys agree
 * on the record keys; a wrong or unknown key fails on both ends), and the
 * record layer (round trips, every flipped byte and a wrong number, another
 * direction or epoch rejected, keys that change by epoch).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "crypto/keyfile.h"
#include "crypto/seal.h"
#include "crypto/tls.h"

static char dir[64];

static void write_file(const char *name, const char *text, mode_t mode)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write %s", name);
    close(fd);
    chmod(path, mode);
}

static void load_fails(const char *name, const char *want)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct keyring ring;
    const struct key *k;
    struct weir_error err;
    CHECK(keyfile_load(&ring, path, NULL, &k, &err) != 0, "%s was accepted", name);
    CHECK(strstr(err.msg, want) != NULL, "%s: '%s', want '%s'", name, err.msg, want);
    CHECK(err.status == WEIR_EXIT_USAGE, "%s: status %d", name, err.status);
}

static void key_files(void)
{
    char path[128];
    struct weir_error err;
    snprintf(path, sizeof path, "%s/gen.key", dir);
    CHECK(keyfile_generate(path, "host-a", &err) == 0, "generate: %s", err.msg);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "a new key file is 0600");
    CHECK(keyfile_generate(path, "host-a", &err) != 0 && strstr(err.msg, "File exists"),
          "--genkey never overwrites: %s", err.msg);
    CHECK(keyfile_generate(path, "bad id!", &err) != 0, "a bad identity is refused");
    struct keyring ring;
    const struct key *k;
    CHECK(keyfile_load(&ring, path, NULL, &k, &err) == 0, "load: %s", err.msg);
    CHECK(strcmp(k->id, "host-a") == 0, "the identity is kept");
    keyfile_free(&ring);
    const char *good = "# two keys\n"
                       "a AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"
                       "b.c@d-e_f ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\n";
    write_file("good.key", good, 0600);
    snprintf(path, sizeof path, "%s/good.key", dir);
    CHECK(keyfile_load(&ring, path, "b.c@d-e_f", &k, &err) == 0 && k->secret[0] == 0x20,
          "--key-id picks a key: %s", err.msg);
    CHECK(ring.nkeys == 2 && keyfile_find(&ring, "a", 1), "both keys are there");
    keyfile_free(&ring);
    write_file("open.key", good, 0644);
    load_fails("open.key", "permissions 0644 on");
    write_file("twice.key", "a AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"
                            "a AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", 0600);
    load_fails("twice.key", "line 2: identity 'a' is there twice");
    write_file("short.key", "a AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd\n", 0600);
    load_fails("short.key", "line 1: the key is not 32 bytes of base64");
    write_file("nonl.key", "a AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", 0600);
    load_fails("nonl.key", "line 1 does not end in a newline");
    write_file("crlf.key", "# from a Windows editor\r\n"
                           "a AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\r\n", 0600);
    load_fails("crlf.key", "line 2 ends in a carriage return (Windows line endings");
    write_file("badid.key", "a/b AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", 0600);
    load_fails("badid.key", "line 1: an identity is");
    write_file("empty.key", "# nothing\n", 0600);
    load_fails("empty.key", "no key in it");
    /* a message about a bad line never quotes the key */
    write_file("secret.key", "a QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=xx\n", 0600);
    snprintf(path, sizeof path, "%s/secret.key", dir);
    CHECK(keyfile_load(&ring, path, NULL, &k, &err) != 0 && !strstr(err.msg, "QUJD"),
          "the key stays out of the message: %s", err.msg);
}

/* Drive both ends in memory until both are done (or one fails). */
static int handshake(struct tls_context *cc, struct tls_context *sc, struct seal_session *cs,
                     struct seal_session *ss, struct weir_error *cerr, struct weir_error *serr)
{
    struct tls_handshake *c, *s;
    CHECK(tls_handshake_new(&c, cc, cerr) == 0 && tls_handshake_new(&s, sc, serr) == 0,
          "handshake objects");
    unsigned char to_s[16384], to_c[16384];
    size_t ns = 0, nc = 0;
    int rc_c = TLS_WANT, rc_s = TLS_WANT, rounds = 0;
    while ((rc_c == TLS_WANT || rc_s == TLS_WANT) && rounds++ < 20) {
        size_t cap = sizeof to_s;
        if (rc_c == TLS_WANT)
            rc_c = tls_step(c, to_c, nc, to_s, &cap, cerr);
        else
            cap = 0;
        ns = cap;
        nc = 0;
        cap = sizeof to_c;
        if (rc_s == TLS_WANT || ns > 0)
            rc_s = rc_s == TLS_FAILED ? rc_s : tls_step(s, to_s, ns, to_c, &cap, serr);
        else
            cap = 0;
        nc = cap;
        if (rc_c == TLS_FAILED || rc_s == TLS_FAILED)
            break;
        if (rc_c == TLS_DONE && rc_s == TLS_WANT && ns == 0 && nc == 0)
            break;
    }
    int ok = rc_c == TLS_DONE && rc_s == TLS_DONE;
    if (ok) {
        CHECK(tls_export(c, cs, false, cerr) == 0 && tls_export(s, ss, true, serr) == 0,
              "export");
        CHECK(strcmp(tls_identity(s), "a") == 0, "the receiver knows who connected");
    }
    tls_handshake_free(c);
    tls_handshake_free(s);
    return ok ? 0 : -1;
}

static void handshakes(void)
{
    char path[128];
    struct keyring ring, other;
    const struct key *k, *ko;
    struct weir_error err;
    snprintf(path, sizeof path, "%s/good.key", dir);
    CHECK(keyfile_load(&ring, path, "a", &k, &err) == 0, "load");
    write_file("other.key", "a ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\n"
                            "z AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", 0600);
    snprintf(path, sizeof path, "%s/other.key", dir);
    CHECK(keyfile_load(&other, path, "a", &ko, &err) == 0, "load other");
    struct tls_context *cc, *sc, *wrong;
    CHECK(tls_context_new(&cc, &ring, k, false, &err) == 0, "client: %s", err.msg);
    CHECK(tls_context_new(&sc, &ring, NULL, true, &err) == 0, "server: %s", err.msg);
    struct seal_session cs, ss, cs2, ss2;
    struct weir_error ce, se;
    CHECK(handshake(cc, sc, &cs, &ss, &ce, &se) == 0, "matching keys: %s / %s", ce.msg,
          se.msg);
    CHECK(memcmp(&cs.to_receiver, &ss.to_receiver, sizeof cs.to_receiver) == 0 &&
          memcmp(&cs.to_sender, &ss.to_sender, sizeof cs.to_sender) == 0,
          "both ends derive the same record keys");
    CHECK(memcmp(cs.to_receiver.base, cs.to_sender.base, SEAL_BASE_BYTES) != 0,
          "each direction has its own key");
    CHECK(handshake(cc, sc, &cs2, &ss2, &ce, &se) == 0, "a second handshake");
    CHECK(memcmp(cs.to_receiver.base, cs2.to_receiver.base, SEAL_BASE_BYTES) != 0,
          "every connection gets fresh keys ((EC)DHE)");
    /* the same identity with another key */
    CHECK(tls_context_new(&wrong, &other, ko, false, &err) == 0, "wrong client");
    CHECK(handshake(wrong, sc, &cs2, &ss2, &ce, &se) != 0, "a wrong key was accepted");
    CHECK(strstr(se.msg, "keys do not match") || strstr(ce.msg, "keys do not match"),
          "a wrong key: '%s' / '%s'", ce.msg, se.msg);
    tls_context_free(wrong);
    /* an identity the receiver does not know */
    const struct key *kz = keyfile_find(&other, "z", 1);
    CHECK(tls_context_new(&wrong, &other, kz, false, &err) == 0, "unknown client");
    CHECK(handshake(wrong, sc, &cs2, &ss2, &ce, &se) != 0, "an unknown key was accepted");
    CHECK(strstr(se.msg, "not in the key file") != NULL, "an unknown key: '%s'", se.msg);
    tls_context_free(wrong);
    tls_context_free(cc);
    tls_context_free(sc);
    keyfile_free(&ring);
    keyfile_free(&other);
}

static void records(void)
{
    struct seal_direction d, e;
    for (int i = 0; i < SEAL_BASE_BYTES; i++)
        d.base[i] = (unsigned char)i, e.base[i] = (unsigned char)(i + 1);
    memset(d.iv, 7, sizeof d.iv);
    memset(e.iv, 7, sizeof e.iv);
    struct sealer tx, rx, other;
    struct weir_error err;
    CHECK(sealer_init(&tx, &d, 4, &err) == 0 && sealer_init(&rx, &d, 4, &err) == 0 &&
          sealer_init(&other, &e, 4, &err) == 0, "sealers");
    unsigned char plain[300], rec[300 + SEAL_OVERHEAD], out[300];
    for (size_t i = 0; i < sizeof plain; i++)
        plain[i] = (unsigned char)(i * 31);
    size_t plen;
    unsigned flags;
    for (uint64_t n = 0; n < 20; n++) {   /* five epochs of four records */
        size_t len = seal_record(&tx, n, n == 19 ? SEAL_END : 0, plain, 100 + n, rec);
        CHECK(len == 100 + n + SEAL_OVERHEAD, "sealed size");
        CHECK(open_record(&rx, n, rec, len, out, &plen, &flags) == 0 && plen == 100 + n &&
              memcmp(out, plain, plen) == 0, "record %llu opens", (unsigned long long)n);
        CHECK((flags & SEAL_END) == (n == 19 ? SEAL_END : 0u), "the END flag travels");
        CHECK(open_record(&rx, n + 1, rec, len, out, &plen, &flags) != 0,
              "record %llu opened as another number (reordered, replayed)",
              (unsigned long long)n);
        CHECK(open_record(&other, n, rec, len, out, &plen, &flags) != 0,
              "record opened with the other direction's key");
    }
    size_t len = seal_record(&tx, 5, 0, plain, 64, rec);
    for (size_t at = 0; at < len; at++)
        for (int bit = 0; bit < 8; bit++) {
            rec[at] ^= (unsigned char)(1u << bit);
            CHECK(open_record(&rx, 5, rec, len, out, &plen, &flags) != 0,
                  "flipping bit %d of byte %zu went unnoticed", bit, at);
            rec[at] ^= (unsigned char)(1u << bit);
        }
    CHECK(open_record(&rx, 5, rec, len - 1, out, &plen, &flags) != 0, "a cut record opens");
    /* a control record has a number space and a key of its own */
    len = seal_record(&tx, SEAL_CONTROL, 0, plain, 10, rec);
    CHECK(open_record(&rx, 0, rec, len, out, &plen, &flags) != 0 &&
          open_record(&rx, SEAL_CONTROL, rec, len, out, &plen, &flags) == 0,
          "control records are numbered apart");
    sealer_free(&tx);
    sealer_free(&rx);
    sealer_free(&other);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/weir-seal.XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    key_files();
    handshakes();
    records();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "clean up");
    CHECK_DONE();
}
