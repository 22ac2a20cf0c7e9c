/*
 * The native engine's loop: pure C11 and POSIX/Linux, no CPython. engine.c is its Python
 * binding and documents the API Python sees; this header is what the two share.
 *
 * One soak_engine runs one process's clients of a run in its own thread: its sockets in
 * its own epoll set, one timerfd for pacing and deadlines, responses framed by response.c,
 * results counted into per-interval tallies under one mutex that the thread holds while it
 * handles a batch of events (never while it waits), so Python takes an interval between
 * two batches. Nothing is allocated per request: connection slots, client state and the
 * read buffer are made at the start; a tally (and its histogram) once per interval.
 */
#ifndef SOAK_CORE_H
#define SOAK_CORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "body.h"
#include "histogram.h"
#include "response.h"
#include "schedule.h"
#include "tls.h"

/* result.ERROR_KINDS, in its order: the index of a failure's kind. */
enum soak_kind_index {
    SOAK_K_DNS, SOAK_K_REFUSED, SOAK_K_CONNECT, SOAK_K_TIMEOUT, SOAK_K_RESET, SOAK_K_CLOSED,
    SOAK_K_PROTOCOL, SOAK_K_TLS, SOAK_K_CANCELLED, SOAK_K_OTHER, SOAK_KINDS
};
extern const char *const soak_kind_names[SOAK_KINDS];

enum soak_model { SOAK_CLOSED, SOAK_OPEN, SOAK_BENCH };

/* The TLS versions a connection is counted by (Recorder.connections' "HTTP/1.1 TLSv1.3"); the
 * client speaks TLS 1.2 at least, and any later version than these is counted as the last. */
#define SOAK_TLS_VERSIONS 2
extern const char *const soak_tls_versions[SOAK_TLS_VERSIONS];

#define SOAK_STATUSES 1000  /* runner.metrics.tally.STATUSES: statuses are 3 digits */
#define SOAK_TEXT_MAX 256   /* a failure text, and its pattern, are cut to this (they are shorter) */
#define SOAK_MAX_GROUP_URLS 64
#define SOAK_MAX_OTHER_LENGTHS 256
#define SOAK_NONE INT64_MIN /* an unset time */
#define SOAK_BACKENDS_KEPT 100 /* runner.stats.recorder.BACKENDS_KEPT: names a tally counts apart */
/* records.Config.body_texts, in order: a body that is not gzip (the text before zlib's reason, and
 * after it), one that inflates past the bound, one that ends before its gzip stream does */
enum { SOAK_NOT_GZIP_BEFORE, SOAK_NOT_GZIP_AFTER, SOAK_TOO_LARGE_TEXT, SOAK_CUT_TEXT, SOAK_BODY_TEXTS };

/* One address a connection can be made to (as transport.Address: family, sockaddr). */
typedef struct soak_address {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    int family;
    char text[80];            /* "127.0.0.1:8080", for the connect timeout's text */
} soak_address;

/* One origin's addresses, in transport.in_turn's terms: addrs holds those of the resolver's
 * first family (nown of them) and then the others, each in the resolver's order; a new
 * connection's turn begins the rotation among the first family's. Replaced whole by
 * soak_engine_set_addresses (Python looks the name up again as its answer expires). None
 * (naddrs 0): the name's last lookup failed, and each new connection fails as `dns` with
 * `failure`, Python's text for it. */
typedef struct soak_origin {
    soak_address *addrs;
    uint32_t naddrs, nown;
    uint64_t turn;            /* connections dialled to it (Answers.next_turn) */
    char failure[SOAK_TEXT_MAX];
    /* https: the name its certificate must cover (and the SNI, unless an IP address), and the
     * text of a certificate that does not (tls.h); tls_host NULL: plain HTTP */
    char *tls_host;
    int tls_numeric;
    char *tls_mismatch;
} soak_origin;

/* One URL: what its requests are and which origin they go to. */
typedef struct soak_target {
    uint32_t origin;          /* connections are reused only for targets of the same origin */
    int is_head;              /* a HEAD request: the response has no body, the connection ends */
    uint64_t body_bytes_out;  /* Result.bytes_out */
    unsigned char *request;   /* the exact bytes written (wire.wire_request) */
    size_t request_len;
    unsigned char *last_request; /* the same with `Connection: close`: a connection's last (Lifetime) */
    size_t last_request_len;
} soak_target;

/* Everything the engine needs, given once (see engine.c for each one's meaning). */
typedef struct soak_config {
    soak_target *targets;
    uint32_t ntargets, norigins;
    soak_origin *origins;     /* [norigins] */
    uint32_t max_requests;    /* transport.Lifetime: 0, no limit */
    int64_t max_age_ns;       /* ... 0, no limit */
    int model;
    int64_t clients, max_in_flight, total_requests;
    soak_schedule schedule;
    soak_grid grid;
    int64_t timeout_ns;
    char timeout_text[64];
    int keep_alive, corrected;
    int64_t unit_ns;          /* 0: no in-unit histogram */
    int64_t late_ns;          /* runner.stats.client.LATE_NS */
    int64_t probe_ns;         /* ... PROBE_PERIOD_NS: a timer firing later is a stall (soak_taken; 0: none is) */
    int64_t gap_ns;           /* ... WATCH_GAP_NS: the timer fires at least this often (0: only when due) */
    uint32_t max_head;        /* runner.load.transport.MAX_HEAD_BYTES */
    uint32_t error_groups;    /* runner.stats.recorder.ERROR_GROUPS */
    uint32_t group_urls;      /* ... GROUP_URLS */
    uint32_t other_lengths;   /* ... OTHER_LENGTHS */
    /* metrics (runner.metrics.tally.MetricsTally's counts); nslots == 0: off */
    uint32_t *slot_of;        /* URL index -> slot */
    uint32_t nslots;
    int64_t *edges;           /* sorted bucket edges in ns (tally.EDGES_NS) */
    uint32_t nedges;
    /* backendHeader: its name in lower case (backend_len 0: none); each response's value counted */
    char backend[SOAK_BACKEND_MAX];
    uint8_t backend_len;
    /* the URL of each send of a turn (runner.config.targets.Targets.wheel): send n goes to
     * wheel[n % nwheel]; NULL: to n % ntargets (nwheel is ntargets then) */
    uint32_t *wheel;
    uint32_t nwheel;
    /* per URL (Recorder.per_url): URL index -> slot (targets.url_slots); nurl_slots 0: none kept */
    uint32_t *url_slot;
    uint32_t nurl_slots;
    /* body hashing (hashSampleRate, hashValue; runner.load.bodyhash): each send's body hashed when
     * random() < hash_rate (0: never), a gzip body inflated first when `inflate` (compress),
     * within inflate_step and max_inflated; body_texts: what its failures are called */
    double hash_rate;
    uint64_t hash_value;
    int inflate;
    uint32_t inflate_step;
    uint64_t max_inflated;
    char body_texts[SOAK_BODY_TEXTS][SOAK_TEXT_MAX];
    /* the run's TLS client (tls.h), for its https origins; NULL: none is https */
    soak_tls_ctx *tls;
} soak_config;

/* Tally.backends: responses by backendHeader value, the first SOAK_BACKENDS_KEPT values met
 * by name (in the order met: Counter's order), any later ones as other. "" is a response
 * without the header (NO_BACKEND, once Python names it): kept beside them, never in their
 * place, so that `other` only ever follows SOAK_BACKENDS_KEPT names, as in Tally.count_backend. */
typedef struct soak_backend {
    uint64_t count;
    uint8_t len;
    char name[SOAK_BACKEND_MAX];
} soak_backend;

typedef struct soak_backends {
    uint32_t n;        /* kept, "" among them once met */
    uint32_t none;     /* 1 once "" is kept */
    uint64_t other;
    soak_backend kept[SOAK_BACKENDS_KEPT + 1];
} soak_backends;

/* recorder.ErrorGroup, keyed by (kind, pattern). */
typedef struct soak_group {
    uint64_t hash;            /* of kind and pattern, to find it fast */
    uint64_t count;
    uint32_t url;             /* the example's URL */
    uint8_t kind, overflow;   /* overflow: the kind's OTHER_TEXTS group ("*") */
    uint8_t more_urls, varied;
    uint32_t nurls;
    uint32_t urls[SOAK_MAX_GROUP_URLS];
    char pattern[SOAK_TEXT_MAX];
    char text[SOAK_TEXT_MAX]; /* the first text seen */
} soak_group;

/* recorder.Tally: one interval's counts, or the drain's. */
typedef struct soak_tally {
    uint64_t good, bad, failed, skipped, late, kernel_clocked, bytes_in, bytes_out;
    uint64_t skipped_at_end;  /* of the skipped: those a client got to only once sending was over */
    uint64_t hash_checked, hash_mismatches; /* responses whose body was hashed, and of those not hashValue */
    int64_t late_max_ns;
    int64_t delayed_max_ns;   /* the slowest response whose latency the client's delay may be in */
    uint64_t errors[SOAK_KINDS];
    uint64_t statuses[SOAK_STATUSES];
    soak_group *groups;       /* allocated at the first failure */
    uint32_t ngroups;
    soak_hist latency;
    /* runner.stats.phases.PhaseTally: dns is 0 here (Python looks names up), so connect is kept
     * for the responses that opened a connection, tls for those that opened one over TLS (kept
     * in a run with an https origin: its other new connections' tls is 0), the rest counted. */
    soak_hist phase_connect, phase_tls, phase_ttfb, phase_body;
    uint64_t phase_reused;
    soak_backends *backends;  /* allocated at the first response, with a backendHeader */
    uint64_t opened, closed;  /* a URL's tally only: connections its sends opened, and closed */
} soak_tally;

/* recorder.BenchTally. */
typedef struct soak_bench {
    soak_hist waiting, total_reused, connect_new, processing_new, total_new;
    int has_document;
    uint64_t document_length, length_mismatches, kept_alive, header_bytes;
    int has_server;
    uint16_t server_len;
    char server[SOAK_SERVER_MAX];
    int64_t last_end_ns, first_response_ns, server_ns;
    uint32_t nother;
    uint64_t other_length[SOAK_MAX_OTHER_LENGTHS], other_count[SOAK_MAX_OTHER_LENGTHS];
} soak_bench;

/* MetricsTally's counts, written by the engine thread and read by any (relaxed atomics). */
typedef struct soak_metrics {
    uint32_t slots, places;   /* places: nedges + 1 */
    uint64_t skipped, late;
    uint64_t opened, closed;  /* connections, as Tally.connections_opened/closed */
    uint64_t *statuses;       /* [slot][SOAK_STATUSES] */
    uint64_t *failures;       /* [slot][SOAK_KINDS] */
    uint64_t *good, *bad;     /* [slot][places] */
    uint64_t *good_ns, *bad_ns;
} soak_metrics;

/* A timer firing later than probe_ns: when it was due and when the loop ran it. */
typedef struct soak_stall {
    int64_t due, ran;
} soak_stall;
#define SOAK_STALLS 32        /* an interval keeps its longest stalls' times; the rest go to loop_lag */

/* Keep the stall {due, ran} among an interval's `*n` kept ones (at most SOAK_STALLS, in order):
 * while there is room it is kept; then, if it is longer than the shortest kept, that one gives
 * way to it. Returns the lateness that goes to the loop-lag histogram instead (the one given
 * way, or this one), or -1 if none does. Pure: the engine's loop_tick, and tests (stalls()). */
static inline int64_t soak_keep_stall(soak_stall *kept, uint32_t *n, soak_stall stall)
{
    if (*n < SOAK_STALLS) {
        kept[(*n)++] = stall;
        return -1;
    }
    soak_stall *least = &kept[0];
    for (uint32_t i = 1; i < SOAK_STALLS; i++)
        if (kept[i].ran - kept[i].due < least->ran - least->due)
            least = &kept[i];
    int64_t lag = stall.ran - stall.due, shortest = least->ran - least->due;
    if (shortest >= lag)
        return lag;
    memmove(least, least + 1, (size_t)(&kept[SOAK_STALLS - 1] - least) * sizeof *least);
    kept[SOAK_STALLS - 1] = stall;
    return shortest;
}

/* What soak_engine_take hands over; the caller owns it (soak_taken_free). */
typedef struct soak_taken {
    soak_tally *tally;        /* the interval's (NULL: nothing in it) */
    soak_tally **later;       /* final only: the later intervals' that held anything, in order */
    uint32_t nlater;
    soak_tally *drain;        /* final only: the drain, NULL if nothing came back after the end */
    int64_t drain_end_ns;
    soak_hist loop_lag;       /* the timer's lateness since the previous take (ClientMeter.loop_lags) */
    soak_stall stalls[SOAK_STALLS]; /* ... its firings later than probe_ns, in order (ClientMeter.tick) */
    uint32_t nstalls;
    int64_t next_tick_ns;     /* when the timer fires next (ClientMeter.expect); SOAK_NONE: the thread has ended */
    uint64_t opened, closed;  /* connections opened and closed since the previous take */
    soak_tally **per_url;     /* final only, with url slots: each slot's tally for the run (NULL: empty) */
    uint32_t nper_url;
} soak_taken;

/* Run-wide figures, copied (soak_figures_free). */
typedef struct soak_figures {
    uint64_t sent;
    int64_t stopped_sending_ns;   /* SOAK_NONE: sending did not stop early */
    soak_hist send_lag, lateness, uncorrected, in_unit;  /* counts NULL where not kept */
    uint64_t connections;         /* new connections that carried a response (Recorder.connections) */
    uint64_t tls_connections[SOAK_TLS_VERSIONS]; /* ... of them over TLS, by version (soak_tls_versions) */
    uint64_t opened;              /* sockets opened */
    uint64_t closed;              /* sockets closed */
    int has_bench;
    soak_bench bench;
    int finished;                 /* the thread has ended */
    int fatal;                    /* errno of what ended the thread early, 0 if nothing did */
} soak_figures;

typedef struct soak_engine soak_engine;

/* The engine for `config`, which it takes over (freed with the engine, also on failure);
 * NULL with the reason in err. */
soak_engine *soak_engine_new(soak_config *config, char *err, size_t err_size);
void soak_engine_free(soak_engine *e);
int soak_engine_start(soak_engine *e);                 /* 0 or an errno */
void soak_engine_stop(soak_engine *e, int64_t at_ns);  /* any thread */
void soak_engine_cancel(soak_engine *e);               /* any thread */
void soak_engine_drain_from(soak_engine *e, int64_t t_ns);
/* A warm-up's engine `e` hands each client's connections, once it is done with them, to the
 * same client of its run's engine `to`, whose clients wait for them (engine.Handoff); both made
 * alike (clients, origins, model: not a bench) and neither started. 0, or -1 if they cannot.
 * `to` must outlive e's thread. */
int soak_engine_give_to(soak_engine *e, soak_engine *to);
/* Origin o's addresses from now on (any thread; takes `addrs` over); with none (n 0, addrs
 * NULL), the `dns` failure text of its new connections instead; -1: no such origin. */
int soak_engine_set_addresses(soak_engine *e, uint32_t o, soak_address *addrs, uint32_t n, const char *failure);
/* Order addrs as soak_origin holds them (own family first); returns nown. */
uint32_t soak_addresses_order(soak_address *addrs, uint32_t n);
/* Take interval k (the next one); -1 if k is not the next one; -2 without memory. */
int soak_engine_take(soak_engine *e, int64_t k, int final, int64_t until_ns, soak_taken *out);
void soak_taken_free(soak_taken *t);
int soak_engine_figures(soak_engine *e, soak_figures *out);  /* 0, or -1 without memory */
void soak_figures_free(soak_figures *f);
int soak_engine_done_fd(const soak_engine *e);         /* readable once the thread has ended */
void soak_engine_join(soak_engine *e);
uint64_t soak_engine_sent(const soak_engine *e);
uint64_t soak_engine_done(const soak_engine *e); /* sends ended and counted, read from any thread */
int soak_engine_step_fd(const soak_engine *e);   /* readable once done reaches the step asked for */
/* Make step_fd readable (once) when done reaches `at` (any thread; UINT64_MAX: never); a step
 * told before is forgotten. Nonzero if done has reached it already: then it may be told too. */
int soak_engine_step_at(soak_engine *e, uint64_t at);
int64_t soak_engine_next_index(soak_engine *e);
int64_t soak_engine_stopped_sending(soak_engine *e); /* SOAK_NONE: sending did not stop early */
const soak_metrics *soak_engine_metrics(const soak_engine *e);
/* The metrics' counts as of one moment, between two of the engine's batches, into `into` (its own
 * arrays, freed with soak_metrics_free): read one by one while the engine runs, a scrape could
 * count a response in one series and not yet in another. -1: out of memory. */
int soak_engine_metrics_copy(soak_engine *e, soak_metrics *into);
void soak_metrics_free(soak_metrics *m);
void soak_tally_free(soak_tally *t);
void soak_config_free(soak_config *cfg);      /* what a config holds, for one never given to an engine */

/* Relaxed atomic access to counters another thread may read. */
#define SOAK_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define SOAK_ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)

#endif /* SOAK_CORE_H */
