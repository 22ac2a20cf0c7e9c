/*
 * libFuzzer harness for the native engine's TLS read path (runner/load/native/tls.c, with the
 * response parser behind it as the engine runs them), built with AddressSanitizer and UBSan
 * (docs/development.md; tests/integration/test_native_fuzz.py):
 *
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *         -I runner/load/native tests/fuzz/fuzz_tls.c runner/load/native/tls.c \
 *         runner/load/native/response.c -lssl -lcrypto -o fuzz_tls
 *
 * The client is tls.c's, exactly as the engine drives it: ciphertext fed in (soak_tls_feed),
 * the handshake stepped, plaintext read to the response parser, its output taken
 * (soak_tls_output, soak_tls_sent). The server is OpenSSL's own, in memory (a self-signed
 * certificate for 127.0.0.1, made at start-up, which the verifying client trusts), so inputs
 * get past the handshake and the fuzzer reaches the record layer; and the input can put its
 * own bytes in the server's place at any point.
 *
 * An input is a control byte, then operations of one byte each (and their operand bytes):
 *     byte 0: bit 0 the server speaks TLS 1.2 at most (else 1.3), bit 1 the client verifies
 *             nothing (insecure), bit 2 no server at all: every other byte is the server's,
 *             fed in pieces, bit 3 the client checks a name (localhost) instead of 127.0.0.1
 *     op % 8: 0 the server writes the next N+1 input bytes as data (N: the next byte)
 *             1 the next N+1 bytes of what the server sent reach the client
 *             2 the next N+1 input bytes reach the client as if the server sent them
 *             3 the server sends close_notify
 *             4 the server asks for a renegotiation (TLS 1.2) or a key update (TLS 1.3)
 *             5 the client writes a request, and the server reads what the client sent
 *             6 one byte of what the server sent is flipped (at N, the next byte)
 *             7 everything the server sent reaches the client
 * Promises checked after every step: a failure is named ("tls: ..." within the buffer, or
 * what the handshake's failure is); once failed or closed the client is not used again; and
 * while no byte was put in or flipped, the plaintext the client read is what the server wrote,
 * in order (a prefix of it). Every allocation is freed after each input (LeakSanitizer).
 */
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "response.h"
#include "tls.h"

#define REQUIRE(cond)                                                                     \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "fuzz_tls.c:%d: broken: %s\n", __LINE__, #cond);              \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

#define WRITTEN_MAX 65536
static const unsigned char REQUEST[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

static SSL_CTX *server_ctx;
static soak_tls_ctx *verifying, *insecure;

/* A self-signed EC certificate for 127.0.0.1 and its key, in the server's context; its PEM in
 * a temporary file, the verifying client's CA file. */
static void make_server(void)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    REQUIRE(key != NULL && cert != NULL);
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600L * 24 * 365);
    X509_set_pubkey(cert, key);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"127.0.0.1", -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509_EXTENSION *san = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, "IP:127.0.0.1");
    REQUIRE(san != NULL && X509_add_ext(cert, san, -1));
    X509_EXTENSION_free(san);
    REQUIRE(X509_sign(cert, key, EVP_sha256()) > 0);
    server_ctx = SSL_CTX_new(TLS_server_method());
    REQUIRE(server_ctx != NULL && SSL_CTX_use_certificate(server_ctx, cert) && SSL_CTX_use_PrivateKey(server_ctx, key));
    SSL_CTX_set_options(server_ctx, SSL_OP_ALLOW_CLIENT_RENEGOTIATION);
    char path[] = "/tmp/fuzz_tls_ca_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    FILE *pem = fdopen(fd, "w");
    REQUIRE(pem != NULL && PEM_write_X509(pem, cert));
    fclose(pem);
    char err[256];
    verifying = soak_tls_ctx_new(path, NULL, NULL, 0, "", "tls: certificate verify failed: ", err, sizeof err);
    insecure = soak_tls_ctx_new(path, NULL, NULL, 1, "", "tls: certificate verify failed: ", err, sizeof err);
    REQUIRE(verifying != NULL && insecure != NULL);
    unlink(path);
    for (int i = 0; i < 2; i++) { /* a few names, as Python's table gives them; the rest fall back */
        soak_tls_ctx *ctx = i ? insecure : verifying;
        REQUIRE(soak_tls_ctx_name(ctx, ERR_LIB_SSL, SSL_R_WRONG_VERSION_NUMBER, "tls: wrong version number") == 0);
        REQUIRE(soak_tls_ctx_name(ctx, ERR_LIB_SSL, SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC,
                                  "tls: decryption failed or bad record mac") == 0);
        REQUIRE(soak_tls_ctx_name(ctx, ERR_LIB_SSL, SSL_R_UNEXPECTED_MESSAGE, "tls: unexpected message") == 0);
    }
    X509_free(cert);
    EVP_PKEY_free(key);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    make_server();
    return 0;
}

/* One input's world: the server, the client, and what crossed between them. */
typedef struct world {
    SSL *server;
    BIO *server_in, *server_out;
    soak_tls *client;
    int shaken, over, tampered;
    unsigned char written[WRITTEN_MAX]; /* the data the server wrote, in order */
    size_t nwritten, nread;             /* ... and how much of it the client has read */
    soak_response r;
} world;

static void check_failure(const soak_tls *t)
{
    char text[64];
    memset(text, 'x', sizeof text);
    soak_tls_failure(t, text, sizeof text);
    REQUIRE(memchr(text, '\0', sizeof text) != NULL && strncmp(text, "tls: ", 5) == 0);
}

/* The server reads what the client sent, and goes on with its handshake. */
static void server_hears(world *w)
{
    const unsigned char *data;
    size_t len = soak_tls_output(w->client, &data);
    if (len > 0) {
        REQUIRE(BIO_write(w->server_in, data, (int)len) == (int)len);
        soak_tls_sent(w->client, len);
        REQUIRE(soak_tls_output(w->client, &data) == 0);
    }
    unsigned char sink[4096];
    if (!SSL_is_init_finished(w->server))
        SSL_do_handshake(w->server);
    while (SSL_read(w->server, sink, sizeof sink) > 0) {
    }
    ERR_clear_error();
}

/* The client takes what reached it: the handshake's next step, then the plaintext to the parser. */
static void client_step(world *w)
{
    if (w->over)
        return;
    if (!w->shaken) {
        int status = soak_tls_handshake(w->client);
        if (status == SOAK_TLS_FAILED) {
            check_failure(w->client);
            w->over = 1;
            return;
        }
        if (status != SOAK_TLS_DONE)
            return;
        w->shaken = 1;
        REQUIRE(strncmp(soak_tls_version(w->client), "TLSv1.", 6) == 0);
    }
    unsigned char plain[1024];
    for (;;) {
        long n = soak_tls_read(w->client, plain, sizeof plain);
        if (n == 0)
            return;
        if (n == SOAK_TLS_READ_CLOSED || n == SOAK_TLS_FAILED) {
            if (n == SOAK_TLS_FAILED)
                check_failure(w->client);
            w->over = 1;
            return;
        }
        REQUIRE(n > 0 && (size_t)n <= sizeof plain);
        if (!w->tampered) {
            REQUIRE(w->nread + (size_t)n <= w->nwritten);
            REQUIRE(memcmp(plain, w->written + w->nread, (size_t)n) == 0);
        }
        w->nread += (size_t)n;
        if (w->r.outcome != SOAK_PENDING)
            soak_response_init(&w->r, 0, 4096);
        size_t used = soak_response_feed(&w->r, plain, (size_t)n);
        REQUIRE(used <= (size_t)n);
    }
}

/* Up to `most` bytes of what the server sent reach the client. */
static void deliver(world *w, size_t most)
{
    char *data;
    long pending = BIO_get_mem_data(w->server_out, &data);
    size_t len = pending > 0 ? (size_t)pending : 0;
    if (len > most)
        len = most;
    if (len == 0 || w->over)
        return;
    REQUIRE(soak_tls_feed(w->client, (const unsigned char *)data, len) == 0);
    unsigned char sink[4096];
    for (size_t left = len; left > 0;) {
        int k = BIO_read(w->server_out, sink, left > sizeof sink ? (int)sizeof sink : (int)left);
        REQUIRE(k > 0);
        left -= (size_t)k;
    }
    client_step(w);
}

static void run(world *w, const uint8_t *data, size_t size)
{
    size_t at = 1;
    int raw = data[0] & 4;
    while (at < size) {
        uint8_t op = data[at++];
        size_t n = at < size ? (size_t)data[at] + 1 : 1;
        if (raw) { /* every byte is the server's, in pieces of op's size */
            size_t piece = (size_t)op % 64 + 1;
            if (piece > size - at)
                piece = size - at;
            if (!w->over && piece)
                REQUIRE(soak_tls_feed(w->client, data + at, piece) == 0);
            at += piece;
            client_step(w);
            if (!w->over)
                server_hears(w); /* nobody: only the client's output taken */
            continue;
        }
        int operand = op % 8 == 0 || op % 8 == 1 || op % 8 == 2 || op % 8 == 6;
        if (operand && at < size) /* the operand byte, read into n above */
            at++;
        switch (op % 8) {
        case 0: {
            if (n > size - at)
                n = size - at;
            if (SSL_is_init_finished(w->server) && n && w->nwritten + n <= WRITTEN_MAX &&
                SSL_write(w->server, data + at, (int)n) == (int)n) {
                memcpy(w->written + w->nwritten, data + at, n);
                w->nwritten += n;
            }
            ERR_clear_error();
            at += n;
            break;
        }
        case 1:
            deliver(w, n);
            break;
        case 2:
            if (n > size - at)
                n = size - at;
            if (!w->over && n) {
                w->tampered = 1;
                REQUIRE(soak_tls_feed(w->client, data + at, n) == 0);
                client_step(w);
            }
            at += n;
            break;
        case 3:
            if (SSL_is_init_finished(w->server))
                SSL_shutdown(w->server);
            ERR_clear_error();
            break;
        case 4:
            if (SSL_is_init_finished(w->server)) {
                if (SSL_version(w->server) >= TLS1_3_VERSION)
                    SSL_key_update(w->server, SSL_KEY_UPDATE_REQUESTED);
                else
                    SSL_renegotiate(w->server);
                SSL_do_handshake(w->server);
            }
            ERR_clear_error();
            break;
        case 5:
            if (w->shaken && !w->over) {
                long taken = soak_tls_write(w->client, REQUEST, sizeof REQUEST - 1);
                REQUIRE(taken == 0 || taken == (long)(sizeof REQUEST - 1) || taken == SOAK_TLS_FAILED);
                if (taken == SOAK_TLS_FAILED) {
                    check_failure(w->client);
                    w->over = 1;
                }
            }
            if (!w->over)
                server_hears(w);
            break;
        case 6: {
            char *pending;
            long len = BIO_get_mem_data(w->server_out, &pending);
            if (len > 0) {
                pending[(size_t)(n - 1) % (size_t)len] ^= 0x5a;
                w->tampered = 1;
            }
            break;
        }
        default:
            deliver(w, SIZE_MAX);
            if (!w->over)
                server_hears(w);
            deliver(w, SIZE_MAX); /* the server's answer to what it heard */
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static world w; /* large: not on the stack */
    memset(&w, 0, sizeof w);
    uint8_t control = data[0];
    w.server = SSL_new(server_ctx);
    w.server_in = BIO_new(BIO_s_mem());
    w.server_out = BIO_new(BIO_s_mem());
    REQUIRE(w.server != NULL && w.server_in != NULL && w.server_out != NULL);
    BIO_set_mem_eof_return(w.server_in, -1);
    SSL_set_bio(w.server, w.server_in, w.server_out);
    SSL_set_accept_state(w.server);
    if (control & 1)
        SSL_set_max_proto_version(w.server, TLS1_2_VERSION);
    int named = control & 8;
    w.client = soak_tls_new(control & 2 ? insecure : verifying, named ? "localhost" : "127.0.0.1", !named,
                            "Hostname mismatch, certificate is not valid for 'localhost'.");
    REQUIRE(w.client != NULL);
    soak_response_init(&w.r, 0, 4096);
    client_step(&w); /* the client's hello */
    server_hears(&w);
    run(&w, data, size);
    soak_tls_free(w.client);
    SSL_free(w.server);
    ERR_clear_error();
    return 0;
}
