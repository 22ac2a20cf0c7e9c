/*
 * The incremental HTTP/1.1 response parser (response.h says what it is for).
 *
 * The grammar is llhttp's, state for state where it matters (llhttp 9.4's src/llhttp/http.ts,
 * strict mode, none of its lenient flags: a server is held to the RFC's grammar as llhttp
 * reads it): the same bytes are accepted, the same are refused with the same reason, the
 * same headers set the same flags, and framing and keep-alive follow llhttp's
 * src/native/http.c. Each state below names the llhttp node it
 * stands for where the two differ in name. A state either consumes its byte or moves on to
 * a state that will, so the loop ends; nothing recurses; every count is checked.
 *
 * On top of llhttp, the engine's own rules (response.h), each at the moment llhttp would
 * call back: skipping 1xx heads, failing 101 and statuses below 100, ending a HEAD response
 * at its head, the bounds after each piece, and the close.
 *
 * The states are the exact path; in front of them, fast_status_line and fast_fields read a
 * status line and header lines as nearly all are, a line at a time, and hand anything else
 * over to the states at the start of its line, with nothing of it done: they only ever
 * decide what the states would. That is most of what a keep-alive response costs.
 */
#include "response.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Sixteen bytes at a time where SSE2 is (every x86-64); eight (value_run) or four (token_run)
 * elsewhere, or with -DSOAK_PORTABLE, which the tests build too. Either way the same answers. */
#if defined(__SSE2__) && defined(__GNUC__) && !defined(SOAK_PORTABLE)
#include <emmintrin.h>
#define SOAK_SSE2 1
#endif

/* The few small functions each header line runs through, inlined where they are called. */
#if defined(__GNUC__)
#define HOT static inline __attribute__((always_inline))
#else
#define HOT static inline
#endif

/* --- character classes ----------------------------------------------------------------- */

enum {
    TOKEN = 1,  /* tchar (RFC 9110): header names, chunk extension names and values */
    VALUE = 2,  /* llhttp's HEADER_CHARS: HT, SP, visible ASCII, obs-text */
    CONN = 4,   /* CONNECTION_TOKEN_CHARS: HEADER_CHARS but the comma */
    QDTEXT = 8, /* in a quoted chunk extension value */
    PAIR = 16,  /* after a backslash there: HT, SP, visible, obs-text */
    HEX = 32,   /* a chunk size's digits */
    BLANK = 64  /* what Python's str.strip() takes off a latin-1 header value (SP HT NEL NBSP) */
};

#define V_ (VALUE | CONN | QDTEXT | PAIR) /* visible, not a token char: ( ) / : ; < = > ? @ [ ] { } */
#define T_ (TOKEN | V_)                   /* a token char */
#define X_ (HEX | T_)                     /* a hex digit */
#define Q_ (VALUE | CONN | PAIR)          /* " and \, which a quoted value escapes */
#define C_ (VALUE | QDTEXT | PAIR)        /* the comma, which separates connection tokens */
#define B_ (BLANK | V_)                   /* SP, HT, NEL, NBSP */

static const unsigned char CLASS[256] = {
    0,  0,  0,  0,  0,  0,  0,  0,  0,  B_, 0,  0,  0,  0,  0,  0,  /* HT */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
    B_, T_, Q_, T_, T_, T_, T_, T_, V_, V_, T_, T_, C_, T_, T_, V_, /* SP ! " # ... , - . / */
    X_, X_, X_, X_, X_, X_, X_, X_, X_, X_, V_, V_, V_, V_, V_, V_, /* 0-9 : ; < = > ? */
    V_, X_, X_, X_, X_, X_, X_, T_, T_, T_, T_, T_, T_, T_, T_, T_, /* @ A-O */
    T_, T_, T_, T_, T_, T_, T_, T_, T_, T_, T_, V_, Q_, V_, T_, T_, /* P-Z [ \ ] ^ _ */
    T_, X_, X_, X_, X_, X_, X_, T_, T_, T_, T_, T_, T_, T_, T_, T_, /* ` a-o */
    T_, T_, T_, T_, T_, T_, T_, T_, T_, T_, T_, V_, T_, V_, T_, 0,  /* p-z { | } ~ DEL */
    V_, V_, V_, V_, V_, B_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_,  /* obs-text; 0x85 NEL */
    V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_,
    B_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_,  /* 0xa0 NBSP */
    V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_,
    V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_,
    V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_,
    V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_,
    V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_, V_,
};

#define IS(c, class) ((CLASS[(unsigned char)(c)] & (class)) != 0)

static unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? (unsigned char)(c | 0x20) : c; }

static unsigned hex_value(unsigned char c)
{
    return c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
}

/* --- llhttp's flags and header states ----------------------------------------------------- */

enum { /* llhttp's F_*, those framing and keep-alive depend on */
    F_KEEP_ALIVE = 1 << 0,
    F_CLOSE = 1 << 1,
    F_CHUNKED = 1 << 3,
    F_CONTENT_LENGTH = 1 << 5,
    F_TRAILING = 1 << 7, /* reading trailers, after the last chunk */
    F_TRANSFER_ENCODING = 1 << 9
};

enum { /* llhttp's HEADER_STATE: what the header being read is, and what its value said */
    H_GENERAL,
    H_CONNECTION,
    H_CONTENT_LENGTH,
    H_TRANSFER_ENCODING,
    H_UPGRADE,
    H_KEEP_ALIVE, /* a Connection value whose last token was keep-alive */
    H_CLOSE,      /* ... close */
    H_CONN_UPGRADE,
    H_CHUNKED /* a Transfer-Encoding value whose last coding is chunked */
};

/* The header names that matter: llhttp's special ones, then the two a run reports (Server, Content-Encoding). */
enum { N_CONNECTION, N_CONTENT_LENGTH, N_PROXY_CONNECTION, N_TRANSFER_ENCODING, N_UPGRADE, N_SERVER,
       N_ENCODING, N_COUNT };
static const struct {
    char text[24]; /* in lower case, padded: name_of() compares it eight bytes at a time */
    unsigned char len, header, special;
} NAMES[N_COUNT] = {
    {"connection", 10, H_CONNECTION, 1},
    {"content-length", 14, H_CONTENT_LENGTH, 1},
    {"proxy-connection", 16, H_CONNECTION, 1},
    {"transfer-encoding", 17, H_TRANSFER_ENCODING, 1},
    {"upgrade", 7, H_UPGRADE, 1},
    {"server", 6, H_GENERAL, 0},
    {"content-encoding", 16, H_GENERAL, 0},
};
/* The lengths of NAMES, a bit each: most names are none of them, and name_of says so at once. */
#define NAME_LENGTHS (1u << 6 | 1u << 7 | 1u << 10 | 1u << 14 | 1u << 16 | 1u << 17)

static const char *const PROTOCOLS[] = {"HTTP", "RTSP", "ICE"}; /* what llhttp takes before '/' */
static const struct {
    const char *text;
    unsigned char len, header;
} WORDS[] = {{"close", 5, H_CLOSE}, {"upgrade", 7, H_CONN_UPGRADE}, {"keep-alive", 10, H_KEEP_ALIVE}};
static const char CHUNKED[] = "chunked";

/* What a kept header value is for; one per head at most of each. */
enum { W_NONE, W_SERVER, W_ENCODING, W_TE };
enum { SEEN_SERVER = 1, SEEN_ENCODING = 2, SEEN_BACKEND = 4 };

/* How the current message's body ends. */
enum { B_NONE, B_LENGTH, B_CHUNKED, B_EOF };

enum state {
    S_START,        /* before a status line: CR and LF are skipped */
    S_PROTOCOL,     /* HTTP, RTSP or ICE */
    S_SLASH,
    S_MAJOR,
    S_DOT,
    S_MINOR,
    S_SPACE,        /* res_after_version */
    S_STATUS,       /* three digits */
    S_STATUS_END,   /* res_status_code_otherwise */
    S_REASON,
    S_LINE_LF,      /* res_line_almost_done */
    S_HEADERS_START,
    S_FIELD_START,
    S_FIELD,        /* a header name: header_field and header_field_general */
    S_VALUE_WS,     /* header_value_discard_ws */
    S_VALUE_WS_CR,  /* header_value_discard_ws_almost_done */
    S_VALUE_WS_LF,  /* header_value_discard_lws: an empty value */
    S_TE,           /* header_value_te_chunked */
    S_TE_LAST,      /* header_value_te_chunked_last */
    S_TE_TOKEN,
    S_TE_OWS,
    S_LENGTH,       /* header_value_content_length */
    S_LENGTH_WS,
    S_CONN,         /* header_value_connection */
    S_CONN_WS,
    S_CONN_TOKEN,
    S_VALUE,
    S_VALUE_END,    /* header_value_otherwise */
    S_VALUE_LF,     /* header_value_almost_done */
    S_VALUE_FOLD,   /* header_value_lws: no obsolete folding */
    S_HEADERS_LF,   /* headers_almost_done */
    S_BODY_LENGTH,
    S_BODY_EOF,
    S_CHUNK_SIZE_FIRST, /* chunk_size_digit */
    S_CHUNK_SIZE,
    S_CHUNK_SIZE_END,   /* chunk_size_otherwise */
    S_CHUNK_EXT,
    S_CHUNK_EXT_NAME,
    S_CHUNK_EXT_VALUE,
    S_CHUNK_EXT_QUOTED,
    S_CHUNK_EXT_PAIR,
    S_CHUNK_EXT_QUOTED_END,
    S_CHUNK_SIZE_LF,    /* chunk_size_almost_done */
    S_CHUNK_DATA,
    S_CHUNK_DATA_CR,    /* chunk_data_almost_done */
    S_CHUNK_DATA_LF,
    S_CLOSED,       /* after a 1xx that closes the connection: only CR and LF may follow */
    S_ENDED         /* done or failed: nothing more is read */
};

/* --- endings ---------------------------------------------------------------------------- */

static void fail(soak_response *r, unsigned kind, unsigned error, const char *reason)
{
    r->outcome = SOAK_FAILED;
    r->kind = (uint8_t)kind;
    r->error = (uint8_t)error;
    r->reason = reason;
    r->state = S_ENDED;
    if (!r->head_done) /* a head that never ended has no backend, however far scan_backend read ahead */
        r->backend_len = 0, r->backend_on = 0;
}

/* llhttp refused the bytes: `reason` is its text. Returns the offset, for the feed loop. */
static size_t invalid(soak_response *r, size_t at, const char *reason)
{
    fail(r, SOAK_KIND_PROTOCOL, SOAK_ERR_INVALID, reason);
    return at;
}

/* llhttp_message_needs_eof: whether only the close can end the current message's body. */
static int needs_eof(const soak_response *r, int skip_body)
{
    if (r->code / 100 == 1 || r->code == 204 || r->code == 304 || skip_body)
        return 0;
    if ((r->flags & F_TRANSFER_ENCODING) && !(r->flags & F_CHUNKED))
        return 1;
    return !(r->flags & (F_CHUNKED | F_CONTENT_LENGTH));
}

/* llhttp_should_keep_alive: HTTP/1.1 unless it said close, 1.0 only if it said keep-alive. */
static int keeps_alive(const soak_response *r, int skip_body)
{
    if (r->major > 0 && r->minor > 0) {
        if (r->flags & F_CLOSE)
            return 0;
    } else if (!(r->flags & F_KEEP_ALIVE)) {
        return 0;
    }
    return !needs_eof(r, skip_body);
}

/* The final response is complete `at` bytes into the current piece. */
static size_t done(soak_response *r, size_t at, int keep_alive)
{
    r->outcome = SOAK_DONE;
    r->keep_alive = (uint8_t)keep_alive;
    /* The head(s) and any chunk framing; after HEAD, all that was read counts as head (a
     * 1xx's body included): the response has no body to count it under. */
    r->header_bytes = r->wire_bytes + at - (r->head_request ? 0 : r->body_bytes);
    r->events |= SOAK_EVENT_DONE;
    r->message_end = at;
    r->state = S_ENDED;
    return at;
}

/* A new message (the first, or the one after a 1xx) starts: llhttp clears its flags. */
static void begin_message(soak_response *r)
{
    r->flags = 0;
    r->header = H_GENERAL;
    r->watch = W_NONE;
    r->seen = 0;
    r->code = 0;
    r->body_mode = B_NONE;
    r->remaining = 0;
    r->te_says_chunked = 0;
}

/* A message ended (on_message_complete): a 1xx makes way for the next, a final one is done. */
static size_t message_complete(soak_response *r, size_t at)
{
    if (r->final_head)
        return done(r, at, keeps_alive(r, 0));
    /* llhttp__after_message_complete: a 1xx that does not keep the connection leaves it closed. */
    r->state = keeps_alive(r, 0) ? S_START : S_CLOSED;
    return at;
}

/* The blank line after a head: on_headers_complete, then llhttp__after_headers_complete. */
static size_t head_complete(soak_response *r, size_t at)
{
    unsigned code = r->code;
    if (code < 100) {
        fail(r, SOAK_KIND_PROTOCOL, SOAK_ERR_STATUS_RANGE, NULL);
        return at;
    }
    if (code == 101) { /* not interim: what follows is no longer HTTP */
        fail(r, SOAK_KIND_PROTOCOL, SOAK_ERR_SWITCHED, NULL);
        return at;
    }
    if (r->final_head) {
        r->head_done = 1;
        r->status = (uint16_t)code;
        r->events |= SOAK_EVENT_HEAD;
        r->head_end = at;
        if (r->flags & F_CONTENT_LENGTH)
            r->content_length = r->remaining;
        if (r->head_request) /* F_SKIPBODY: whatever the head says, no body follows */
            return done(r, at, keeps_alive(r, 1));
    }
    if (code == 100 || code == 102 || code == 103 || code == 204 || code == 304)
        r->body_mode = B_NONE;
    else if (r->flags & F_CHUNKED)
        r->body_mode = B_CHUNKED;
    else if (r->flags & F_TRANSFER_ENCODING)
        r->body_mode = B_EOF; /* a coding other than chunked last: the close ends it */
    else if (!(r->flags & F_CONTENT_LENGTH))
        r->body_mode = needs_eof(r, 0) ? B_EOF : B_NONE;
    else
        r->body_mode = r->remaining > 0 ? B_LENGTH : B_NONE;
    switch (r->body_mode) {
    case B_LENGTH: r->state = S_BODY_LENGTH; return at;
    case B_CHUNKED: r->state = S_CHUNK_SIZE_FIRST; return at;
    case B_EOF: r->state = S_BODY_EOF; return at;
    default: return message_complete(r, at);
    }
}

/* --- header names and values ------------------------------------------------------------ */

static uint64_t load8(const void *p)
{
    uint64_t word;
    memcpy(&word, p, sizeof word);
    return word;
}

static uint16_t load2(const void *p)
{
    uint16_t word;
    memcpy(&word, p, sizeof word);
    return word;
}

static uint32_t load4(const void *p)
{
    uint32_t word;
    memcpy(&word, p, sizeof word);
    return word;
}

/* Whether `len` (at least 4) token bytes spell `lower` in any case: among token bytes, c | 0x20
 * is the lower case of a letter and leaves digits and '-' as they are. Compared a word at a
 * time, the last word ending with the name. */
HOT int spells(const unsigned char *name, const char *lower, size_t len)
{
    if (len < 8)
        return (load4(name) | 0x20202020u) == load4(lower) &&
               (load4(name + len - 4) | 0x20202020u) == load4(lower + len - 4);
    for (size_t k = 0; k + 8 < len; k += 8)
        if ((load8(name + k) | 0x2020202020202020u) != load8(lower + k))
            return 0;
    return (load8(name + len - 8) | 0x2020202020202020u) == load8(lower + len - 8);
}

/* Which of NAMES a whole header name of `len` token bytes is, in any case; -1 for any other. */
HOT int name_of(const unsigned char *name, size_t len)
{
    int n;
    if (len > SOAK_NAME_MAX || !(NAME_LENGTHS >> len & 1))
        return -1;
    switch (len) { /* the names' lengths tell them apart, but for two of 16 */
    case 6: n = N_SERVER; break;
    case 7: n = N_UPGRADE; break;
    case 10: n = N_CONNECTION; break;
    case 14: n = N_CONTENT_LENGTH; break;
    case 16: n = (name[0] | 0x20) == 'p' ? N_PROXY_CONNECTION : N_ENCODING; break;
    case 17: n = N_TRANSFER_ENCODING; break;
    default: return -1;
    }
    return len == NAMES[n].len && spells(name, NAMES[n].text, len) ? n : -1;
}

/* Whether a whole header name of `len` token bytes is the backendHeader's, in any case. */
static int is_backend(const soak_response *r, const unsigned char *name, size_t len)
{
    if (len != r->backend_name_len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (lower(name[i]) != (unsigned char)r->backend_name[i])
            return 0;
    return 1;
}

/* Part of a header name that a read cut, against the backendHeader's: backend_match says how
 * many of its bytes the name has spelled so far, or 0xff once it cannot be it. */
static void match_backend(soak_response *r, const unsigned char *part, size_t len)
{
    size_t m = r->backend_match;
    for (size_t i = 0; i < len && m != 0xff; i++)
        m = m < r->backend_name_len && lower(part[i]) == (unsigned char)r->backend_name[m] ? m + 1 : 0xff;
    r->backend_match = (uint8_t)m;
}

/* Part of a header name that a read cut: keep its start (a longer name is none of NAMES). */
static void hold_name(soak_response *r, const unsigned char *part, size_t len)
{
    size_t held = r->name_len;
    if (r->backend_name_len)
        match_backend(r, part, len);
    for (size_t i = 0; i < len && held + i < SOAK_NAME_MAX; i++)
        r->name[held + i] = (char)part[i];
    r->name_len = (uint16_t)(len > SOAK_NAME_MAX + 1 - held ? SOAK_NAME_MAX + 1 : held + len);
}

/* A name of NAMES ended at its colon (on_header_field_complete). 0, or 1 if llhttp refuses it. */
HOT int field_complete(soak_response *r, int n, const char **reason)
{
    r->header = NAMES[n].header;
    if (r->header == H_TRANSFER_ENCODING && (r->flags & F_CONTENT_LENGTH)) {
        *reason = "Transfer-Encoding can't be present with Content-Length";
        return 1;
    }
    if (r->header == H_CONTENT_LENGTH && (r->flags & F_TRANSFER_ENCODING)) {
        *reason = "Content-Length can't be present with Transfer-Encoding";
        return 1;
    }
    if (!r->final_head || (r->flags & F_TRAILING))
        return 0; /* kept from the final head only: a 1xx's or a trailer's are not the response's */
    if (n == N_SERVER && !(r->seen & SEEN_SERVER)) {
        r->watch = W_SERVER, r->seen |= SEEN_SERVER;
    } else if (n == N_ENCODING && !(r->seen & SEEN_ENCODING)) {
        r->watch = W_ENCODING, r->seen |= SEEN_ENCODING;
    } else if (n == N_TRANSFER_ENCODING) {
        r->watch = W_TE, r->chunked_match = 0;
    }
    r->value_len = r->value_end = 0;
    r->kept_len = 0;
    r->value_started = 0;
    return 0;
}

/* Keep the backendHeader's value, a piece at a time: the bytes after
 * the colon up to the line's CR (`[ \t]*([^\r\n]*)`: a value holds no CR or LF, or the head is
 * refused), str.strip()ped as keep_value strips, cut to SOAK_BACKEND_MAX. Its own state, not
 * the watch's: the name may be one the parser reads for itself (Server, Content-Length, ...),
 * whose value its states read meanwhile; this only copies bytes, whatever they read. */
static void keep_backend(soak_response *r, const unsigned char *s, size_t n)
{
    size_t i = 0, last = n;
    if (!r->backend_started) {
        while (i < n && IS(s[i], BLANK))
            i++;
        if (i == n)
            return;
        r->backend_started = 1;
    }
    size_t take = n - i < sizeof r->backend - r->backend_kept ? n - i : sizeof r->backend - r->backend_kept;
    memcpy(r->backend + r->backend_kept, s + i, take);
    r->backend_kept = (uint8_t)(r->backend_kept + take);
    while (last > i && IS(s[last - 1], BLANK))
        last--;
    if (last > i)
        r->backend_end = r->backend_seen + (last - i);
    r->backend_seen += n - i;
}

/* The backendHeader's value in data[i, len), as far as its line goes: kept, and settled at its
 * end (BACKEND_CHARS of the stripped value). */
static void scan_backend(soak_response *r, const unsigned char *data, size_t i, size_t len)
{
    size_t end = i;
    while (end < len && data[end] != '\r' && data[end] != '\n')
        end++;
    keep_backend(r, data + i, end - i);
    if (end < len) {
        r->backend_on = 0;
        r->backend_len = (uint8_t)(r->backend_end > sizeof r->backend ? sizeof r->backend : r->backend_end);
    }
}

/* The backendHeader's name ended at its colon, at data[at]: keep its value if it is the first in
 * the final head (the first match in the final head, never a 1xx's or the trailers), from
 * what follows the colon in this read on (soak_response_feed goes on with the next reads). */
static void backend_field(soak_response *r, const unsigned char *data, size_t at, size_t len)
{
    if (!r->final_head || (r->flags & F_TRAILING) || (r->seen & SEEN_BACKEND))
        return;
    r->seen |= SEEN_BACKEND;
    r->backend_on = 1;
    scan_backend(r, data, at + 1, len);
}

/* Keep what a run reports of a Server or Content-Encoding value: its bytes with the blanks at
 * either end taken off (str.strip()), the Server's up to SOAK_SERVER_MAX. */
static void keep_value(soak_response *r, const unsigned char *s, size_t n)
{
    char *copy = r->watch == W_SERVER ? r->server : r->encoding;
    size_t cap = r->watch == W_SERVER ? sizeof r->server : sizeof r->encoding;
    size_t i = 0, last = n;
    if (!r->value_started) { /* the blanks before the value */
        while (i < n && IS(s[i], BLANK))
            i++;
        if (i == n)
            return;
        r->value_started = 1;
    }
    size_t take = n - i < cap - r->kept_len ? n - i : cap - r->kept_len;
    memcpy(copy + r->kept_len, s + i, take);
    r->kept_len = (uint16_t)(r->kept_len + take);
    while (last > i && IS(s[last - 1], BLANK)) /* and those after it, so far */
        last--;
    if (last > i)
        r->value_end = r->value_len + (last - i);
    r->value_len += n - i;
}

/* The kept value ended: settle the Server header, or whether the body is gzip (bodyhash.is_gzip). */
static void value_kept(soak_response *r)
{
    if (r->watch == W_SERVER) {
        r->server_cut = r->value_end > sizeof r->server;
        r->server_len = (uint16_t)(r->server_cut ? sizeof r->server : r->value_end);
    } else if (r->watch == W_ENCODING) {
        size_t n = (size_t)r->value_end;
        char v[sizeof r->encoding];
        for (size_t i = 0; i < n && i < sizeof v; i++)
            v[i] = (char)lower((unsigned char)r->encoding[i]);
        r->gzip = (n == 4 && memcmp(v, "gzip", 4) == 0) || (n == 6 && memcmp(v, "x-gzip", 6) == 0);
    }
    r->watch = W_NONE;
}

/* Does a Transfer-Encoding line of the final head mention "chunked" anywhere? Which decides
 * whether the close cuts a body or ends it: a body the server said was chunked is cut by a
 * close before its last chunk, even where llhttp reads it to the close (chunked not last). */
static void scan_te(soak_response *r, unsigned char c)
{
    if (r->watch != W_TE)
        return;
    c = lower(c);
    if (c == (unsigned char)CHUNKED[r->chunked_match]) {
        if (++r->chunked_match == sizeof CHUNKED - 1)
            r->te_says_chunked = 1, r->chunked_match = 0;
    } else {
        r->chunked_match = c == 'c'; /* "chunked" has no other prefix that is also a suffix */
    }
}

/* llhttp's setHeaderFlags, at a Connection comma and at the end of a value. */
static void set_header_flags(soak_response *r)
{
    switch (r->header) {
    case H_KEEP_ALIVE: r->flags |= F_KEEP_ALIVE; r->header = H_CONNECTION; break;
    case H_CLOSE: r->flags |= F_CLOSE; r->header = H_CONNECTION; break;
    case H_CONN_UPGRADE: r->header = H_CONNECTION; break;
    case H_CHUNKED: r->flags |= F_CHUNKED; break;
    default: break;
    }
}

/* The first byte of a value that is not blank (header_value_start). 0, or 1 if refused. */
static int value_start(soak_response *r, const char **reason)
{
    switch (r->header) {
    case H_UPGRADE:
        r->header = H_GENERAL;
        r->state = S_VALUE;
        return 0;
    case H_TRANSFER_ENCODING: /* a second one counts again from scratch */
        r->flags = (uint16_t)((r->flags | F_TRANSFER_ENCODING) & ~F_CHUNKED);
        r->index = 0;
        r->state = S_TE;
        return 0;
    case H_CONTENT_LENGTH:
        if (r->flags & F_CONTENT_LENGTH) {
            *reason = "Duplicate Content-Length";
            return 1;
        }
        r->remaining = 0;
        r->state = S_LENGTH;
        return 0;
    case H_CONNECTION:
        r->index = 0;
        r->state = S_CONN;
        return 0;
    default:
        r->state = S_VALUE;
        return 0;
    }
}

#ifdef SOAK_SSE2
HOT __m128i load16(const unsigned char *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }

/* The bytes of x that are in [lo, lo + span], as unsigned bytes: 0xff each, else 0. */
HOT __m128i within(__m128i x, char lo, char span)
{
    __m128i t = _mm_sub_epi8(x, _mm_set1_epi8(lo));
    return _mm_cmpeq_epi8(_mm_min_epu8(t, _mm_set1_epi8(span)), t);
}
#endif

/* Where the run of header value bytes (llhttp's HEADER_CHARS) from `i` ends: at `len` or at
 * the first control byte other than HT, or DEL. Many bytes at a time: values are most of a head. */
HOT size_t value_run(const unsigned char *data, size_t i, size_t len)
{
#ifdef SOAK_SSE2
    while (len - i >= 16) {
        __m128i x = load16(data + i);
        __m128i stop = _mm_andnot_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\t')), within(x, 0, 0x1f));
        unsigned bits = (unsigned)_mm_movemask_epi8(_mm_or_si128(stop, _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f))));
        if (bits != 0)
            return i + (unsigned)__builtin_ctz(bits);
        i += 16;
    }
#endif
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    while (len - i >= 8) {
        uint64_t word = load8(data + i), del = word ^ (0x7f * ones);
        /* The high bit of each byte below 0x20 or equal to 0x7f, and maybe of bytes after it. */
        uint64_t stop = ((word - 0x20 * ones) & ~word & highs) | ((del - ones) & ~del & highs);
        if (stop == 0) {
            i += 8;
            continue;
        }
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        i += (size_t)__builtin_ctzll(stop) / 8; /* the first such byte, exactly: the lowest bit set */
        if (data[i] != '\t')
            return i;
        i++;
#else
        break;
#endif
    }
    while (i < len && IS(data[i], VALUE))
        i++;
    return i;
}

/* Where the run of token bytes (a header name) from `i` ends: at `len` or at the first byte
 * that is no tchar. With SSE2 sixteen bytes at a time while they are letters, digits or '-'
 * (nearly every name), the table then saying whether a byte that is not ends the run. */
HOT size_t token_run(const unsigned char *data, size_t i, size_t len)
{
#ifdef SOAK_SSE2
    while (len - i >= 16) {
        __m128i x = load16(data + i);
        __m128i common = _mm_or_si128(within(_mm_or_si128(x, _mm_set1_epi8(0x20)), 'a', 'z' - 'a'),
                                      _mm_or_si128(within(x, '0', 9), _mm_cmpeq_epi8(x, _mm_set1_epi8('-'))));
        unsigned other = ~(unsigned)_mm_movemask_epi8(common) & 0xffffu;
        if (other == 0) {
            i += 16;
            continue;
        }
        i += (unsigned)__builtin_ctz(other);
        if (!IS(data[i], TOKEN))
            return i;
        i++;
    }
#endif
    while (len - i >= 4 && (CLASS[data[i]] & CLASS[data[i + 1]] & CLASS[data[i + 2]] & CLASS[data[i + 3]] & TOKEN))
        i += 4;
    while (i < len && IS(data[i], TOKEN))
        i++;
    return i;
}

/* Where the run of header value bytes from `i` ends, keeping or scanning it if it is watched. */
static size_t scan_value(soak_response *r, const unsigned char *data, size_t i, size_t len)
{
    size_t end = value_run(data, i, len);
    if (r->watch == W_SERVER || r->watch == W_ENCODING)
        keep_value(r, data + i, end - i);
    else if (r->watch == W_TE)
        for (size_t k = i; k < end; k++)
            scan_te(r, data[k]);
    return end;
}

/* A status line as nearly all are, "HTTP/1.1 ddd" or "HTTP/1.0 ddd", read at once; 0 if it is not one (the
 * byte-by-byte states then read it, and name what is wrong). */
static int fast_status_line(soak_response *r, const unsigned char *p)
{
    uint64_t version = load8(p);
    unsigned minor, d0 = p[9] - '0', d1 = p[10] - '0', d2 = p[11] - '0';
    if (version == load8("HTTP/1.1"))
        minor = 1;
    else if (version == load8("HTTP/1.0"))
        minor = 0;
    else
        return 0;
    if (p[8] != ' ' || d0 > 9 || d1 > 9 || d2 > 9)
        return 0;
    r->major = 1;
    r->minor = (uint8_t)minor;
    r->code = (uint16_t)(d0 * 100 + d1 * 10 + d2);
    r->final_head = !(r->code >= 100 && r->code <= 199);
    return 1;
}

/* --- whole header lines at once ---------------------------------------------------------- */

/* A whole line of one of NAMES whose value is `v[0..n)` (n > 0, its first byte no blank, no
 * control byte but HT in it), as the byte-by-byte states would read it: 1 when done, 0 (and
 * nothing changed) when they must read it, for it is one of the rarer or refused forms. */
HOT int fast_special(soak_response *r, int id, const unsigned char *v, size_t n)
{
    const char *reason;
    uint64_t length = 0;
    size_t k = 0;
    unsigned flag;
    switch (NAMES[id].header) {
    case H_GENERAL: /* Server, Content-Encoding: kept whole, as scan_value would keep it */
    case H_UPGRADE: /* read as any other value (value_start) */
        field_complete(r, id, &reason);
        r->header = H_GENERAL;
        if (r->watch != W_NONE) {
            keep_value(r, v, n);
            value_kept(r);
        }
        return 1;
    case H_CONTENT_LENGTH: /* digits, then blanks only */
        if (r->flags & (F_TRANSFER_ENCODING | F_CONTENT_LENGTH))
            return 0;
        for (; k < n && v[k] >= '0' && v[k] <= '9'; k++) {
            unsigned d = (unsigned)(v[k] - '0');
            if (length > (UINT64_MAX - d) / 10)
                return 0;
            length = length * 10 + d;
        }
        flag = F_CONTENT_LENGTH;
        break;
    case H_CONNECTION: /* one token of the two that say something, in any case, then blanks */
        if (n >= 10 && spells(v, "keep-alive", 10))
            k = 10, flag = F_KEEP_ALIVE;
        else if (n >= 5 && spells(v, "close", 5))
            k = 5, flag = F_CLOSE;
        else
            return 0;
        break;
    default: /* Transfer-Encoding */
        return 0;
    }
    while (k < n && (v[k] == ' ' || v[k] == '\t'))
        k++;
    if (k < n)
        return 0;
    field_complete(r, id, &reason); /* cannot refuse: the flags that would were looked at */
    if (flag == F_CONTENT_LENGTH)
        r->remaining = length;
    r->flags |= (uint16_t)flag;
    return 1;
}

/* Header lines as nearly all are, read a line at a time from a line's start at `i`: a name of
 * token bytes, a colon, a value of no control byte but HT, CR LF, and a next line that is no
 * fold; the blank line ends the head. A value is only looked at when the name is one of NAMES
 * (fast_special); of any other name the byte states do nothing with it, even when it is empty.
 * Anything else (a line a read cuts, a value of NAMES that is empty or unusual,
 * Transfer-Encoding, whatever is refused) is left to the byte-by-byte states from the start of
 * its line, with the state as they would have it there, so the answer is theirs whatever the
 * reads. Returns the offset reached: still in S_FIELD_START unless the head ended.
 * `backend` (a constant: fast_fields picks the copy once per call): a backendHeader is kept,
 * so that a run without one pays nothing per header line for it. */
HOT size_t fast_fields_as(soak_response *r, const unsigned char *data, size_t i, size_t len, const int backend)
{
    for (;;) {
        const unsigned char *p = data + i;
        size_t left = len - i, n, e, v;
        if (left < 2)
            return i;
        if (p[0] == '\r') { /* the blank line: S_HEADERS_LF's ending */
            if (p[1] != '\n')
                return i;
            i += 2;
            if (r->flags & F_TRAILING)
                message_complete(r, i);
            else
                head_complete(r, i);
            return i;
        }
        n = token_run(p, 0, left);
        if (n == 0 || n == left || p[n] != ':')
            return i;
        e = value_run(p, n + 1, left); /* the blanks before the value included */
        if (left - e < 3 || load2(p + e) != load2("\r\n") || p[e + 2] == ' ' || p[e + 2] == '\t')
            return i;
        int id = name_of(p, n);
        if (id < 0) { /* nothing is done with its value, even an empty one, unless it is the backend's */
            r->header = H_GENERAL;
        } else {
            for (v = n + 1; v < e && (p[v] == ' ' || p[v] == '\t'); v++)
                ;
            if (v == e || !fast_special(r, id, p + v, e - v))
                return i;
        }
        if (backend && n == r->backend_name_len && is_backend(r, p, n))
            backend_field(r, p, n, e + 1); /* the line's CR is at p[e] */
        i += e + 2;
    }
}

static size_t fast_fields(soak_response *r, const unsigned char *data, size_t i, size_t len)
{
    if (__builtin_expect(r->backend_name_len != 0, 0))
        return fast_fields_as(r, data, i, len, 1);
    return fast_fields_as(r, data, i, len, 0);
}

/* --- the parser ------------------------------------------------------------------------- */

void soak_response_init(soak_response *r, int head_request, uint32_t max_head)
{
    memset(r, 0, offsetof(soak_response, server)); /* the Server value is server_len bytes of it */
    r->head_request = head_request != 0;
    r->max_head = max_head;
    r->state = S_START;
}

int soak_response_want_backend(soak_response *r, const char *name, size_t len)
{
    if (len == 0 || len > SOAK_BACKEND_MAX)
        return -1;
    for (size_t i = 0; i < len; i++)
        if (!IS(name[i], TOKEN) || lower((unsigned char)name[i]) != (unsigned char)name[i])
            return -1;
    r->backend_name = name;
    r->backend_name_len = (uint8_t)len;
    return 0;
}

/* Parse `data` until it ends or the response does; returns the offset reached. */
static size_t parse(soak_response *r, const unsigned char *data, size_t len)
{
    size_t i = 0;
    const char *reason = NULL;
    while (i < len) {
        unsigned char c = data[i];
        switch ((enum state)r->state) {
        case S_START:
            if (c == '\r' || c == '\n') {
                i++;
                break;
            }
            begin_message(r);
            if (len - i >= 12 && fast_status_line(r, data + i)) {
                i += 12;
                r->state = S_STATUS_END;
            } else {
                r->index = 0;
                r->state = S_PROTOCOL;
            }
            break;
        case S_PROTOCOL:
            if (r->index == 0)
                r->word = c == 'H' ? 0 : c == 'R' ? 1 : c == 'I' ? 2 : 3;
            if (r->word > 2 || c != (unsigned char)PROTOCOLS[r->word][r->index])
                return invalid(r, i, "Expected HTTP/, RTSP/ or ICE/");
            i++;
            if (PROTOCOLS[r->word][++r->index] == '\0')
                r->state = S_SLASH;
            break;
        case S_SLASH:
            if (c != '/')
                return invalid(r, i, "Expected HTTP/, RTSP/ or ICE/");
            i++;
            r->state = S_MAJOR;
            break;
        case S_MAJOR:
            if (c < '0' || c > '9')
                return invalid(r, i, "Invalid major version");
            r->major = (uint8_t)(c - '0');
            i++;
            r->state = S_DOT;
            break;
        case S_DOT:
            if (c != '.')
                return invalid(r, i, "Expected dot");
            i++;
            r->state = S_MINOR;
            break;
        case S_MINOR:
            if (c < '0' || c > '9')
                return invalid(r, i, "Invalid minor version");
            r->minor = (uint8_t)(c - '0');
            if (!((r->major == 0 && r->minor == 9) || (r->major == 1 && r->minor <= 1) ||
                  (r->major == 2 && r->minor == 0)))
                return invalid(r, i, "Invalid HTTP version");
            i++;
            r->state = S_SPACE;
            break;
        case S_SPACE:
            if (c != ' ')
                return invalid(r, i, "Expected space after version");
            i++;
            r->code = 0;
            r->index = 0;
            r->state = S_STATUS;
            break;
        case S_STATUS:
            if (c < '0' || c > '9')
                return invalid(r, i, "Invalid status code");
            r->code = (uint16_t)(r->code * 10 + (c - '0'));
            i++;
            if (++r->index == 3) {
                r->final_head = !(r->code >= 100 && r->code <= 199);
                r->state = S_STATUS_END;
            }
            break;
        case S_STATUS_END:
            if (c == '\r') {
                i++;
                r->state = S_LINE_LF;
                break;
            }
            if (c != ' ')
                return invalid(r, i, "Invalid response status");
            i++;
            r->state = S_REASON;
            /* fall through */
        case S_REASON: /* any byte but CR and LF */
            while (i < len && data[i] != '\r' && data[i] != '\n')
                i++;
            if (i == len)
                break;
            if (data[i] == '\n')
                return invalid(r, i, "Missing expected CR after response line");
            r->state = S_LINE_LF;
            if (++i == len)
                break;
            c = data[i];
            /* fall through */
        case S_LINE_LF:
            if (c != '\n')
                return invalid(r, i, "Expected LF after CR");
            i++;
            r->state = S_HEADERS_START;
            if (i == len)
                break;
            c = data[i];
            goto headers_start;
        case S_VALUE_WS_CR:
            if (c != '\n')
                return invalid(r, i, "Expected LF after CR");
            i++;
            r->state = S_VALUE_WS_LF;
            break;
        case S_VALUE_WS_LF: /* the value was empty, unless this is a fold */
            if (c == ' ' || c == '\t')
                return invalid(r, i, "Invalid header value char");
            if (r->header == H_CONTENT_LENGTH)
                return invalid(r, i, "Empty Content-Length");
            if (r->header == H_TRANSFER_ENCODING)
                return invalid(r, i, "Empty Transfer-Encoding");
            set_header_flags(r);
            value_kept(r);
            r->state = S_FIELD_START;
            break;
        case S_TE: /* "chunked", compared as llhttp's toLowerUnsafe does */
            if ((c | 0x20) == (unsigned char)CHUNKED[r->index]) {
                scan_te(r, c);
                i++;
                if (++r->index == sizeof CHUNKED - 1)
                    r->state = S_TE_LAST;
            } else {
                r->state = S_TE_TOKEN;
            }
            break;
        case S_TE_LAST:
            if (c == ' ') {
                scan_te(r, c);
                i++;
            } else if (c == '\r' || c == '\n') {
                r->header = H_CHUNKED;
                r->state = S_VALUE_END;
            } else {
                r->state = S_TE_TOKEN;
            }
            break;
        case S_TE_TOKEN:
            if (c == ',') {
                r->state = S_TE_OWS;
            } else if (!IS(c, CONN)) {
                r->header = H_GENERAL;
                r->state = S_VALUE;
                break;
            }
            scan_te(r, c);
            i++;
            break;
        case S_TE_OWS:
            if (c == ' ' || c == '\t') {
                scan_te(r, c);
                i++;
            } else {
                r->index = 0;
                r->state = S_TE;
            }
            break;
        case S_LENGTH:
            for (; i < len && data[i] >= '0' && data[i] <= '9'; i++) {
                unsigned d = (unsigned)(data[i] - '0');
                if (r->remaining > (UINT64_MAX - d) / 10)
                    return invalid(r, i, "Content-Length overflow");
                r->remaining = r->remaining * 10 + d;
            }
            if (i < len)
                r->state = S_LENGTH_WS;
            break;
        case S_LENGTH_WS:
            if (c == ' ' || c == '\t') {
                i++;
            } else if (c == '\r' || c == '\n') {
                r->flags |= F_CONTENT_LENGTH;
                r->state = S_VALUE_END;
            } else {
                return invalid(r, i, "Invalid character in Content-Length");
            }
            break;
        case S_CONN: /* close, upgrade or keep-alive, in any case, after any blanks */
            for (;;) {
                c = lower(data[i]);
                if (r->index == 0) {
                    if (c == ' ' || c == '\t') {
                        if (++i == len)
                            break;
                        continue;
                    }
                    r->word = c == 'c' ? 0 : c == 'u' ? 1 : c == 'k' ? 2 : 3;
                    if (r->word <= 2 && len - i >= WORDS[r->word].len) { /* the whole word at once */
                        size_t k = 1;
                        while (k < WORDS[r->word].len && lower(data[i + k]) == (unsigned char)WORDS[r->word].text[k])
                            k++;
                        if (k == WORDS[r->word].len) {
                            i += k;
                            r->header = WORDS[r->word].header;
                            r->state = S_CONN_WS;
                            break;
                        }
                    }
                }
                if (r->word > 2 || c != (unsigned char)WORDS[r->word].text[r->index]) {
                    r->state = S_CONN_TOKEN;
                    break;
                }
                i++;
                if (WORDS[r->word].text[++r->index] == '\0') {
                    r->header = WORDS[r->word].header;
                    r->state = S_CONN_WS;
                    break;
                }
                if (i == len)
                    break;
            }
            break;
        case S_CONN_WS:
            if (c == ',') {
                set_header_flags(r);
                i++;
                r->index = 0;
                r->state = S_CONN;
            } else if (c == ' ' || c == '\t') {
                i++;
            } else if (c == '\r' || c == '\n') {
                r->state = S_VALUE_END;
            } else {
                r->header = H_GENERAL;
                r->state = S_CONN_TOKEN;
            }
            break;
        case S_CONN_TOKEN:
            if (c == ',') {
                i++;
                r->index = 0;
                r->state = S_CONN;
            } else if (IS(c, CONN)) {
                i++;
            } else {
                r->state = S_VALUE_END;
            }
            break;
        /* The states of a header line, in order: each goes on to the next without a turn of the loop. */
        case S_VALUE:
            i = scan_value(r, data, i, len);
            if (i == len)
                break;
            r->state = S_VALUE_END;
            c = data[i];
            /* fall through */
        case S_VALUE_END:
            if (c == '\n')
                return invalid(r, i, "Missing expected CR after header value");
            if (c != '\r')
                return invalid(r, i, "Invalid header value char");
            if (r->watch != W_NONE)
                value_kept(r);
            r->state = S_VALUE_LF;
            if (++i == len)
                break;
            c = data[i];
            /* fall through */
        case S_VALUE_LF:
            if (c != '\n')
                return invalid(r, i, "Missing expected LF after header value");
            r->state = S_VALUE_FOLD;
            if (++i == len)
                break;
            c = data[i];
            /* fall through */
        case S_VALUE_FOLD:
            if (c == ' ' || c == '\t')
                return invalid(r, i, "Unexpected whitespace after header value");
            if (r->header >= H_KEEP_ALIVE)
                set_header_flags(r);
            r->state = S_FIELD_START;
            goto fields;
        case S_HEADERS_START:
        headers_start:
            if (c == ' ')
                return invalid(r, i, "Unexpected space after start line");
            r->state = S_FIELD_START;
            /* fall through */
        case S_FIELD_START:
        fields:
            i = fast_fields(r, data, i, len);
            if (r->state != S_FIELD_START) {
                if (r->state == S_ENDED)
                    return i;
                break;
            }
            if (i == len)
                break;
            c = data[i];
            if (c == '\r') {
                i++;
                r->state = S_HEADERS_LF;
                break;
            }
            if (c == '\n')
                return invalid(r, i, "Invalid header field char");
            if (c == ':')
                return invalid(r, i, "Invalid header token");
            r->name_len = 0;
            r->backend_match = 0;
            r->state = S_FIELD;
            /* fall through */
        case S_FIELD: { /* header_field and header_field_general */
            size_t start = i;
            int n, backend;
            i = token_run(data, i, len);
            if (i == len) { /* the name goes on in the next read */
                hold_name(r, data + start, i - start);
                break;
            }
            if (r->name_len == 0) {
                n = name_of(data + start, i - start);
                backend = r->backend_name_len && is_backend(r, data + start, i - start);
            } else {
                hold_name(r, data + start, i - start);
                n = name_of((const unsigned char *)r->name, r->name_len);
                backend = r->backend_name_len && r->backend_match == r->backend_name_len;
            }
            c = data[i];
            if (c != ':') /* llhttp says it one way after a special name, another after any other */
                return invalid(r, i, c == ' ' && n >= 0 && NAMES[n].special ? "Invalid header field char"
                                                                             : "Invalid header token");
            if (n < 0)
                r->header = H_GENERAL; /* and nothing of it is watched, but the backendHeader */
            else if (field_complete(r, n, &reason))
                return invalid(r, i, reason);
            if (backend)
                backend_field(r, data, i, len);
            r->state = S_VALUE_WS;
            if (++i == len)
                break;
        }
            /* fall through */
        case S_VALUE_WS:
            while (i < len && (data[i] == ' ' || data[i] == '\t'))
                i++;
            if (i == len)
                break;
            c = data[i];
            if (c == '\r') {
                i++;
                r->state = S_VALUE_WS_CR;
            } else if (c == '\n') {
                return invalid(r, i, "Invalid header value char");
            } else if (value_start(r, &reason)) {
                return invalid(r, i, reason);
            }
            break;
        case S_HEADERS_LF:
            if (c != '\n')
                return invalid(r, i, "Expected LF after headers");
            i++;
            if (r->flags & F_TRAILING) /* the trailers' blank line ends a chunked body */
                message_complete(r, i);
            else
                head_complete(r, i);
            if (r->state == S_ENDED)
                return i;
            break;
        case S_BODY_LENGTH:
        case S_CHUNK_DATA: {
            size_t n = len - i < r->remaining ? len - i : (size_t)r->remaining;
            r->remaining -= n;
            r->body_bytes += n;
            if (r->body_sink != NULL && r->final_head && n > 0)
                r->body_sink(r->body_ctx, data + i, n);
            i += n;
            if (r->remaining > 0)
                break;
            if (r->state == S_CHUNK_DATA) {
                r->state = S_CHUNK_DATA_CR;
                break;
            }
            message_complete(r, i);
            if (r->state == S_ENDED)
                return i;
            break;
        }
        case S_BODY_EOF: /* everything until the close */
            r->body_bytes += len - i;
            if (r->body_sink != NULL && r->final_head)
                r->body_sink(r->body_ctx, data + i, len - i);
            i = len;
            break;
        case S_CHUNK_SIZE_FIRST:
            if (!IS(c, HEX))
                return invalid(r, i, "Invalid character in chunk size");
            r->remaining = hex_value(c);
            i++;
            r->state = S_CHUNK_SIZE;
            break;
        case S_CHUNK_SIZE:
            if (IS(c, HEX)) {
                if (r->remaining > UINT64_MAX / 16)
                    return invalid(r, i, "Chunk size overflow");
                r->remaining = r->remaining * 16 + hex_value(c);
                i++;
            } else {
                r->state = S_CHUNK_SIZE_END;
            }
            break;
        case S_CHUNK_SIZE_END:
            if (c == '\r')
                r->state = S_CHUNK_SIZE_LF;
            else if (c == '\n')
                return invalid(r, i, "Missing expected CR after chunk size");
            else if (c == ';')
                r->state = S_CHUNK_EXT;
            else
                return invalid(r, i, "Invalid character in chunk size");
            i++;
            break;
        case S_CHUNK_EXT:
            if (c == ' ' || c == '\r')
                return invalid(r, i, "Invalid character in chunk extensions");
            r->state = S_CHUNK_EXT_NAME;
            break;
        case S_CHUNK_EXT_NAME:
            if (c == '\n')
                return invalid(r, i, "Missing expected CR after chunk extension name");
            if (c == '=')
                r->state = S_CHUNK_EXT_VALUE;
            else if (c == ';')
                r->state = S_CHUNK_EXT;
            else if (c == '\r')
                r->state = S_CHUNK_SIZE_LF;
            else if (!IS(c, TOKEN))
                return invalid(r, i, "Invalid character in chunk extensions name");
            i++;
            break;
        case S_CHUNK_EXT_VALUE:
            if (c == '\n')
                return invalid(r, i, "Missing expected CR after chunk extension value");
            if (c == '"')
                r->state = S_CHUNK_EXT_QUOTED;
            else if (c == ';')
                r->state = S_CHUNK_EXT;
            else if (c == '\r')
                r->state = S_CHUNK_SIZE_LF;
            else if (!IS(c, TOKEN))
                return invalid(r, i, "Invalid character in chunk extensions value");
            i++;
            break;
        case S_CHUNK_EXT_QUOTED:
            if (c == '"')
                r->state = S_CHUNK_EXT_QUOTED_END;
            else if (c == '\\')
                r->state = S_CHUNK_EXT_PAIR;
            else if (!IS(c, QDTEXT))
                return invalid(r, i, "Invalid character in chunk extensions quoted value");
            i++;
            break;
        case S_CHUNK_EXT_PAIR:
            if (!IS(c, PAIR))
                return invalid(r, i, "Invalid quoted-pair in chunk extensions quoted value");
            i++;
            r->state = S_CHUNK_EXT_QUOTED;
            break;
        case S_CHUNK_EXT_QUOTED_END:
            if (c == '\n')
                return invalid(r, i, "Missing expected CR after chunk extension value");
            if (c == ';')
                r->state = S_CHUNK_EXT;
            else if (c == '\r')
                r->state = S_CHUNK_SIZE_LF;
            else
                return invalid(r, i, "Invalid character in chunk extensions quote value");
            i++;
            break;
        case S_CHUNK_SIZE_LF:
            if (c != '\n')
                return invalid(r, i, "Expected LF after chunk size");
            i++;
            if (r->remaining > 0) {
                r->state = S_CHUNK_DATA;
            } else { /* the last chunk: trailers follow, read as headers are */
                r->flags |= F_TRAILING;
                r->state = S_FIELD_START;
            }
            break;
        case S_CHUNK_DATA_CR:
            if (c == '\n')
                return invalid(r, i, "Missing expected CR after chunk data");
            if (c != '\r')
                return invalid(r, i, "Expected LF after chunk data");
            i++;
            r->state = S_CHUNK_DATA_LF;
            break;
        case S_CHUNK_DATA_LF:
            if (c != '\n')
                return invalid(r, i, "Expected LF after chunk data");
            i++;
            r->state = S_CHUNK_SIZE_FIRST;
            break;
        case S_CLOSED:
            if (c != '\r' && c != '\n')
                return invalid(r, i, "Data after `Connection: close`");
            i++;
            break;
        case S_ENDED:
            return i;
        }
    }
    return i;
}

size_t soak_response_feed(soak_response *r, const unsigned char *data, size_t len)
{
    r->events = 0;
    if (r->outcome != SOAK_PENDING)
        return 0;
    int head_before = r->head_done;
    uint64_t body_before = r->body_bytes;
    if (r->backend_on) /* the backendHeader's value goes on in this read */
        scan_backend(r, data, 0, len);
    size_t used = parse(r, data, len);
    r->wire_bytes += used;
    if (r->outcome != SOAK_PENDING)
        return used;
    /* The bounds, after each read: the head(s), then runs of framing with no body in them
     * (what a server could make us read forever without a response or a body byte). */
    if (!r->head_done) {
        if (r->wire_bytes > r->max_head)
            fail(r, SOAK_KIND_PROTOCOL, SOAK_ERR_HEAD_TOO_LARGE, NULL);
    } else if (head_before) {
        r->framing_run = r->body_bytes > body_before ? 0 : r->framing_run + len;
        if (r->framing_run > r->max_head)
            fail(r, SOAK_KIND_PROTOCOL, SOAK_ERR_FRAMING_TOO_LARGE, NULL);
    }
    return used;
}

void soak_response_eof(soak_response *r)
{
    r->events = 0;
    if (r->outcome != SOAK_PENDING)
        return;
    if (!r->head_done)
        fail(r, SOAK_KIND_CLOSED, SOAK_ERR_NO_RESPONSE, NULL);
    else if (r->body_mode == B_EOF && !r->te_says_chunked)
        done(r, 0, 0); /* the close ends the body, and the connection with it */
    else
        fail(r, SOAK_KIND_CLOSED, SOAK_ERR_BODY_CUT, NULL);
}

void soak_response_lost(soak_response *r)
{
    r->events = 0;
    if (r->outcome != SOAK_PENDING)
        return;
    fail(r, SOAK_KIND_CLOSED, r->head_done ? SOAK_ERR_BODY_CUT : SOAK_ERR_NO_RESPONSE, NULL);
}

/* failures._kib: "100 KiB", or the bytes when not a whole number of KiB. */
static const char *kib(uint32_t size, char *buf, size_t n)
{
    if (size % 1024 == 0)
        snprintf(buf, n, "%lu KiB", (unsigned long)(size / 1024));
    else
        snprintf(buf, n, "%lu bytes", (unsigned long)size);
    return buf;
}

int soak_response_error(const soak_response *r, char *buf, size_t size)
{
    char bound[32];
    if (r->outcome != SOAK_FAILED)
        return snprintf(buf, size, "%s", "");
    switch (r->error) {
    case SOAK_ERR_INVALID:
        return snprintf(buf, size, "protocol: invalid response: %s", r->reason);
    case SOAK_ERR_SWITCHED:
        return snprintf(buf, size, "protocol: the server switched protocols (status 101)");
    case SOAK_ERR_STATUS_RANGE:
        return snprintf(buf, size, "protocol: invalid response: status code %03u is below 100", (unsigned)r->code);
    case SOAK_ERR_HEAD_TOO_LARGE:
        return snprintf(buf, size, "protocol: response head larger than %s", kib(r->max_head, bound, sizeof bound));
    case SOAK_ERR_FRAMING_TOO_LARGE:
        return snprintf(buf, size, "protocol: chunk-size line or trailers larger than %s",
                        kib(r->max_head, bound, sizeof bound));
    case SOAK_ERR_NO_RESPONSE:
        return snprintf(buf, size, "closed: Server disconnected without sending a response.");
    case SOAK_ERR_BODY_CUT:
        if (r->flags & F_CONTENT_LENGTH)
            return snprintf(buf, size,
                            "closed: peer closed connection without sending complete message body "
                            "(received %llu bytes, expected %llu)",
                            (unsigned long long)r->body_bytes, (unsigned long long)r->content_length);
        return snprintf(buf, size,
                        "closed: peer closed connection without sending complete message body "
                        "(received %llu bytes, of a body of unknown length)",
                        (unsigned long long)r->body_bytes);
    default:
        return snprintf(buf, size, "other: unknown failure %u", (unsigned)r->error);
    }
}
