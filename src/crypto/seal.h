/*
 * seal.h - weir's record layer on an encrypted connection.  After the TLS
 * handshake (tls.h) every byte in each direction travels in sealed records:
 *
 *   record = header(8) ciphertext tag(16)
 *   header = body length L (u32, ciphertext + tag), type 'R', flags, 0, 0
 *
 * sealed with AES-128-GCM, the AEAD the pinned TLS suite names, through
 * OpenSSL's EVP interface.  Each direction has its own base key and IV from
 * the TLS exporter.  A record's nonce is the direction's IV XOR its number:
 * the records of a direction are numbered from 0 in the order they are
 * sent, so no nonce repeats under a key; control records (an abort, flag
 * SEAL_CTRL) are numbered in a space of their own (SEAL_CONTROL set), so
 * that an abort never takes a number that a data record sealed ahead of
 * time (and then never sent) already used.  The header is the
 * associated data: length, type and flags cannot be changed.  The END flag
 * marks a direction's last record, and a reader requires it before the end
 * (the STREAM construction).  Keys change by volume: record n is sealed
 * under the key of epoch n / epoch_records, derived from the base key with
 * HKDF, so any thread can seal any record without the others.
 *
 * Contract: a struct sealer is one thread's cipher state for one direction;
 * several threads seal the same direction with sealers of their own (the
 * workers seal blocks in parallel).  Nothing here blocks or allocates after
 * sealer_init().  A sealer keeps its own copy of its direction's keys in
 * secret memory (secret.h), wiped when the sealer is freed; a
 * seal_session is kept there too (seal_session_new).
 */
#ifndef WEIR_SEAL_H
#define WEIR_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/codec.h"
#include "weir/error.h"

#define SEAL_KEY_BYTES 16
#define SEAL_BASE_BYTES 32   /* a direction's base key: HKDF-Expand's PRK, HashLen bytes */
#define SEAL_IV_BYTES 12
#define SEAL_TAG_BYTES 16
#define SEAL_HEADER 8
#define SEAL_OVERHEAD (SEAL_HEADER + SEAL_TAG_BYTES)
/* the largest plaintext: a 4 MiB block with its frame and record */
#define SEAL_MAX_PLAIN (CODEC_BLOCK_MAX + CODEC_BLOCK_OVERHEAD + 64)
#define SEAL_END 0x01                   /* flag: the direction's last record */
#define SEAL_CTRL 0x02                  /* flag: a control record (numbered apart) */
#define SEAL_CONTROL (1ULL << 63)       /* the numbers of control records */
/* 2^14 records of at most 4 MiB: at most 64 GiB (2^32 AES blocks) under one
 * key, far inside AES-GCM's limits */
#define SEAL_EPOCH_RECORDS (1ULL << 14)

struct seal_direction {
    unsigned char base[SEAL_BASE_BYTES];
    unsigned char iv[SEAL_IV_BYTES];
};

/* Both directions of one connection, as the exporter gave them. */
struct seal_session {
    struct seal_direction to_receiver, to_sender;
    uint64_t epoch_records;   /* SEAL_EPOCH_RECORDS, or a test's smaller value */
};

/* A sealer's key material, in secret memory (secret.h). */
struct sealer_keys {
    struct seal_direction dir;            /* a copy: the sealer outlives its source */
    unsigned char key[SEAL_KEY_BYTES];    /* the current epoch's */
};

struct sealer {
    void *ctx;                /* EVP_CIPHER_CTX */
    struct sealer_keys *k;
    uint64_t epoch_records;
    uint64_t epoch;           /* of k->key */
    bool keyed;
};

/* The sealer copies d: what d points at may go as soon as this returns. */
/* A seal_session in secret memory (NULL when there is none), and its
 * wiping release (NULL is ignored). */
struct seal_session *seal_session_new(void);
void seal_session_free(struct seal_session *s);

int sealer_init(struct sealer *s, const struct seal_direction *d, uint64_t epoch_records,
                struct weir_error *err);
void sealer_free(struct sealer *s);
/* Seal len bytes (at most SEAL_MAX_PLAIN) as record number n into out,
 * which holds len + SEAL_OVERHEAD bytes; returns the record's size, or 0
 * when OpenSSL fails (never expected). */
size_t seal_record(struct sealer *s, uint64_t n, unsigned flags, const void *plain,
                   size_t len, unsigned char *out);
/* The body length a record header announces, or -1 when it is malformed. */
long seal_body_length(const unsigned char *header);
/* Open record number n (header and body, len bytes) into out (len -
 * SEAL_OVERHEAD bytes); 0 and *plainlen, *flags, or -1 when it was forged,
 * corrupted, reordered, replayed or belongs to another direction. */
int open_record(struct sealer *s, uint64_t n, const unsigned char *rec, size_t len,
                unsigned char *out, size_t *plainlen, unsigned *flags);
/* Seal the concatenation of cnt pieces (a frame's prefix, data and suffix)
 * as one record, as seal_record does. */
struct iovec;
size_t seal_record_iov(struct sealer *s, uint64_t n, unsigned flags, const struct iovec *iov,
                       int cnt, unsigned char *out);

#endif
