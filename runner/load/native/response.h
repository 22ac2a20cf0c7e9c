/*
 * An incremental HTTP/1.1 response parser for the native engine: pure C11, no CPython.
 *
 * It reads one response (any interim 1xx heads before it included) from the bytes of a
 * connection, fed in whatever pieces the socket gives, and says what came of them, the same
 * however the pieces fall: the final status, the head's size as Result.header_bytes counts
 * it, the body's bytes, whether the connection may carry another request, the Server header,
 * whether the body is gzip, and how it failed, with the error kind and text a run counts and
 * prints. It is the engine's HTTP/1.1 reference: tests/support/contract.py holds its rules,
 * one row each.
 *
 * What it accepts and refuses is llhttp's (9.4, strict): the same status lines, header
 * syntax, Content-Length and Transfer-Encoding rules, chunk sizes and extensions, trailers,
 * no obsolete line folding, no bare LF, each refusal with llhttp's reason. On top of that:
 * 1xx heads are skipped (101 fails: what follows is not HTTP), a status below 100 fails at
 * once, a HEAD response has no body, heads and runs of framing are held to a bound checked
 * after each piece (each read, as the engine feeds them: a bound on what a server may make
 * us hold, not on its bytes' grammar), and what the server's close means depends on the
 * framing.
 *
 * The state is O(1): nothing is buffered (the head is scanned as it comes, never kept),
 * the only copies are bounded ones (the Server value, the start of Content-Encoding and
 * of a header name that a read cuts), and no count can overflow unchecked. One
 * soak_response per response; soak_response_init it for the next.
 */
#ifndef SOAK_RESPONSE_H
#define SOAK_RESPONSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most bytes of the Server header's value kept; a longer value is cut (server_cut). */
#define SOAK_SERVER_MAX 256

/* The most bytes of a backendHeader's value kept (runner.load.result.BACKEND_CHARS), and the
 * longest backendHeader name (the schema's maxLength). */
#define SOAK_BACKEND_MAX 64

/* The longest header name the parser tells apart (Transfer-Encoding). */
#define SOAK_NAME_MAX 17

/* Where a response is. */
enum soak_outcome {
    SOAK_PENDING = 0, /* more bytes (or the close) are needed */
    SOAK_DONE,        /* a whole final response: status, header_bytes, body_bytes, keep_alive */
    SOAK_FAILED       /* no response: kind and soak_response_error() say why */
};

/* Why it failed: result.py's error kinds that bytes alone can cause. */
enum soak_kind {
    SOAK_KIND_NONE = 0,
    SOAK_KIND_PROTOCOL, /* "protocol": the response was not valid HTTP */
    SOAK_KIND_CLOSED    /* "closed": the server closed before the response was complete */
};

/* Which failure, for soak_response_error(); the text is runner/load's for the same. */
enum soak_error {
    SOAK_ERR_NONE = 0,
    SOAK_ERR_INVALID,          /* llhttp refused it: "protocol: invalid response: <reason>" */
    SOAK_ERR_SWITCHED,         /* status 101 */
    SOAK_ERR_STATUS_RANGE,     /* a status below 100 */
    SOAK_ERR_HEAD_TOO_LARGE,   /* the head(s) grew past max_head */
    SOAK_ERR_FRAMING_TOO_LARGE,/* chunk-size lines or trailers grew past max_head */
    SOAK_ERR_NO_RESPONSE,      /* closed before a final head */
    SOAK_ERR_BODY_CUT          /* closed before the end of a body whose end is marked */
};

/* Bits of soak_response.events: what happened during the last soak_response_feed(). */
#define SOAK_EVENT_HEAD 1u /* the final head ended, at head_end */
#define SOAK_EVENT_DONE 2u /* the response ended, at message_end */

typedef struct soak_response {
    /* --- read by the caller --------------------------------------------------------- */
    uint8_t outcome;        /* enum soak_outcome */
    uint8_t kind;           /* enum soak_kind, when SOAK_FAILED */
    uint8_t error;          /* enum soak_error, when SOAK_FAILED */
    uint8_t keep_alive;     /* when SOAK_DONE: the connection may carry another request */
    uint8_t head_done;      /* the final head has been read (status is set) */
    uint8_t gzip;           /* the final head says Content-Encoding: gzip (or x-gzip) */
    uint8_t server_cut;     /* the Server value was longer than SOAK_SERVER_MAX */
    uint8_t events;         /* SOAK_EVENT_* of the last feed */
    uint16_t status;        /* the final status, once head_done */
    uint16_t server_len;    /* bytes in server */
    const char *reason;     /* llhttp's reason, for SOAK_ERR_INVALID */
    uint64_t wire_bytes;    /* bytes of this response consumed: heads, framing and body */
    uint64_t body_bytes;    /* body bytes (those of any 1xx with a body included: bytes that came as body) */
    uint64_t header_bytes;  /* when SOAK_DONE: wire_bytes - body_bytes (Result.header_bytes); all of
                               wire_bytes after HEAD, whose response has no body to count */
    uint64_t content_length;/* declared by the final head, when it had one */
    size_t head_end;        /* SOAK_EVENT_HEAD: offset in the last piece just past the head */
    size_t message_end;     /* SOAK_EVENT_DONE: offset in the last piece just past the response */

    /* --- set by the caller after soak_response_init (which clears it) ------------------ */
    /* Handed each run of the final response's body bytes as the feed meets them, in order,
     * chunk framing and trailers left out (a body hash's input); NULL: nobody wants them. */
    void (*body_sink)(void *ctx, const unsigned char *data, size_t len);
    void *body_ctx;

    /* --- the parser's own ------------------------------------------------------------ */
    uint8_t state;          /* where in the grammar */
    uint8_t head_request;   /* the request was HEAD: no body, whatever the head says */
    uint8_t major, minor;   /* HTTP version of the current message */
    uint8_t header;         /* llhttp's header_state: which special header, which token */
    uint8_t watch;          /* the value being read is one we keep something of */
    uint8_t index;          /* position in a literal being matched ... */
    uint8_t word;           /* ... and which literal (protocol name, Connection token) */
    uint8_t seen;           /* Server / Content-Encoding already met in this head */
    uint8_t chunked_match;  /* progress of "chunked" in a Transfer-Encoding value (scan_te) */
    uint8_t te_says_chunked;/* a Transfer-Encoding line of the final head mentions chunked */
    uint8_t body_mode;      /* how the current body ends */
    uint8_t final_head;     /* the current head is the final one (not 1xx) */
    uint8_t value_started;  /* a kept value has had a non-blank byte */
    uint8_t backend_match;  /* bytes of a name cut by a read that spell backend_name so far (0xff: not it) */
    uint8_t backend_len;    /* bytes in backend: the backendHeader's value, once the final head is read */
    uint8_t backend_on;     /* its value is being kept: its line goes on in the next read */
    uint8_t backend_started;/* ... and has had a non-blank byte */
    uint8_t backend_kept;   /* ... bytes of it copied (up to SOAK_BACKEND_MAX) */
    uint16_t flags;         /* llhttp's F_* of the current message */
    uint16_t code;          /* status of the current message */
    uint16_t name_len;      /* bytes of a header name cut by a read (at most SOAK_NAME_MAX + 1) */
    uint16_t kept_len;      /* bytes of a kept value's copy (up to its cap) */
    uint32_t max_head;      /* the bound on heads and on runs of framing (MAX_HEAD_BYTES) */
    uint64_t remaining;     /* Content-Length or chunk bytes still to come; a number being read */
    uint64_t value_len;     /* bytes of a kept value after its leading blanks */
    uint64_t value_end;     /* ... up to its last non-blank byte */
    uint64_t framing_run;   /* bytes read after the head since the last piece with body */
    uint64_t backend_seen;  /* bytes of the backendHeader's value after its leading blanks */
    uint64_t backend_end;   /* ... up to its last non-blank byte */
    char encoding[8];       /* the start of the Content-Encoding value */
    char name[SOAK_NAME_MAX]; /* the start of a header name cut by a read */

    /* --- read by the caller, last: init does not clear it ------------------------------ */
    char server[SOAK_SERVER_MAX]; /* the first Server value of the final head, trimmed: server_len bytes */
    /* The backendHeader (soak_response_want_backend): the name, kept across inits, and its first
     * value in the final head, blanks (SP, HT, NEL, NBSP) off either end, cut to SOAK_BACKEND_MAX
     * bytes: backend_len of them ("" when the head has none: a response counts under no backend). */
    char backend[SOAK_BACKEND_MAX];
    const char *backend_name; /* in lower case, backend_name_len bytes; NULL: no backendHeader */
    uint8_t backend_name_len;
} soak_response;

/* Ready `r` for the response to a request; `head_request`: it was HEAD. `max_head` is
 * the bound on the head and on runs of framing, runner.load.transport.MAX_HEAD_BYTES. */
void soak_response_init(soak_response *r, int head_request, uint32_t max_head);

/* Keep the value of the header `name` (`len` bytes, in lower case, not copied: it must outlive
 * `r`) from every response `r` is inited for from now on: the backendHeader, any header, those
 * the parser reads for itself (Connection, Content-Length, Server, ...) too. -1 (nothing
 * changed) if it is empty or longer than SOAK_BACKEND_MAX. */
int soak_response_want_backend(soak_response *r, const char *name, size_t len);

/* Parse the next `len` bytes of the connection. Returns how many were part of this
 * response: all of them, unless it ended (SOAK_DONE: the rest belongs to no request) or
 * failed inside them. After an ending nothing more is taken. */
size_t soak_response_feed(soak_response *r, const unsigned char *data, size_t len);

/* The server closed the connection cleanly: ends a body that runs to the close, and
 * fails anything else not yet complete. A reset is the caller's ("reset"), not this. */
void soak_response_eof(soak_response *r);

/* The connection was lost with an error other than a reset: fails anything not yet
 * complete as closed, even a body that runs to
 * the close, for a close with an error is no clean end of it. */
void soak_response_lost(soak_response *r);

/* The failure's text, as runner/load names it, in buf (NUL-ended, cut to size); returns
 * the length the whole text has, as snprintf does. "" when it did not fail. */
int soak_response_error(const soak_response *r, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* SOAK_RESPONSE_H */
