/*
 * keyfile.h - weir's key files: named 256-bit keys shared by the two ends
 * of a transfer (--genkey, --key-file, --key-id).
 *
 * A key file is text.  Each key is one line, "<identity> <base64 of 32
 * bytes>", ending in a newline; lines that start with '#' are comments, so
 * files can be concatenated.  Identities are unique within a file and made
 * of [A-Za-z0-9._@-] (at most 64 characters); an identity is public (it
 * travels in clear in the handshake), a key is not.
 *
 * Contract: keyfile_load() is called once, by the engine's thread at
 * setup.  It refuses a file that group or others may read, or that it
 * cannot parse, naming the line; its messages never contain key material.
 * Keys live in one locked (mlock), non-dumpable allocation, and the process
 * is marked non-dumpable once a key is loaded (OpenSSL keeps copies of its
 * own); keyfile_free() wipes them.  keyfile_generate() writes a new file
 * with mode 0600 and never overwrites one.  Failures are WEIR_EXIT_USAGE
 * (a bad or unreadable key file is the user's to fix) with "key file F:".
 */
#ifndef WEIR_KEYFILE_H
#define WEIR_KEYFILE_H

#include <stddef.h>
#include <stdint.h>

#include "weir/error.h"

#define KEY_BYTES 32
#define KEY_ID_MAX 64
#define KEYFILE_MAX_KEYS 256

struct key {
    char id[KEY_ID_MAX + 1];
    unsigned char secret[KEY_BYTES];
};

struct keyring {
    struct key *keys;      /* the locked allocation */
    size_t nkeys;
    size_t mapped;         /* its size */
};

/* Load every key of path.  want_id: the key a sender uses (NULL: the
 * first); *chosen points at it. */
int keyfile_load(struct keyring *ring, const char *path, const char *want_id,
                 const struct key **chosen, struct weir_error *err);
/* The same from text in memory (a one-time key handed over by --ssh);
 * name is what messages call it.  The ring's one or first key is chosen. */
int keyfile_load_text(struct keyring *ring, const char *name, const char *text, size_t len,
                      const struct key **chosen, struct weir_error *err);
/* One fresh random key named id as a key file's line, NUL-ended, into buf
 * (which should be secret_alloc memory: secret.h); its length, or -1. */
int keyfile_new_text(char *buf, size_t cap, const char *id);
/* The key with this identity, or NULL. */
const struct key *keyfile_find(const struct keyring *ring, const char *id, size_t idlen);
void keyfile_free(struct keyring *ring);
/* Write a new key file with one fresh random key named id. */
int keyfile_generate(const char *path, const char *id, struct weir_error *err);
/* Whether s is a valid identity. */
int keyfile_valid_id(const char *s, size_t len);

#endif
