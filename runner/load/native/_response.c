/*
 * runner.load.native._response: the response parser (response.c) seen from Python, for
 * its tests only. The native engine calls response.c itself, with the GIL released; this
 * module exists so that tests can feed the parser bytes in any chunking and check what it
 * made of them (tests/support/contract.py's table, tests/support/replay.py's readings).
 *
 *     parse(method, chunks, max_head, eof=False, backend="") -> dict
 *
 * feeds each bytes-like object of `chunks` in turn (one soak_response_feed each, as the
 * engine will feed each read), then the close if `eof`, and returns what the parser says.
 * `backend`: a backendHeader name, whose value it keeps ("backend"; ValueError for a name the
 * parser refuses to keep, soak_response_want_backend).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "response.h"
#include "pyput.h"

static const char *const OUTCOMES[] = {"pending", "done", "failed"};
static const char *const KINDS[] = {"", "protocol", "closed"};

/* Where an event happened: (index of the chunk, offset in it), or None. */
static PyObject *position(Py_ssize_t chunk, size_t offset)
{
    if (chunk < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(nn)", chunk, (Py_ssize_t)offset);
}

struct events {
    Py_ssize_t head_chunk, end_chunk; /* -1: not seen */
    size_t head_at, end_at;
};

static PyObject *describe(const soak_response *r, const struct events *e, PyObject *consumed)
{
    char text[512];
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    soak_response_error(r, text, sizeof text);
    if (put(d, "outcome", PyUnicode_FromString(OUTCOMES[r->outcome])) ||
        put(d, "kind", PyUnicode_FromString(KINDS[r->kind])) ||
        put(d, "text", PyUnicode_FromString(text)) ||
        put(d, "status", PyLong_FromLong(r->status)) ||
        put(d, "header_bytes", PyLong_FromUnsignedLongLong(r->header_bytes)) ||
        put(d, "body_bytes", PyLong_FromUnsignedLongLong(r->body_bytes)) ||
        put(d, "wire_bytes", PyLong_FromUnsignedLongLong(r->wire_bytes)) ||
        put(d, "content_length", PyLong_FromUnsignedLongLong(r->content_length)) ||
        put(d, "keep_alive", PyBool_FromLong(r->keep_alive)) ||
        put(d, "head_done", PyBool_FromLong(r->head_done)) ||
        put(d, "gzip", PyBool_FromLong(r->gzip)) ||
        put(d, "server", PyUnicode_DecodeLatin1(r->server, r->server_len, NULL)) ||
        put(d, "server_cut", PyBool_FromLong(r->server_cut)) ||
        put(d, "backend", PyUnicode_DecodeLatin1(r->backend, r->backend_len, NULL)) ||
        put(d, "head_at", position(e->head_chunk, e->head_at)) ||
        put(d, "end_at", position(e->end_chunk, e->end_at)) ||
        PyDict_SetItemString(d, "consumed", consumed)) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *parse(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"method", "chunks", "max_head", "eof", "backend", NULL};
    const char *method, *backend = "";
    Py_ssize_t backend_len = 0;
    char name[SOAK_BACKEND_MAX];
    PyObject *chunks, *sequence, *consumed, *result;
    unsigned long max_head;
    int eof = 0;
    soak_response r;
    struct events e = {-1, -1, 0, 0};
    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sOk|ps#", keywords, &method, &chunks, &max_head, &eof, &backend,
                                     &backend_len))
        return NULL;
    r.backend_name = NULL;
    r.backend_name_len = 0;
    if (backend_len > 0) {
        for (Py_ssize_t i = 0; i < backend_len && i < SOAK_BACKEND_MAX; i++)
            name[i] = (char)(backend[i] >= 'A' && backend[i] <= 'Z' ? backend[i] | 0x20 : backend[i]);
        if (soak_response_want_backend(&r, name, (size_t)backend_len) < 0) {
            PyErr_Format(PyExc_ValueError, "the parser keeps no backend header named %s", backend);
            return NULL;
        }
    }
    if (max_head > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "max_head must fit in 32 bits");
        return NULL;
    }
    sequence = PySequence_Fast(chunks, "chunks must be a sequence of bytes-like objects");
    if (sequence == NULL)
        return NULL;
    consumed = PyList_New(0);
    if (consumed == NULL) {
        Py_DECREF(sequence);
        return NULL;
    }
    soak_response_init(&r, strcmp(method, "HEAD") == 0, (uint32_t)max_head);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sequence); i++) {
        Py_buffer view;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(sequence, i), &view, PyBUF_SIMPLE) < 0)
            goto error;
        size_t used = soak_response_feed(&r, view.buf, (size_t)view.len);
        PyBuffer_Release(&view);
        PyObject *n = PyLong_FromSize_t(used);
        if (n == NULL || PyList_Append(consumed, n) < 0) {
            Py_XDECREF(n);
            goto error;
        }
        Py_DECREF(n);
        if (r.events & SOAK_EVENT_HEAD)
            e.head_chunk = i, e.head_at = r.head_end;
        if (r.events & SOAK_EVENT_DONE)
            e.end_chunk = i, e.end_at = r.message_end;
    }
    if (eof) {
        soak_response_eof(&r);
        if (r.events & SOAK_EVENT_DONE)
            e.end_chunk = PySequence_Fast_GET_SIZE(sequence), e.end_at = 0;
    }
    result = describe(&r, &e, consumed);
    Py_DECREF(consumed);
    Py_DECREF(sequence);
    return result;
error:
    Py_DECREF(consumed);
    Py_DECREF(sequence);
    return NULL;
}

static PyMethodDef METHODS[] = {
    {"parse", (PyCFunction)(void (*)(void))parse, METH_VARARGS | METH_KEYWORDS,
     "parse(method, chunks, max_head, eof=False) -> dict: what the native parser makes of a response\n"
     "fed in `chunks` (then closed, if `eof`), for a request of `method`."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "_response", "The native response parser, for tests.", -1, METHODS,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__response(void)
{
    PyObject *m = PyModule_Create(&MODULE);
    if (m != NULL && PyModule_AddIntConstant(m, "SERVER_MAX", SOAK_SERVER_MAX) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
