/*
 * runner.load.native._engine: the native engine (core.c) seen from Python.
 *
 * One Engine runs one process's clients of a run for HTTP/1.1 (over TLS too, where it was
 * built with OpenSSL: the module's TLS is 1) in a thread of its own,
 * with the GIL released the whole time: no Python runs per request. Python configures it,
 * starts it, takes each interval's aggregates as the interval closes, stops it, and reads
 * the run-wide figures at the end. runner/load/native/engine.py and runner/stats/native.py
 * are the Python side; this is the whole contract between them.
 *
 *   Engine(config: dict)      everything, in plain ints, floats, bytes and tuples:
 *     targets        [(request bytes, last request bytes (with Connection: close), is_head,
 *                      body_bytes_out, origin)], index = URL index (send n goes to
 *                      targets[n % len]); origin: targets of one origin share connections
 *     origins        [[(family, sockaddr as connect() takes it, address_text), ...]], index =
 *                      origin: its addresses in the resolver's order; new connections rotate
 *                      through them as transport.in_turn does, trying the next on failure
 *     max_requests, max_age_ns   transport.Lifetime (0: no limit), decided at each send
 *     model          "closed" | "open" | "bench"
 *     clients, max_in_flight (open), total_requests (0: no limit)
 *     start_ns, qps, end_ns (None: no end), stride, offset   runner.load.schedule.Schedule
 *     grid_start_ns, interval_ns                             runner.load.schedule.Grid
 *     timeout_ns, timeout_text (format_duration's), keep_alive, corrected (latency from
 *     the due time), unit_ns (0: no in-unit histogram)
 *     late_ns, probe_ns, gap_ns, max_head, error_groups, group_urls, other_lengths: the
 *     Python constants (probe_ns, gap_ns: the loop lag's, runner.stats.client)
 *     metrics        None, or (slot_of tuple, slots, edges_ns tuple): MetricsTally's counts
 *     backend_header "" or a header name (a token, at most 64 bytes, none the parser reads
 *                      itself): each response's value of it counted in the tallies' backends
 *     wheel          None, or a tuple of URL indices: send n goes to targets[wheel[n % len]]
 *                      (runner.config.targets.Targets.wheel) instead of targets[n % len]
 *     url_slots      None, or (slot_of tuple, slots): a tally per slot for the run (Recorder.per_url)
 *     tls            None (no https origin), or the run's TLS client (tls.h): {"ca_file", "cert_file",
 *                      "key_file" ("": none), "insecure", "ciphers" (TLS 1.2's list), "verify_failed"
 *                      (what a failed certificate check's text begins with), "reasons" [(lib, reason,
 *                      text)]: OpenSSL's codes and the failure text each is named by}
 *     origins_tls    [None (plain HTTP) or (host, numeric, mismatch)] per origin: the name checked
 *                      (and sent as SNI unless numeric), and the text of a certificate that does
 *                      not cover it
 *   start()                   start the thread (once)
 *   fileno() -> int           an eventfd that becomes readable when the thread has ended
 *   stop(at_ns)               send nothing more; the first stop's time counts (Engine.stop)
 *   cancel()                  every request in flight ends as `cancelled` (Engine.cancel_in_flight)
 *   drain_from(t_ns)          results ending at or after t_ns are the drain (Recorder.drain_from)
 *   set_addresses(origin, addresses, failure="")   the origin's addresses from now on (any
 *                             thread); with none ([]), `failure` instead: the text of the
 *                             `dns` failure each new connection to it then ends as
 *   take(k, final=False, until_ns=None) -> dict
 *                             interval k (the next untaken one) as Recorder.close files it,
 *                             open clients' skips due before until_ns (default: its end)
 *                             counted in it first: {"tally", "later" (final: the later
 *                             intervals' tallies), "drain" (final: a tally or None),
 *                             "drain_end_ns", "loop_lag", "opened", "closed" (connections
 *                             since the previous take), "stalls" ([(due_ns, ran_ns)]: the
 *                             timer's firings later than probe_ns, not in loop_lag),
 *                             "next_tick_ns" (when it fires next; None once the thread ended),
 *                             "per_url" (final with url_slots: each slot's tally for the
 *                             run, else None)}
 *   figures() -> dict         run-wide, copied (live or after the end): sent,
 *                             stopped_sending_ns, send_lag, lateness, uncorrected, in_unit,
 *                             connections, tls_connections ({version: n}: those of them over
 *                             TLS), opened, closed, finished, fatal (an errno), bench
 *   metrics() -> dict | None  MetricsTally's counts, read while the thread runs
 *   join()                    wait for the thread to end
 *   sent, done, next_index, stopped_sending_ns   properties (done: sends ended and counted;
 *                             stopped_sending_ns: None, or as Engine's)
 *
 * For tests: counts_len(highest) (hdrh's counts_len) and schedule(...) (schedule.h's answers,
 * to hold to runner/load/schedule.py's on any input).
 *
 * A tally is a dict of Tally's fields (good, bad, failed, skipped, late, late_max_ns,
 * kernel_clocked, bytes_in, bytes_out, statuses {code: n}, errors {kind: n}, groups
 * [(kind, pattern, count, text, url, urls, more_urls, varied)], latency, phases: (connect_new,
 * tls_new (those over TLS only), ttfb, body, reused) as runner.stats.phases.PhaseTally keeps them), backends [(value
 * bytes, count)] in the order met and other_backends (the count beyond SOAK_BACKENDS_KEPT
 * values), opened and closed (a URL's tally: its connections)). A histogram is
 * (counts, count, min, max, sum, sum_sq): counts a Counts object (a writable buffer of
 * hdrhistogram's counts array, owned by it, handed over without a copy) or None when
 * empty; LatencyHistogram.from_counts takes it as it is.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "core.h"
#include "pyput.h"

/* --- Counts: a histogram's counts array, as a buffer ---------------------------------- */

typedef struct {
    PyObject_HEAD
    uint64_t *counts;
    Py_ssize_t len;
} CountsObject;

static void counts_dealloc(CountsObject *self)
{
    free(self->counts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int counts_getbuffer(CountsObject *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->counts, self->len * (Py_ssize_t)sizeof(uint64_t), 0,
                             flags);
}

static Py_ssize_t counts_length(CountsObject *self) { return self->len; }

static PyBufferProcs counts_buffer = {(getbufferproc)counts_getbuffer, NULL};
static PySequenceMethods counts_sequence = {.sq_length = (lenfunc)counts_length};

static PyTypeObject CountsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runner.load.native._engine.Counts",
    .tp_basicsize = sizeof(CountsObject),
    .tp_dealloc = (destructor)counts_dealloc,
    .tp_as_buffer = &counts_buffer,
    .tp_as_sequence = &counts_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A histogram's counts (hdrhistogram's layout, 64-bit), as a writable buffer.",
};

/* --- small conversions ---------------------------------------------------------------- */

static PyObject *u128(soak_u128 v)
{
    if ((v >> 64) == 0)
        return PyLong_FromUnsignedLongLong((unsigned long long)v);
    PyObject *high = PyLong_FromUnsignedLongLong((unsigned long long)(v >> 64));
    PyObject *low = PyLong_FromUnsignedLongLong((unsigned long long)v);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *shifted = high && shift ? PyNumber_Lshift(high, shift) : NULL;
    PyObject *whole = shifted && low ? PyNumber_Or(shifted, low) : NULL;
    Py_XDECREF(high);
    Py_XDECREF(low);
    Py_XDECREF(shift);
    Py_XDECREF(shifted);
    return whole;
}

/* (counts, count, min, max, sum, sum_sq), taking the counts over (h has none after). */
static PyObject *histogram(soak_hist *h)
{
    PyObject *counts;
    if (h->count == 0 || h->counts == NULL) {
        soak_hist_free(h);
        counts = Py_NewRef(Py_None);
    } else {
        CountsObject *c = PyObject_New(CountsObject, &CountsType);
        if (c == NULL)
            return NULL;
        c->counts = h->counts;
        c->len = h->len;
        h->counts = NULL;
        counts = (PyObject *)c;
    }
    PyObject *sum = u128(h->sum), *sum_sq = u128(h->sum_sq);
    PyObject *t = counts && sum && sum_sq ? Py_BuildValue("(NKLLNN)", counts, (unsigned long long)h->count,
                                                          (long long)h->min, (long long)h->max, sum, sum_sq)
                                          : NULL;
    if (t == NULL) {
        Py_XDECREF(counts);
        Py_XDECREF(sum);
        Py_XDECREF(sum_sq);
    }
    return t;
}

/* A histogram the engine keeps only in some runs: None where it was not kept. */
static PyObject *kept_histogram(soak_hist *h)
{
    if (h->len == 0)
        Py_RETURN_NONE;
    return histogram(h);
}

static int put_u64(PyObject *dict, const char *key, uint64_t value)
{
    return put(dict, key, PyLong_FromUnsignedLongLong(value));
}

static int put_i64(PyObject *dict, const char *key, int64_t value)
{
    return put(dict, key, PyLong_FromLongLong(value));
}

static PyObject *group_tuple(const soak_group *g)
{
    PyObject *urls = PyTuple_New(g->nurls);
    if (urls == NULL)
        return NULL;
    for (uint32_t i = 0; i < g->nurls; i++) {
        PyObject *url = PyLong_FromUnsignedLong(g->urls[i]);
        if (url == NULL) {
            Py_DECREF(urls);
            return NULL;
        }
        PyTuple_SET_ITEM(urls, i, url);
    }
    return Py_BuildValue("(ssKsINOO)", soak_kind_names[g->kind], g->pattern, (unsigned long long)g->count, g->text,
                         (unsigned int)g->url, urls, g->more_urls ? Py_True : Py_False,
                         g->varied ? Py_True : Py_False);
}

/* A tally's phases (PhaseTally's parts): (connect_new, tls_new, ttfb, body, reused), histograms taken over. */
static PyObject *phases_tuple(soak_tally *t)
{
    PyObject *connect = histogram(&t->phase_connect), *tls = histogram(&t->phase_tls),
             *ttfb = histogram(&t->phase_ttfb), *body = histogram(&t->phase_body);
    if (connect == NULL || tls == NULL || ttfb == NULL || body == NULL) {
        Py_XDECREF(connect);
        Py_XDECREF(tls);
        Py_XDECREF(ttfb);
        Py_XDECREF(body);
        return NULL;
    }
    return Py_BuildValue("(NNNNK)", connect, tls, ttfb, body, (unsigned long long)t->phase_reused);
}

/* A tally's backends as [(value bytes, count)], in the order met. */
static PyObject *backends_list(const soak_backends *b)
{
    PyObject *list = PyList_New(0);
    for (uint32_t i = 0; list != NULL && b != NULL && i < b->n; i++) {
        PyObject *one = Py_BuildValue("(y#K)", b->kept[i].name, (Py_ssize_t)b->kept[i].len,
                                      (unsigned long long)b->kept[i].count);
        if (one == NULL || PyList_Append(list, one) < 0) {
            Py_XDECREF(one);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(one);
    }
    return list;
}

/* A tally as a dict (None for an interval nothing landed in is an empty dict's job: {}). */
static PyObject *tally_dict(soak_tally *t)
{
    PyObject *d = PyDict_New();
    if (d == NULL || t == NULL)
        return d;
    PyObject *statuses = PyDict_New(), *errors = PyDict_New(), *groups = PyList_New(0);
    if (put(d, "backends", backends_list(t->backends)) ||
        put_u64(d, "other_backends", t->backends != NULL ? t->backends->other : 0) ||
        put_u64(d, "opened", t->opened) || put_u64(d, "closed", t->closed) || put_u64(d, "good", t->good) ||
        put_u64(d, "bad", t->bad) || put_u64(d, "failed", t->failed) ||
        put_u64(d, "skipped", t->skipped) || put_u64(d, "late", t->late) || put_i64(d, "late_max_ns", t->late_max_ns) ||
        put_u64(d, "kernel_clocked", t->kernel_clocked) || put_u64(d, "bytes_in", t->bytes_in) ||
        put_u64(d, "bytes_out", t->bytes_out) || statuses == NULL || errors == NULL || groups == NULL)
        goto error;
    for (int code = 0; code < SOAK_STATUSES; code++) {
        if (!t->statuses[code])
            continue;
        PyObject *key = PyLong_FromLong(code), *n = PyLong_FromUnsignedLongLong(t->statuses[code]);
        int failed = key == NULL || n == NULL || PyDict_SetItem(statuses, key, n) < 0;
        Py_XDECREF(key);
        Py_XDECREF(n);
        if (failed)
            goto error;
    }
    for (int kind = 0; kind < SOAK_KINDS; kind++) {
        if (!t->errors[kind])
            continue;
        PyObject *n = PyLong_FromUnsignedLongLong(t->errors[kind]);
        int failed = n == NULL || PyDict_SetItemString(errors, soak_kind_names[kind], n) < 0;
        Py_XDECREF(n);
        if (failed)
            goto error;
    }
    for (uint32_t i = 0; i < t->ngroups; i++) {
        PyObject *g = group_tuple(&t->groups[i]);
        int failed = g == NULL || PyList_Append(groups, g) < 0;
        Py_XDECREF(g);
        if (failed)
            goto error;
    }
    if (PyDict_SetItemString(d, "statuses", statuses) || PyDict_SetItemString(d, "errors", errors) ||
        PyDict_SetItemString(d, "groups", groups) || put(d, "latency", histogram(&t->latency)) ||
        put(d, "phases", phases_tuple(t)))
        goto error;
    Py_DECREF(statuses);
    Py_DECREF(errors);
    Py_DECREF(groups);
    return d;
error:
    Py_XDECREF(statuses);
    Py_XDECREF(errors);
    Py_XDECREF(groups);
    Py_DECREF(d);
    return NULL;
}

/* --- reading the config --------------------------------------------------------------- */

static PyObject *item(PyObject *config, const char *key)
{
    PyObject *value = PyDict_GetItemString(config, key); /* borrowed */
    if (value == NULL)
        PyErr_Format(PyExc_KeyError, "native engine config: no %s", key);
    return value;
}

static int get_i64(PyObject *config, const char *key, int64_t *out)
{
    PyObject *value = item(config, key);
    if (value == NULL)
        return -1;
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

static int get_u32(PyObject *config, const char *key, uint32_t *out)
{
    int64_t v;
    if (get_i64(config, key, &v) < 0)
        return -1;
    if (v < 0 || v > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "native engine config: %s out of range", key);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int get_bool(PyObject *config, const char *key, int *out)
{
    PyObject *value = item(config, key);
    if (value == NULL)
        return -1;
    int v = PyObject_IsTrue(value);
    if (v < 0)
        return -1;
    *out = v;
    return 0;
}

/* One address tuple (family, sockaddr as connect() takes it, text) into `a`. */
static int read_address(PyObject *tuple, soak_address *a)
{
    int family;
    PyObject *address;
    const char *text;
    Py_ssize_t text_len;
    if (!PyArg_ParseTuple(tuple, "iO!s#;an address is (family, sockaddr, text)", &family, &PyTuple_Type, &address,
                          &text, &text_len))
        return -1;
    const char *host;
    int port;
    unsigned int flow = 0, scope = 0;
    if (!PyArg_ParseTuple(address, "si|II;a sockaddr is (host, port[, flowinfo, scope_id])", &host, &port, &flow,
                          &scope))
        return -1;
    memset(a, 0, sizeof *a);
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&a->addr;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        a->addr_len = sizeof *in;
        if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
            goto bad;
    } else if (family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->addr;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        in6->sin6_flowinfo = htonl(flow);
        in6->sin6_scope_id = scope;
        a->addr_len = sizeof *in6;
        if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
            goto bad;
    } else {
        goto bad;
    }
    if (port < 0 || port > 65535 || (size_t)text_len >= sizeof a->text)
        goto bad;
    a->family = family;
    memcpy(a->text, text, (size_t)text_len);
    a->text[text_len] = '\0';
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "native engine config: the address %R is not a numeric IPv4/IPv6 one", address);
    return -1;
}

/* A list of address tuples into a new array (n >= 1), or NULL with an exception. */
static soak_address *read_addresses(PyObject *list, uint32_t *n)
{
    PyObject *seq = PySequence_Fast(list, "native engine config: an origin's addresses must be a list");
    if (seq == NULL)
        return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len < 1 || len > 65536) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "native engine config: an origin needs 1 to 65536 addresses");
        return NULL;
    }
    soak_address *addrs = calloc((size_t)len, sizeof *addrs);
    if (addrs == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        if (read_address(PySequence_Fast_GET_ITEM(seq, i), &addrs[i]) < 0) {
            free(addrs);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    *n = (uint32_t)len;
    return addrs;
}

static int read_origins(PyObject *config, soak_config *cfg)
{
    PyObject *list = item(config, "origins");
    if (list == NULL)
        return -1;
    PyObject *seq = PySequence_Fast(list, "native engine config: origins must be a list");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if ((uint32_t)n != cfg->norigins) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "native engine config: origins needs one address list per origin");
        return -1;
    }
    cfg->origins = calloc(n ? (size_t)n : 1, sizeof *cfg->origins);
    if (cfg->origins == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        soak_origin *o = &cfg->origins[i];
        o->addrs = read_addresses(PySequence_Fast_GET_ITEM(seq, i), &o->naddrs);
        if (o->addrs == NULL) {
            Py_DECREF(seq);
            return -1;
        }
        o->nown = soak_addresses_order(o->addrs, o->naddrs);
    }
    Py_DECREF(seq);
    return 0;
}

static unsigned char *copied(const char *data, Py_ssize_t len)
{
    unsigned char *copy = malloc((size_t)len);
    if (copy == NULL)
        PyErr_NoMemory();
    else
        memcpy(copy, data, (size_t)len);
    return copy;
}

/* One target tuple into `t` (its request bytes copied). */
static int read_target(PyObject *tuple, soak_target *t)
{
    int is_head;
    const char *request, *last;
    Py_ssize_t request_len, last_len;
    unsigned long long body_out;
    unsigned int origin;
    if (!PyArg_ParseTuple(tuple, "y#y#pKI;a target is (request, last_request, is_head, body_out, origin)",
                          &request, &request_len, &last, &last_len, &is_head, &body_out, &origin))
        return -1;
    if (request_len == 0 || last_len == 0) {
        PyErr_SetString(PyExc_ValueError, "native engine config: a target's request is empty");
        return -1;
    }
    t->origin = origin;
    t->is_head = is_head;
    t->body_bytes_out = body_out;
    t->request = copied(request, request_len);
    t->last_request = copied(last, last_len);
    if (t->request == NULL || t->last_request == NULL)
        return -1;
    t->request_len = (size_t)request_len;
    t->last_request_len = (size_t)last_len;
    return 0;
}

static int read_targets(PyObject *config, soak_config *cfg)
{
    PyObject *list = item(config, "targets");
    if (list == NULL)
        return -1;
    PyObject *seq = PySequence_Fast(list, "native engine config: targets must be a list");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    cfg->targets = calloc(n ? (size_t)n : 1, sizeof *cfg->targets);
    if (cfg->targets == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        cfg->ntargets = (uint32_t)i + 1; /* freed with the config from here on */
        if (read_target(PySequence_Fast_GET_ITEM(seq, i), &cfg->targets[i]) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (cfg->targets[i].origin >= cfg->norigins)
            cfg->norigins = cfg->targets[i].origin + 1;
    }
    Py_DECREF(seq);
    return read_origins(config, cfg);
}

/* A tuple of ints into a new array of `n` of them. */
static int64_t *int_array(PyObject *tuple, const char *what, uint32_t *n)
{
    PyObject *seq = PySequence_Fast(tuple, what);
    if (seq == NULL)
        return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    int64_t *values = malloc((len ? (size_t)len : 1) * sizeof *values);
    if (values == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        values[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (values[i] == -1 && PyErr_Occurred()) {
            free(values);
            Py_DECREF(seq);
            return NULL;
        }
    }
    *n = (uint32_t)len;
    Py_DECREF(seq);
    return values;
}

static int read_metrics(PyObject *config, soak_config *cfg)
{
    PyObject *metrics = item(config, "metrics");
    if (metrics == NULL)
        return -1;
    if (metrics == Py_None)
        return 0;
    PyObject *slot_of, *edges;
    unsigned int slots;
    if (!PyArg_ParseTuple(metrics, "OIO;metrics is (slot_of, slots, edges_ns)", &slot_of, &slots, &edges))
        return -1;
    uint32_t nslot_of;
    int64_t *slot_values = int_array(slot_of, "metrics: slot_of must be a tuple of ints", &nslot_of);
    if (slot_values == NULL)
        return -1;
    cfg->slot_of = malloc((nslot_of ? nslot_of : 1) * sizeof *cfg->slot_of);
    if (cfg->slot_of == NULL) {
        free(slot_values);
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t i = 0; i < nslot_of; i++)
        cfg->slot_of[i] = slot_values[i] < 0 ? UINT32_MAX : (uint32_t)slot_values[i];
    free(slot_values);
    cfg->edges = int_array(edges, "metrics: edges_ns must be a tuple of ints", &cfg->nedges);
    if (cfg->edges == NULL)
        return -1;
    if (nslot_of != cfg->ntargets || slots == 0) {
        PyErr_SetString(PyExc_ValueError, "native engine config: metrics slot_of needs a slot per target");
        return -1;
    }
    cfg->nslots = slots;
    return 0;
}

/* A tuple of URL indices (or slots), each below `below`, into a new array; NULL with an error. */
static uint32_t *index_array(PyObject *tuple, const char *what, uint32_t below, uint32_t *n)
{
    int64_t *values = int_array(tuple, what, n);
    if (values == NULL)
        return NULL;
    uint32_t *indices = malloc((*n ? *n : 1) * sizeof *indices);
    if (indices == NULL)
        PyErr_NoMemory();
    for (uint32_t i = 0; indices != NULL && i < *n; i++) {
        if (values[i] < 0 || values[i] >= below) {
            PyErr_Format(PyExc_ValueError, "native engine config: %s out of range", what);
            free(indices);
            indices = NULL;
            break;
        }
        indices[i] = (uint32_t)values[i];
    }
    free(values);
    return indices;
}

/* backend_header, wheel and url_slots: what counting backends and URLs apart needs. */
static int read_counting(PyObject *config, soak_config *cfg)
{
    PyObject *header = item(config, "backend_header"), *wheel = item(config, "wheel");
    PyObject *slots = item(config, "url_slots");
    if (header == NULL || wheel == NULL || slots == NULL)
        return -1;
    Py_ssize_t len;
    const char *name = PyUnicode_Check(header) ? PyUnicode_AsUTF8AndSize(header, &len) : NULL;
    if (name == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "native engine config: backend_header must be a str");
        return -1;
    }
    if (len > SOAK_BACKEND_MAX) {
        PyErr_SetString(PyExc_ValueError, "native engine config: backend_header is longer than 64");
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        cfg->backend[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] | 0x20 : name[i]);
    cfg->backend_len = (uint8_t)len;
    cfg->nwheel = cfg->ntargets; /* no wheel: send n goes to n % ntargets */
    if (wheel != Py_None) {
        cfg->wheel = index_array(wheel, "wheel", cfg->ntargets, &cfg->nwheel);
        if (cfg->wheel == NULL)
            return -1;
    }
    if (slots == Py_None)
        return 0;
    PyObject *slot_of;
    unsigned int nslots;
    if (!PyArg_ParseTuple(slots, "OI;url_slots is (slot_of, slots)", &slot_of, &nslots))
        return -1;
    uint32_t n;
    cfg->url_slot = index_array(slot_of, "url_slots", nslots, &n);
    if (cfg->url_slot == NULL)
        return -1;
    if (n != cfg->ntargets) {
        PyErr_SetString(PyExc_ValueError, "native engine config: url_slots needs a slot per target");
        return -1;
    }
    cfg->nurl_slots = nslots;
    return 0;
}

/* A str item of `d` as UTF-8 (borrowed from it), or NULL with an error. */
static const char *get_str(PyObject *d, const char *key)
{
    PyObject *value = item(d, key);
    if (value == NULL)
        return NULL;
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, "native engine config: %s must be a str", key);
        return NULL;
    }
    return PyUnicode_AsUTF8(value);
}

static char *copied_str(const char *text)
{
    size_t len = strlen(text) + 1;
    char *copy = malloc(len);
    if (copy == NULL)
        PyErr_NoMemory();
    else
        memcpy(copy, text, len);
    return copy;
}

/* "tls" (the run's context and its table of failure texts) and each origin's "origins_tls". */
static int read_tls(PyObject *config, soak_config *cfg)
{
    PyObject *tls = item(config, "tls"), *per_origin = item(config, "origins_tls");
    if (tls == NULL || per_origin == NULL)
        return -1;
    if (tls != Py_None) {
        if (!PyDict_Check(tls)) {
            PyErr_SetString(PyExc_TypeError, "native engine config: tls must be None or a dict");
            return -1;
        }
        const char *ca = get_str(tls, "ca_file"), *cert = ca ? get_str(tls, "cert_file") : NULL;
        const char *key = cert ? get_str(tls, "key_file") : NULL, *ciphers = key ? get_str(tls, "ciphers") : NULL;
        const char *verify_failed = ciphers ? get_str(tls, "verify_failed") : NULL;
        int insecure;
        if (verify_failed == NULL || get_bool(tls, "insecure", &insecure) < 0)
            return -1;
        char err[256];
        cfg->tls = soak_tls_ctx_new(ca, cert, key, insecure, ciphers, verify_failed, err, sizeof err);
        if (cfg->tls == NULL) {
            PyErr_Format(PyExc_ValueError, "native engine config: tls: %s", err);
            return -1;
        }
        PyObject *reasons = item(tls, "reasons");
        PyObject *seq = reasons ? PySequence_Fast(reasons, "native engine config: tls reasons must be a list") : NULL;
        if (seq == NULL)
            return -1;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            int lib, reason;
            const char *text;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iis", &lib, &reason, &text) ||
                soak_tls_ctx_name(cfg->tls, lib, reason, text) < 0) {
                if (!PyErr_Occurred())
                    PyErr_NoMemory();
                Py_DECREF(seq);
                return -1;
            }
        }
        Py_DECREF(seq);
    }
    PyObject *seq = PySequence_Fast(per_origin, "native engine config: origins_tls must be a list");
    if (seq == NULL)
        return -1;
    if ((uint32_t)PySequence_Fast_GET_SIZE(seq) != cfg->norigins) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "native engine config: origins_tls needs one entry per origin");
        return -1;
    }
    for (uint32_t i = 0; i < cfg->norigins; i++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(seq, i);
        const char *host, *mismatch;
        int numeric;
        if (entry == Py_None)
            continue;
        soak_origin *o = &cfg->origins[i];
        if (!PyArg_ParseTuple(entry, "sps", &host, &numeric, &mismatch) ||
            (o->tls_host = copied_str(host)) == NULL || (o->tls_mismatch = copied_str(mismatch)) == NULL) {
            Py_DECREF(seq);
            return -1;
        }
        o->tls_numeric = numeric;
    }
    Py_DECREF(seq);
    return 0;
}

static int read_config(PyObject *config, soak_config *cfg)
{
    int64_t v;
    if (!PyDict_Check(config)) {
        PyErr_SetString(PyExc_TypeError, "the native engine's config must be a dict");
        return -1;
    }
    if (read_targets(config, cfg) < 0)
        return -1;
    PyObject *model = item(config, "model");
    if (model == NULL)
        return -1;
    const char *name = PyUnicode_Check(model) ? PyUnicode_AsUTF8(model) : "";
    if (name == NULL)
        return -1;
    if (strcmp(name, "closed") == 0)
        cfg->model = SOAK_CLOSED;
    else if (strcmp(name, "open") == 0)
        cfg->model = SOAK_OPEN;
    else if (strcmp(name, "bench") == 0)
        cfg->model = SOAK_BENCH;
    else {
        PyErr_Format(PyExc_ValueError, "native engine config: model %R is not closed, open or bench", model);
        return -1;
    }
    PyObject *end = item(config, "end_ns"), *qps = item(config, "qps"), *text = item(config, "timeout_text");
    if (end == NULL || qps == NULL || text == NULL)
        return -1;
    if (end == Py_None) {
        cfg->schedule.end_ns = SOAK_NO_END;
    } else {
        cfg->schedule.end_ns = PyLong_AsLongLong(end);
        if (cfg->schedule.end_ns == -1 && PyErr_Occurred())
            return -1;
    }
    cfg->schedule.qps = PyFloat_AsDouble(qps);
    if (cfg->schedule.qps == -1.0 && PyErr_Occurred())
        return -1;
    const char *within = PyUnicode_AsUTF8(text);
    if (within == NULL)
        return -1;
    snprintf(cfg->timeout_text, sizeof cfg->timeout_text, "%s", within);
    if (get_i64(config, "clients", &cfg->clients) || get_i64(config, "max_in_flight", &cfg->max_in_flight) ||
        get_i64(config, "total_requests", &cfg->total_requests) ||
        get_i64(config, "start_ns", &cfg->schedule.start_ns) || get_i64(config, "stride", &cfg->schedule.stride) ||
        get_i64(config, "offset", &cfg->schedule.offset) || get_i64(config, "grid_start_ns", &cfg->grid.start_ns) ||
        get_i64(config, "interval_ns", &cfg->grid.interval_ns) || get_i64(config, "timeout_ns", &cfg->timeout_ns) ||
        get_bool(config, "keep_alive", &cfg->keep_alive) || get_bool(config, "corrected", &cfg->corrected) ||
        get_i64(config, "unit_ns", &cfg->unit_ns) || get_i64(config, "late_ns", &v) ||
        get_i64(config, "probe_ns", &cfg->probe_ns) || get_i64(config, "gap_ns", &cfg->gap_ns) ||
        get_u32(config, "max_head", &cfg->max_head) || get_u32(config, "error_groups", &cfg->error_groups) ||
        get_u32(config, "group_urls", &cfg->group_urls) || get_u32(config, "other_lengths", &cfg->other_lengths) ||
        get_u32(config, "max_requests", &cfg->max_requests) || get_i64(config, "max_age_ns", &cfg->max_age_ns))
        return -1;
    if (cfg->max_age_ns < 0) {
        PyErr_SetString(PyExc_ValueError, "native engine config: max_age_ns must be >= 0");
        return -1;
    }
    cfg->late_ns = v;
    cfg->schedule.clients = cfg->clients;
    if (read_counting(config, cfg) < 0 || read_tls(config, cfg) < 0)
        return -1;
    return read_metrics(config, cfg);
}

/* --- the Engine type ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    soak_engine *engine;
} EngineObject;

static int engine_init(EngineObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"config", NULL};
    PyObject *config;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O", keywords, &config))
        return -1;
    if (self->engine != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "an Engine is configured once");
        return -1;
    }
    soak_config cfg;
    memset(&cfg, 0, sizeof cfg);
    char err[256];
    if (read_config(config, &cfg) < 0) {
        soak_config_free(&cfg);
        return -1;
    }
    self->engine = soak_engine_new(&cfg, err, sizeof err);
    if (self->engine == NULL) {
        PyErr_Format(PyExc_ValueError, "native engine config: %s", err);
        return -1;
    }
    return 0;
}

static void engine_dealloc(EngineObject *self)
{
    if (self->engine != NULL) {
        Py_BEGIN_ALLOW_THREADS
        soak_engine_free(self->engine);
        Py_END_ALLOW_THREADS
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static soak_engine *configured(EngineObject *self)
{
    if (self->engine == NULL)
        PyErr_SetString(PyExc_RuntimeError, "the Engine was not configured");
    return self->engine;
}

static PyObject *engine_start(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    int err = soak_engine_start(e);
    if (err != 0) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyObject *engine_fileno(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    return e == NULL ? NULL : PyLong_FromLong(soak_engine_done_fd(e));
}

static PyObject *engine_stop(EngineObject *self, PyObject *arg)
{
    soak_engine *e = configured(self);
    long long at = PyLong_AsLongLong(arg);
    if (e == NULL || (at == -1 && PyErr_Occurred()))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    soak_engine_stop(e, at);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *engine_cancel(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    soak_engine_cancel(e);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *engine_drain_from(EngineObject *self, PyObject *arg)
{
    soak_engine *e = configured(self);
    long long t = PyLong_AsLongLong(arg);
    if (e == NULL || (t == -1 && PyErr_Occurred()))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    soak_engine_drain_from(e, t);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *engine_set_addresses(EngineObject *self, PyObject *args)
{
    soak_engine *e = configured(self);
    unsigned int origin;
    PyObject *list;
    const char *failure = "";
    Py_ssize_t failure_len = 0;
    if (e == NULL || !PyArg_ParseTuple(args, "IO|s#:set_addresses", &origin, &list, &failure, &failure_len))
        return NULL;
    uint32_t n = 0;
    soak_address *addrs = NULL;
    Py_ssize_t given = PyObject_Length(list);
    if (given < 0)
        return NULL;
    if (given == 0 && (failure_len == 0 || failure_len >= SOAK_TEXT_MAX)) {
        PyErr_SetString(PyExc_ValueError, "set_addresses: no addresses needs the failure's text (under 256 bytes)");
        return NULL;
    }
    if (given > 0 && (addrs = read_addresses(list, &n)) == NULL)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = soak_engine_set_addresses(e, origin, addrs, n, failure);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        free(addrs);
        PyErr_Format(PyExc_ValueError, "set_addresses: no origin %u", origin);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Stalls as [(due, ran)] in order: an interval's (taken_dict), or the test hook's (module_stalls). */
static PyObject *stalls_list(const soak_stall *stalls, uint32_t n)
{
    PyObject *list = PyList_New(n);
    for (uint32_t i = 0; list != NULL && i < n; i++) {
        PyObject *one = Py_BuildValue("(LL)", (long long)stalls[i].due, (long long)stalls[i].ran);
        if (one == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, one);
    }
    return list;
}

static PyObject *taken_dict(soak_taken *t)
{
    PyObject *d = PyDict_New(), *later = PyList_New(0), *per_url = Py_NewRef(Py_None);
    if (d == NULL || later == NULL)
        goto error;
    if (t->per_url != NULL) {
        Py_SETREF(per_url, PyList_New(0));
        for (uint32_t i = 0; per_url != NULL && i < t->nper_url; i++) {
            PyObject *one = tally_dict(t->per_url[i]);
            int failed = one == NULL || PyList_Append(per_url, one) < 0;
            Py_XDECREF(one);
            if (failed)
                goto error;
        }
        if (per_url == NULL)
            goto error;
    }
    for (uint32_t i = 0; i < t->nlater; i++) {
        PyObject *one = tally_dict(t->later[i]);
        int failed = one == NULL || PyList_Append(later, one) < 0;
        Py_XDECREF(one);
        if (failed)
            goto error;
    }
    if (put(d, "tally", tally_dict(t->tally)) || PyDict_SetItemString(d, "later", later) ||
        put(d, "drain", t->drain != NULL ? tally_dict(t->drain) : Py_NewRef(Py_None)) ||
        put_i64(d, "drain_end_ns", t->drain_end_ns) || put(d, "loop_lag", histogram(&t->loop_lag)) ||
        put(d, "stalls", stalls_list(t->stalls, t->nstalls)) ||
        put(d, "next_tick_ns", t->next_tick_ns == SOAK_NONE ? Py_NewRef(Py_None) : PyLong_FromLongLong(t->next_tick_ns)) ||
        put_u64(d, "opened", t->opened) || put_u64(d, "closed", t->closed) ||
        PyDict_SetItemString(d, "per_url", per_url))
        goto error;
    Py_DECREF(later);
    Py_DECREF(per_url);
    return d;
error:
    Py_XDECREF(later);
    Py_XDECREF(per_url);
    Py_XDECREF(d);
    return NULL;
}

static PyObject *engine_take(EngineObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"k", "final", "until_ns", NULL};
    long long k;
    int final = 0;
    PyObject *until = Py_None;
    soak_engine *e = configured(self);
    if (e == NULL || !PyArg_ParseTupleAndKeywords(args, kwargs, "L|pO", keywords, &k, &final, &until))
        return NULL;
    int64_t until_ns = SOAK_NONE;
    if (until != Py_None) {
        until_ns = PyLong_AsLongLong(until);
        if (until_ns == -1 && PyErr_Occurred())
            return NULL;
    }
    soak_taken taken;
    int done;
    Py_BEGIN_ALLOW_THREADS
    done = soak_engine_take(e, k, final, until_ns, &taken);
    Py_END_ALLOW_THREADS
    if (done == -1)
        return PyErr_Format(PyExc_ValueError, "interval %lld is not the next one to take (%lld is)", k,
                            (long long)soak_engine_next_index(e));
    if (done < 0)
        return PyErr_NoMemory();
    PyObject *d = taken_dict(&taken);
    soak_taken_free(&taken);
    return d;
}

static PyObject *bench_dict(soak_bench *b)
{
    PyObject *d = PyDict_New(), *others = PyDict_New();
    if (d == NULL || others == NULL)
        goto error;
    for (uint32_t i = 0; i < b->nother; i++) {
        PyObject *key = PyLong_FromUnsignedLongLong(b->other_length[i]), *n = PyLong_FromUnsignedLongLong(b->other_count[i]);
        int failed = key == NULL || n == NULL || PyDict_SetItem(others, key, n) < 0;
        Py_XDECREF(key);
        Py_XDECREF(n);
        if (failed)
            goto error;
    }
    if (put(d, "waiting", histogram(&b->waiting)) || put(d, "total_reused", histogram(&b->total_reused)) ||
        put(d, "connect_new", histogram(&b->connect_new)) || put(d, "processing_new", histogram(&b->processing_new)) ||
        put(d, "total_new", histogram(&b->total_new)) ||
        put(d, "document_length", b->has_document ? PyLong_FromUnsignedLongLong(b->document_length) : Py_NewRef(Py_None)) ||
        put_u64(d, "length_mismatches", b->length_mismatches) || put_u64(d, "kept_alive", b->kept_alive) ||
        put_u64(d, "header_bytes", b->header_bytes) ||
        put(d, "server", b->has_server ? PyUnicode_DecodeLatin1(b->server, b->server_len, NULL) : Py_NewRef(Py_None)) ||
        put_i64(d, "last_end_ns", b->last_end_ns) || put_i64(d, "first_response_ns", b->first_response_ns) ||
        put_i64(d, "server_ns", b->server_ns) || PyDict_SetItemString(d, "other_lengths", others))
        goto error;
    Py_DECREF(others);
    return d;
error:
    Py_XDECREF(others);
    Py_XDECREF(d);
    return NULL;
}

/* {version: n} of the connections over TLS, the versions met only. */
static PyObject *tls_connections(const soak_figures *f)
{
    PyObject *d = PyDict_New();
    for (int i = 0; d != NULL && i < SOAK_TLS_VERSIONS; i++) {
        if (f->tls_connections[i] && put_u64(d, soak_tls_versions[i], f->tls_connections[i]) < 0)
            Py_CLEAR(d);
    }
    return d;
}

static PyObject *engine_figures(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    soak_figures f;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = soak_engine_figures(e, &f);
    Py_END_ALLOW_THREADS
    if (failed)
        return PyErr_NoMemory();
    PyObject *d = PyDict_New();
    if (d == NULL || put_u64(d, "sent", f.sent) ||
        put(d, "stopped_sending_ns", f.stopped_sending_ns == SOAK_NONE ? Py_NewRef(Py_None)
                                                                         : PyLong_FromLongLong(f.stopped_sending_ns)) ||
        put(d, "send_lag", kept_histogram(&f.send_lag)) || put(d, "lateness", kept_histogram(&f.lateness)) ||
        put(d, "uncorrected", kept_histogram(&f.uncorrected)) || put(d, "in_unit", kept_histogram(&f.in_unit)) ||
        put_u64(d, "connections", f.connections) || put(d, "tls_connections", tls_connections(&f)) ||
        put_u64(d, "opened", f.opened) || put_u64(d, "closed", f.closed) ||
        put(d, "finished", PyBool_FromLong(f.finished)) || put(d, "fatal", PyLong_FromLong(f.fatal)) ||
        put(d, "bench", f.has_bench ? bench_dict(&f.bench) : Py_NewRef(Py_None))) {
        Py_XDECREF(d);
        d = NULL;
    }
    soak_figures_free(&f);
    return d;
}

/* A list of `n` counters read with relaxed atomic loads. */
static PyObject *counters(const uint64_t *values, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(SOAK_LOAD(values[i]));
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

/* Per slot, a list of `width` counters each. */
static PyObject *per_slot(const uint64_t *values, uint32_t slots, size_t width)
{
    PyObject *list = PyList_New(slots);
    if (list == NULL)
        return NULL;
    for (uint32_t s = 0; s < slots; s++) {
        PyObject *row = counters(values + s * width, width);
        if (row == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, s, row);
    }
    return list;
}

static PyObject *engine_metrics(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    const soak_metrics *m = soak_engine_metrics(e);
    if (!m->slots)
        Py_RETURN_NONE;
    PyObject *failures = PyDict_New();
    if (failures == NULL)
        return NULL;
    for (uint32_t s = 0; s < m->slots; s++) {
        for (int kind = 0; kind < SOAK_KINDS; kind++) {
            uint64_t n = SOAK_LOAD(m->failures[s * SOAK_KINDS + (uint32_t)kind]);
            if (!n)
                continue;
            PyObject *key = Py_BuildValue("(Is)", (unsigned int)s, soak_kind_names[kind]);
            PyObject *value = PyLong_FromUnsignedLongLong(n);
            int failed = key == NULL || value == NULL || PyDict_SetItem(failures, key, value) < 0;
            Py_XDECREF(key);
            Py_XDECREF(value);
            if (failed) {
                Py_DECREF(failures);
                return NULL;
            }
        }
    }
    PyObject *d = PyDict_New();
    if (d == NULL || put_u64(d, "skipped", SOAK_LOAD(m->skipped)) || put_u64(d, "late", SOAK_LOAD(m->late)) ||
        put_u64(d, "opened", SOAK_LOAD(m->opened)) || put_u64(d, "closed", SOAK_LOAD(m->closed)) ||
        put(d, "statuses", per_slot(m->statuses, m->slots, SOAK_STATUSES)) || put(d, "failures", Py_NewRef(failures)) ||
        put(d, "good", per_slot(m->good, m->slots, m->places)) || put(d, "bad", per_slot(m->bad, m->slots, m->places)) ||
        put(d, "good_ns", counters(m->good_ns, m->slots)) || put(d, "bad_ns", counters(m->bad_ns, m->slots))) {
        Py_XDECREF(d);
        d = NULL;
    }
    Py_DECREF(failures);
    return d;
}

static PyObject *engine_join(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    soak_engine_join(e);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *engine_sent(EngineObject *self, void *closure)
{
    (void)closure;
    soak_engine *e = configured(self);
    return e == NULL ? NULL : PyLong_FromUnsignedLongLong(soak_engine_sent(e));
}

static PyObject *engine_done(EngineObject *self, void *closure)
{
    (void)closure;
    soak_engine *e = configured(self);
    return e == NULL ? NULL : PyLong_FromUnsignedLongLong(soak_engine_done(e));
}

static PyObject *engine_next_index(EngineObject *self, void *closure)
{
    (void)closure;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    int64_t next;
    Py_BEGIN_ALLOW_THREADS
    next = soak_engine_next_index(e);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(next);
}

static PyMethodDef ENGINE_METHODS[] = {
    {"start", (PyCFunction)engine_start, METH_NOARGS, "Start the engine's thread."},
    {"fileno", (PyCFunction)engine_fileno, METH_NOARGS, "An eventfd, readable once the thread has ended."},
    {"stop", (PyCFunction)engine_stop, METH_O, "stop(at_ns): send nothing more; the first stop's time counts."},
    {"cancel", (PyCFunction)engine_cancel, METH_NOARGS, "Abandon every request in flight (each `cancelled`)."},
    {"drain_from", (PyCFunction)engine_drain_from, METH_O, "drain_from(t_ns): results ending later are the drain."},
    {"set_addresses", (PyCFunction)engine_set_addresses, METH_VARARGS,
     "set_addresses(origin, [(family, sockaddr, text), ...], failure=''): where the origin's new connections go "
     "from now on; with no address, the text of the dns failure each then ends as."},
    {"take", (PyCFunction)(void (*)(void))engine_take, METH_VARARGS | METH_KEYWORDS,
     "take(k, final=False, until_ns=None) -> dict: interval k's aggregates (k: the next untaken one)."},
    {"figures", (PyCFunction)engine_figures, METH_NOARGS, "figures() -> dict: the run-wide figures, copied."},
    {"metrics", (PyCFunction)engine_metrics, METH_NOARGS, "metrics() -> dict | None: MetricsTally's counts now."},
    {"join", (PyCFunction)engine_join, METH_NOARGS, "Wait for the engine's thread to end."},
    {NULL, NULL, 0, NULL},
};

static PyObject *engine_stopped_sending(EngineObject *self, void *closure)
{
    (void)closure;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    int64_t stopped;
    Py_BEGIN_ALLOW_THREADS
    stopped = soak_engine_stopped_sending(e);
    Py_END_ALLOW_THREADS
    if (stopped == SOAK_NONE)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(stopped);
}

static PyGetSetDef ENGINE_GETSET[] = {
    {"sent", (getter)engine_sent, NULL, "Requests sent so far.", NULL},
    {"done", (getter)engine_done, NULL, "Requests ended so far, each counted (a response or a failure).", NULL},
    {"next_index", (getter)engine_next_index, NULL, "The next interval to take.", NULL},
    {"stopped_sending_ns", (getter)engine_stopped_sending, NULL,
     "When sending stopped early (Engine.stopped_sending_ns), or None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runner.load.native._engine.Engine",
    .tp_basicsize = sizeof(EngineObject),
    .tp_dealloc = (destructor)engine_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Engine(config): one process's clients for HTTP/1.1, in a thread of their own.",
    .tp_methods = ENGINE_METHODS,
    .tp_getset = ENGINE_GETSET,
    .tp_init = (initproc)engine_init,
    .tp_new = PyType_GenericNew,
};

/* --- the module ----------------------------------------------------------------------- */

static PyObject *module_counts_len(PyObject *module, PyObject *arg)
{
    (void)module;
    long long highest = PyLong_AsLongLong(arg);
    if (highest == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromUnsignedLong(soak_counts_len(highest));
}

/* schedule.h's answers for one schedule, client and moment, for tests to hold to schedule.py's. */
static PyObject *module_schedule(PyObject *module, PyObject *args)
{
    (void)module;
    soak_schedule s;
    PyObject *end;
    long long client, k, free_ns, now_ns;
    if (!PyArg_ParseTuple(args, "LdLOLLLLLL", &s.start_ns, &s.qps, &s.clients, &end, &s.stride, &s.offset, &client,
                          &k, &free_ns, &now_ns))
        return NULL;
    s.end_ns = end == Py_None ? SOAK_NO_END : PyLong_AsLongLong(end);
    if (s.end_ns == -1 && PyErr_Occurred())
        return NULL;
    if (!(s.qps > 0) || s.clients < 1 || s.stride < 1 || client < 0 || client >= s.clients || k < 0) {
        PyErr_SetString(PyExc_ValueError, "a schedule needs qps > 0, clients and stride >= 1, 0 <= client < clients");
        return NULL;
    }
    int64_t end_k = soak_end_k(&s, client), skipped;
    int64_t next = soak_catch_up(&s, client, end_k, k, free_ns, now_ns, &skipped);
    int64_t n = soak_send_number(&s, client, k);
    return Py_BuildValue("{sLsLsLsLsLsisisLsL}", "send_number", (long long)n, "due_ns", (long long)soak_due(&s, n),
                         "last_due_by", (long long)soak_last_due_by(&s, client, now_ns), "last_send_by",
                         (long long)soak_last_send_by(&s, now_ns), "last_in_run",
                         (long long)soak_last_in_run(&s, client, end_k, k, now_ns), "in_run", soak_in_run(&s, n),
                         "before_end", soak_before_end(&s, now_ns), "catch_up_k", (long long)next, "catch_up_skipped",
                         (long long)skipped);
}

/* soak_keep_stall over `stalls` [(due, ran)], as loop_tick meets them in one interval: (the
 * stalls kept, in order; the latenesses that went to the loop-lag histogram instead). For tests. */
static PyObject *module_stalls(PyObject *module, PyObject *arg)
{
    (void)module;
    PyObject *seq = PySequence_Fast(arg, "stalls() takes a sequence of (due_ns, ran_ns)");
    if (seq == NULL)
        return NULL;
    soak_stall kept[SOAK_STALLS];
    uint32_t n = 0;
    PyObject *instead = PyList_New(0);
    for (Py_ssize_t i = 0; instead != NULL && i < PySequence_Fast_GET_SIZE(seq); i++) {
        long long due, ran;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "LL", &due, &ran)) {
            Py_CLEAR(instead);
            break;
        }
        int64_t lag = soak_keep_stall(kept, &n, (soak_stall){due, ran});
        if (lag < 0)
            continue;
        PyObject *value = PyLong_FromLongLong(lag);
        if (value == NULL || PyList_Append(instead, value) < 0)
            Py_CLEAR(instead);
        Py_XDECREF(value);
    }
    Py_DECREF(seq);
    if (instead == NULL)
        return NULL;
    return Py_BuildValue("(NN)", stalls_list(kept, n), instead);
}

static PyMethodDef MODULE_METHODS[] = {
    {"counts_len", module_counts_len, METH_O, "counts_len(highest): hdrh's counts_len for 1 .. highest, 3 digits."},
    {"schedule", module_schedule, METH_VARARGS,
     "schedule(start_ns, qps, clients, end_ns, stride, offset, client, k, free_ns, now_ns) -> dict: schedule.h's "
     "answers (send k of the client, and the searches at now_ns), for tests."},
    {"stalls", module_stalls, METH_O,
     "stalls([(due_ns, ran_ns), ...]) -> (kept, to_loop_lag): one interval's stalls as the engine keeps them, for "
     "tests."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "_engine", "The native engine: HTTP/1.1 load (TLS where TLS is 1) in a thread of its own.", -1,
    MODULE_METHODS, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__engine(void)
{
    if (PyType_Ready(&CountsType) < 0 || PyType_Ready(&EngineType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL)
        return NULL;
    PyObject *kinds = PyTuple_New(SOAK_KINDS);
    for (int i = 0; kinds != NULL && i < SOAK_KINDS; i++)
        PyTuple_SET_ITEM(kinds, i, PyUnicode_FromString(soak_kind_names[i]));
    if (kinds == NULL || PyModule_AddObject(m, "KINDS", kinds) < 0 ||
        PyModule_AddObject(m, "Engine", Py_NewRef((PyObject *)&EngineType)) < 0 ||
        PyModule_AddObject(m, "Counts", Py_NewRef((PyObject *)&CountsType)) < 0 ||
        PyModule_AddIntConstant(m, "TLS", SOAK_TLS_BUILT) < 0) {
        Py_XDECREF(kinds);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
