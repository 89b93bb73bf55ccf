/* seal.c - see seal.h. */
#include "crypto/seal.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <string.h>
#include <sys/uio.h>

#include "crypto/secret.h"

#define RECORD_TYPE 'R'

struct seal_session *seal_session_new(void)
{
    return secret_alloc(sizeof(struct seal_session));
}

void seal_session_free(struct seal_session *s)
{
    secret_free(s, sizeof *s);
}

int sealer_init(struct sealer *s, const struct seal_direction *d, uint64_t epoch_records,
                struct weir_error *err)
{
    memset(s, 0, sizeof *s);
    /* a test's shorter epochs, never a longer one */
    s->epoch_records = epoch_records && epoch_records < SEAL_EPOCH_RECORDS ? epoch_records
                                                                        : SEAL_EPOCH_RECORDS;
    s->k = secret_alloc(sizeof *s->k);
    EVP_CIPHER_CTX *ctx = s->k ? EVP_CIPHER_CTX_new() : NULL;
    if (!ctx || EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), NULL, NULL, NULL) != 1) {
        EVP_CIPHER_CTX_free(ctx);
        sealer_free(s);
        return error_set(err, WEIR_EXIT_INTERNAL, "encryption: cannot set up AES-128-GCM");
    }
    s->k->dir = *d;
    s->ctx = ctx;
    return 0;
}

void sealer_free(struct sealer *s)
{
    EVP_CIPHER_CTX_free(s->ctx);   /* it wipes its own key schedule */
    secret_free(s->k, sizeof *s->k);
    s->ctx = NULL;
    s->k = NULL;
    s->keyed = false;
}

/* The key of the epoch record n falls in: HKDF-Expand of the base key with
 * "weir epoch" and the epoch number. */
static int epoch_key(struct sealer *s, uint64_t n)
{
    uint64_t epoch = (n & ~SEAL_CONTROL) / s->epoch_records;
    if (n & SEAL_CONTROL)
        epoch = UINT64_MAX;   /* control records have a key of their own */
    if (s->keyed && s->epoch == epoch)
        return 0;
    unsigned char info[18] = "weir epoch";
    for (int i = 0; i < 8; i++)
        info[10 + i] = (unsigned char)(epoch >> (56 - 8 * i));
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    EVP_KDF_free(kdf);
    if (!kctx)
        return -1;
    int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, s->k->dir.base,
                                          SEAL_BASE_BYTES),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, sizeof info),
        OSSL_PARAM_construct_end(),
    };
    int ok = EVP_KDF_derive(kctx, s->k->key, sizeof s->k->key, params) == 1;
    EVP_KDF_CTX_free(kctx);
    if (!ok)
        return -1;
    s->epoch = epoch;
    s->keyed = true;
    return 0;
}

static void nonce_for(const struct sealer *s, uint64_t n, unsigned char *nonce)
{
    memcpy(nonce, s->k->dir.iv, SEAL_IV_BYTES);
    for (int i = 0; i < 8; i++)
        nonce[4 + i] ^= (unsigned char)(n >> (56 - 8 * i));
}

size_t seal_record_iov(struct sealer *s, uint64_t n, unsigned flags, const struct iovec *iov,
                       int cnt, unsigned char *out)
{
    size_t len = 0;
    for (int i = 0; i < cnt; i++)
        len += iov[i].iov_len;
    if (len > SEAL_MAX_PLAIN || epoch_key(s, n))
        return 0;
    unsigned char nonce[SEAL_IV_BYTES];
    nonce_for(s, n, nonce);
    codec_put32(out, (uint32_t)(len + SEAL_TAG_BYTES));
    out[4] = RECORD_TYPE;
    out[5] = (unsigned char)flags;
    out[6] = out[7] = 0;
    EVP_CIPHER_CTX *ctx = s->ctx;
    int k = 0;
    if (EVP_EncryptInit_ex(ctx, NULL, NULL, s->k->key, nonce) != 1 ||
        EVP_EncryptUpdate(ctx, NULL, &k, out, SEAL_HEADER) != 1)
        return 0;
    unsigned char *dst = out + SEAL_HEADER;
    for (int i = 0; i < cnt; i++) {
        if (iov[i].iov_len == 0)
            continue;
        if (EVP_EncryptUpdate(ctx, dst, &k, iov[i].iov_base, (int)iov[i].iov_len) != 1)
            return 0;
        dst += k;
    }
    if (EVP_EncryptFinal_ex(ctx, dst, &k) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_BYTES,
                            out + SEAL_HEADER + len) != 1)
        return 0;
    return SEAL_HEADER + len + SEAL_TAG_BYTES;
}

size_t seal_record(struct sealer *s, uint64_t n, unsigned flags, const void *plain,
                   size_t len, unsigned char *out)
{
    struct iovec iov = {(void *)plain, len};
    return seal_record_iov(s, n, flags, &iov, 1, out);
}

long seal_body_length(const unsigned char *h)
{
    uint32_t body = codec_get32(h);
    if (h[4] != RECORD_TYPE || (h[5] & ~(SEAL_END | SEAL_CTRL)) || h[6] || h[7] ||
        body < SEAL_TAG_BYTES ||
        body > SEAL_MAX_PLAIN + SEAL_TAG_BYTES)
        return -1;
    return (long)body;
}

int open_record(struct sealer *s, uint64_t n, const unsigned char *rec, size_t len,
                unsigned char *out, size_t *plainlen, unsigned *flags)
{
    if (len < SEAL_OVERHEAD || seal_body_length(rec) != (long)(len - SEAL_HEADER) ||
        epoch_key(s, n))
        return -1;
    size_t plain = len - SEAL_OVERHEAD;
    unsigned char nonce[SEAL_IV_BYTES];
    nonce_for(s, n, nonce);
    EVP_CIPHER_CTX *ctx = s->ctx;
    int n1 = 0, n2 = 0;
    if (EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), NULL, s->k->key, nonce) != 1 ||
        EVP_DecryptUpdate(ctx, NULL, &n1, rec, SEAL_HEADER) != 1 ||
        EVP_DecryptUpdate(ctx, out, &n1, rec + SEAL_HEADER, (int)plain) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_BYTES,
                            (void *)(rec + SEAL_HEADER + plain)) != 1 ||
        EVP_DecryptFinal_ex(ctx, out + n1, &n2) != 1) {
        OPENSSL_cleanse(out, plain);   /* nothing unauthenticated leaves */
        return -1;
    }
    *plainlen = plain;
    *flags = rec[5];
    return 0;
}
