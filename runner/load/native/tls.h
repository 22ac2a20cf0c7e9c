/*
 * TLS for the native engine: OpenSSL's record layer over memory BIOs, no sockets, no CPython.
 *
 * The engine (core.c) reads and writes the socket itself, as it does for plain HTTP (one
 * recvmsg per wake-up, with the kernel's receive stamp; its own sends): what it reads is
 * fed here as ciphertext (soak_tls_feed), the handshake and SSL_read run on what was fed,
 * and what TLS wants sent waits in memory until the engine sends it (soak_tls_output,
 * soak_tls_sent). So the handshake is non-blocking by construction (it wants more bytes, or
 * has some to send), driven by the engine's epoll loop, and the fuzz harness
 * (tests/fuzz/fuzz_tls.c) drives exactly this code with hostile bytes in the socket's place.
 *
 * The client is runner/load/tls.py's, as the Python engine's is: verified against `ca_file`
 * (caBundle, else certifi's bundle, as Python's create_default_context(cafile=...) loads
 * it), the host name (or IP address) checked as Python checks it, SNI for a name, ALPN
 * http/1.1, TLS 1.2 at least, Python's default cipher list for TLS 1.2 (given), an optional
 * client certificate; `insecure` verifies nothing. No session is resumed: Python's
 * connections make a full handshake each, and the tls phase measures the same.
 *
 * What a failure is called is Python's decision (runner/load/failures.py): the context
 * holds the table of OpenSSL's (library, reason) codes to texts that Python's ssl module
 * gives them (soak_tls_ctx_name), and a failed certificate check reads "<verify_failed>"
 * followed by X509_verify_cert_error_string's words, or the origin's own text for a name
 * the certificate does not cover (soak_tls_new's `mismatch`), as CPython words them.
 */
#ifndef SOAK_TLS_H
#define SOAK_TLS_H

#include <stddef.h>
#include <stdint.h>

typedef struct soak_tls_ctx soak_tls_ctx;
typedef struct soak_tls soak_tls;

/* What a step of the handshake, a read or a write came to. */
enum soak_tls_status {
    SOAK_TLS_DONE = 0,    /* the handshake is done; a read or write made progress */
    SOAK_TLS_WANT = 1,    /* more bytes from the server are needed first */
    SOAK_TLS_CLOSED = 2,  /* a read: the server's close_notify (no more data, as a TCP close) */
    SOAK_TLS_FAILED = -1  /* soak_tls_failure names it */
};

/* What soak_tls_read returns for the server's close_notify (see it below). */
#define SOAK_TLS_READ_CLOSED (-2)

#ifndef SOAK_NO_TLS
#define SOAK_TLS_BUILT 1


/* The run's client context; NULL with OpenSSL's reason in err (Python has checked the files
 * first, so that is not expected). cert_file NULL or "": no client certificate; key_file
 * NULL or "": the key is in cert_file. */
soak_tls_ctx *soak_tls_ctx_new(const char *ca_file, const char *cert_file, const char *key_file, int insecure,
                               const char *ciphers, const char *verify_failed, char *err, size_t err_size);
/* Name OpenSSL's (library, reason) code `text` (copied); 0, or -1 without memory. Names
 * given before the first connection is made (the table is sorted then). */
int soak_tls_ctx_name(soak_tls_ctx *ctx, int lib, int reason, const char *text);
void soak_tls_ctx_free(soak_tls_ctx *ctx);

/* A connection's TLS, to `host` (an IP address if `numeric`: checked, never sent as SNI);
 * `mismatch`: the text of a certificate that does not cover host (copied). NULL without memory. */
soak_tls *soak_tls_new(soak_tls_ctx *ctx, const char *host, int numeric, const char *mismatch);
void soak_tls_free(soak_tls *t);
/* The connection goes on under `ctx` (another engine's, made from the same settings: a warm-up's
 * connection taken over by its run), whose failure names it reads from now on. */
void soak_tls_adopt(soak_tls *t, const soak_tls_ctx *ctx);

/* Ciphertext the server sent, for the next steps to read; 0, or -1 without memory. */
int soak_tls_feed(soak_tls *t, const unsigned char *data, size_t len);
/* One step of the handshake on what was fed: DONE, WANT or FAILED. */
int soak_tls_handshake(soak_tls *t);
/* Plaintext from what was fed, at most cap bytes: > 0 bytes read; 0: more bytes are needed
 * (what was fed held no data: a partial record, a session ticket, a renegotiation's message);
 * SOAK_TLS_READ_CLOSED: the server's close_notify; SOAK_TLS_FAILED. */
long soak_tls_read(soak_tls *t, unsigned char *out, size_t cap);
/* Plaintext to send: the bytes taken (all of them), 0 when the server must be heard first (a
 * renegotiation under way: write again after the next read), or SOAK_TLS_FAILED. */
long soak_tls_write(soak_tls *t, const unsigned char *data, size_t len);
/* Whether plaintext or a TLS message is left in what was fed (a read may have more to give). */
int soak_tls_buffered(soak_tls *t);
/* The ciphertext waiting to be sent (its length; *data points at it, valid until the next call here). */
size_t soak_tls_output(soak_tls *t, const unsigned char **data);
/* `n` bytes of it were sent. */
void soak_tls_sent(soak_tls *t, size_t n);
/* Queue close_notify (sent with the rest of soak_tls_output), once the handshake was done. */
void soak_tls_close_notify(soak_tls *t);
/* The protocol version agreed ("TLSv1.3"), as Python's SSLObject.version() says it. */
const char *soak_tls_version(const soak_tls *t);
/* The last failure's text ("tls: ..."), as runner/load/failures.py names it. */
void soak_tls_failure(const soak_tls *t, char *text, size_t size);

#else
/* Built where OpenSSL's headers are not (setup.py): no TLS context can be made, so no
 * connection is ever https, and the engine refuses https runs (engine.py's refusal). */
#define SOAK_TLS_BUILT 0
#include <stdio.h>
static inline soak_tls_ctx *soak_tls_ctx_new(const char *ca_file, const char *cert_file, const char *key_file,
                                             int insecure, const char *ciphers, const char *verify_failed, char *err,
                                             size_t err_size)
{
    (void)ca_file, (void)cert_file, (void)key_file, (void)insecure, (void)ciphers, (void)verify_failed;
    snprintf(err, err_size, "built without TLS (no OpenSSL headers)");
    return NULL;
}
static inline int soak_tls_ctx_name(soak_tls_ctx *c, int l, int r, const char *t) { (void)c, (void)l, (void)r, (void)t; return -1; }
static inline void soak_tls_ctx_free(soak_tls_ctx *ctx) { (void)ctx; }
static inline soak_tls *soak_tls_new(soak_tls_ctx *c, const char *h, int n, const char *m) { (void)c, (void)h, (void)n, (void)m; return NULL; }
static inline void soak_tls_free(soak_tls *t) { (void)t; }
static inline void soak_tls_adopt(soak_tls *t, const soak_tls_ctx *c) { (void)t, (void)c; }
static inline int soak_tls_feed(soak_tls *t, const unsigned char *d, size_t n) { (void)t, (void)d, (void)n; return -1; }
static inline int soak_tls_handshake(soak_tls *t) { (void)t; return SOAK_TLS_FAILED; }
static inline long soak_tls_read(soak_tls *t, unsigned char *o, size_t n) { (void)t, (void)o, (void)n; return SOAK_TLS_FAILED; }
static inline long soak_tls_write(soak_tls *t, const unsigned char *d, size_t n) { (void)t, (void)d, (void)n; return SOAK_TLS_FAILED; }
static inline int soak_tls_buffered(soak_tls *t) { (void)t; return 0; }
static inline size_t soak_tls_output(soak_tls *t, const unsigned char **d) { (void)t; *d = NULL; return 0; }
static inline void soak_tls_sent(soak_tls *t, size_t n) { (void)t, (void)n; }
static inline void soak_tls_close_notify(soak_tls *t) { (void)t; }
static inline const char *soak_tls_version(const soak_tls *t) { (void)t; return ""; }
static inline void soak_tls_failure(const soak_tls *t, char *text, size_t size) { (void)t; snprintf(text, size, "tls"); }
#endif /* SOAK_NO_TLS */

#endif /* SOAK_TLS_H */
