/*
 * TLS for the native engine (tls.h says what it is for): OpenSSL over two memory BIOs.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "tls.h"

#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One entry of the table of failure texts: OpenSSL's ERR_PACK(lib, 0, reason), and its text. */
typedef struct tls_name {
    unsigned long code;
    char *text;
} tls_name;

struct soak_tls_ctx {
    SSL_CTX *ssl;
    int insecure;
    tls_name *names;
    size_t nnames, cap;
    int sorted;
    char verify_failed[128]; /* what a failed certificate check's text begins with */
};

struct soak_tls {
    SSL *ssl;
    BIO *in, *out;            /* owned by ssl */
    const soak_tls_ctx *ctx;
    unsigned long err;        /* the failure's error (ERR_peek_last_error, as Python reads it); 0: none */
    long verify;              /* the certificate check's result at the failure */
    int shaken;               /* the handshake is done */
    char *mismatch;
};

static int by_code(const void *a, const void *b)
{
    unsigned long x = ((const tls_name *)a)->code, y = ((const tls_name *)b)->code;
    return (x > y) - (x < y);
}

static void ctx_error(char *err, size_t err_size, const char *what)
{
    char reason[200];
    ERR_error_string_n(ERR_get_error(), reason, sizeof reason);
    snprintf(err, err_size, "%s: %s", what, reason);
    ERR_clear_error();
}

soak_tls_ctx *soak_tls_ctx_new(const char *ca_file, const char *cert_file, const char *key_file, int insecure,
                               const char *ciphers, const char *verify_failed, char *err, size_t err_size)
{
    soak_tls_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    ctx->insecure = insecure;
    snprintf(ctx->verify_failed, sizeof ctx->verify_failed, "%s", verify_failed ? verify_failed : "");
    SSL_CTX *s = ctx->ssl = SSL_CTX_new(TLS_client_method());
    if (s == NULL) {
        ctx_error(err, err_size, "SSL_CTX_new");
        soak_tls_ctx_free(ctx);
        return NULL;
    }
    /* as Python's default client context: TLS 1.2 at least, no compression, names checked
     * without partial wildcards; ALPN http/1.1 (the only protocol spoken); no session kept */
    SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION);
    SSL_CTX_set_options(s, SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_session_cache_mode(s, SSL_SESS_CACHE_OFF);
    X509_VERIFY_PARAM_set_hostflags(SSL_CTX_get0_param(s), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const char *failed = NULL;
    if (ciphers != NULL && *ciphers && !SSL_CTX_set_cipher_list(s, ciphers))
        failed = "ciphers";
    else if (SSL_CTX_set_alpn_protos(s, (const unsigned char *)"\x08http/1.1", 9) != 0)
        failed = "ALPN";
    else if (!insecure && !SSL_CTX_load_verify_locations(s, ca_file, NULL))
        failed = ca_file;
    else if (cert_file != NULL && *cert_file && !SSL_CTX_use_certificate_chain_file(s, cert_file))
        failed = cert_file;
    else if (cert_file != NULL && *cert_file &&
             (!SSL_CTX_use_PrivateKey_file(s, key_file != NULL && *key_file ? key_file : cert_file, SSL_FILETYPE_PEM) ||
              !SSL_CTX_check_private_key(s)))
        failed = key_file != NULL && *key_file ? key_file : cert_file;
    if (failed != NULL) {
        ctx_error(err, err_size, failed);
        soak_tls_ctx_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(s, insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    return ctx;
}

int soak_tls_ctx_name(soak_tls_ctx *ctx, int lib, int reason, const char *text)
{
    if (ctx->nnames == ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap * 2 : 256;
        tls_name *grown = realloc(ctx->names, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        ctx->names = grown;
        ctx->cap = cap;
    }
    char *copy = strdup(text);
    if (copy == NULL)
        return -1;
    ctx->names[ctx->nnames++] = (tls_name){ERR_PACK(lib, 0, reason), copy};
    ctx->sorted = 0;
    return 0;
}

void soak_tls_ctx_free(soak_tls_ctx *ctx)
{
    if (ctx == NULL)
        return;
    for (size_t i = 0; i < ctx->nnames; i++)
        free(ctx->names[i].text);
    free(ctx->names);
    SSL_CTX_free(ctx->ssl);
    free(ctx);
}

soak_tls *soak_tls_new(soak_tls_ctx *ctx, const char *host, int numeric, const char *mismatch)
{
    if (!ctx->sorted) { /* once, on the first connection: the table is complete by then */
        qsort(ctx->names, ctx->nnames, sizeof *ctx->names, by_code);
        ctx->sorted = 1;
    }
    soak_tls *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->ctx = ctx;
    t->ssl = SSL_new(ctx->ssl);
    t->in = BIO_new(BIO_s_mem());
    t->out = BIO_new(BIO_s_mem());
    t->mismatch = strdup(mismatch != NULL ? mismatch : "");
    if (t->ssl == NULL || t->in == NULL || t->out == NULL || t->mismatch == NULL) {
        BIO_free(t->in);
        BIO_free(t->out);
        t->in = t->out = NULL;
        soak_tls_free(t);
        ERR_clear_error();
        return NULL;
    }
    BIO_set_mem_eof_return(t->in, -1); /* nothing left to read is "retry", never the end */
    SSL_set_bio(t->ssl, t->in, t->out);
    SSL_set_connect_state(t->ssl);
    int ok = 1;
    if (!ctx->insecure)
        ok = numeric ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), host) : SSL_set1_host(t->ssl, host);
    if (ok && !numeric)
        ok = (int)SSL_set_tlsext_host_name(t->ssl, host);
    if (!ok) {
        soak_tls_free(t);
        ERR_clear_error();
        return NULL;
    }
    return t;
}

void soak_tls_free(soak_tls *t)
{
    if (t == NULL)
        return;
    SSL_free(t->ssl); /* and its BIOs */
    free(t->mismatch);
    free(t);
}

void soak_tls_adopt(soak_tls *t, const soak_tls_ctx *ctx)
{
    t->ctx = ctx;
}

int soak_tls_feed(soak_tls *t, const unsigned char *data, size_t len)
{
    while (len > 0) {
        int chunk = len > INT_MAX ? INT_MAX : (int)len;
        int n = BIO_write(t->in, data, chunk);
        if (n <= 0) {
            ERR_clear_error();
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A call that did not succeed: wanting bytes (0), or a failure, kept for soak_tls_failure.
 *
 * SSL_get_error reads the thread's error queue, which must be empty before each call; it is
 * kept so (every failure here takes its error and clears the queue, and nothing else runs
 * OpenSSL on the engine's thread) rather than cleared before each call: ERR_clear_error
 * walks the whole queue, about a tenth of a keep-alive request's instructions otherwise. */
static int failed_or_wants(soak_tls *t, int rc)
{
    int e = SSL_get_error(t->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    t->err = ERR_peek_last_error();
    t->verify = SSL_get_verify_result(t->ssl);
    ERR_clear_error();
    return e == SSL_ERROR_ZERO_RETURN ? SOAK_TLS_READ_CLOSED : SOAK_TLS_FAILED;
}

int soak_tls_handshake(soak_tls *t)
{
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1) {
        t->shaken = 1;
        return SOAK_TLS_DONE;
    }
    int status = failed_or_wants(t, rc);
    return status == 0 ? SOAK_TLS_WANT : SOAK_TLS_FAILED; /* a close_notify in the handshake fails it */
}

long soak_tls_read(soak_tls *t, unsigned char *out, size_t cap)
{
    int n = SSL_read(t->ssl, out, cap > INT_MAX ? INT_MAX : (int)cap);
    return n > 0 ? n : failed_or_wants(t, n);
}

long soak_tls_write(soak_tls *t, const unsigned char *data, size_t len)
{
    if (len == 0)
        return 0;
    int n = SSL_write(t->ssl, data, len > INT_MAX ? INT_MAX : (int)len);
    if (n > 0)
        return n;
    int status = failed_or_wants(t, n);
    return status == 0 ? 0 : SOAK_TLS_FAILED;
}

int soak_tls_buffered(soak_tls *t)
{
    return SSL_pending(t->ssl) > 0 || BIO_ctrl_pending(t->in) > 0;
}

size_t soak_tls_output(soak_tls *t, const unsigned char **data)
{
    char *p = NULL;
    long n = BIO_get_mem_data(t->out, &p);
    *data = (const unsigned char *)p;
    return n > 0 ? (size_t)n : 0;
}

void soak_tls_sent(soak_tls *t, size_t n)
{
    unsigned char skipped[4096];
    while (n > 0) {
        int k = BIO_read(t->out, skipped, n > sizeof skipped ? (int)sizeof skipped : (int)n);
        if (k <= 0)
            break;
        n -= (size_t)k;
    }
}

void soak_tls_close_notify(soak_tls *t)
{
    if (t->shaken && !SSL_in_init(t->ssl))
        SSL_shutdown(t->ssl);
    ERR_clear_error();
}

const char *soak_tls_version(const soak_tls *t) { return SSL_get_version(t->ssl); }

void soak_tls_failure(const soak_tls *t, char *text, size_t size)
{
    unsigned long e = t->err;
    int lib = ERR_GET_LIB(e), reason = ERR_GET_REASON(e);
    if (lib == ERR_LIB_SSL && reason == SSL_R_CERTIFICATE_VERIFY_FAILED) { /* Python's SSLCertVerificationError */
        int name = t->verify == X509_V_ERR_HOSTNAME_MISMATCH || t->verify == X509_V_ERR_IP_ADDRESS_MISMATCH;
        snprintf(text, size, "%s%s", t->ctx->verify_failed,
                 name && *t->mismatch ? t->mismatch : X509_verify_cert_error_string(t->verify));
        return;
    }
    tls_name key = {ERR_PACK(lib, 0, reason), NULL};
    const tls_name *found = t->ctx->nnames ? bsearch(&key, t->ctx->names, t->ctx->nnames, sizeof key, by_code) : NULL;
    if (found != NULL) {
        snprintf(text, size, "%s", found->text);
        return;
    }
    const char *words = e ? ERR_reason_error_string(e) : NULL;
    snprintf(text, size, "tls: %s", words != NULL ? words : "unknown error"); /* a code Python's ssl does not know */
}
