/* The compiled core of the XSpace decoder (xlaprof.parse.xplane.wire and .frame).

   Functions, each the C form of a numpy or upb step (wire.py, frame.py) whose result it
   gives exactly, bit for bit (tests/parse/xplane/test_native.py holds them to it):

   - skeleton(raw): the capture without its events, for upb to parse (the planes' metadata:
     thousands of messages, where the events are millions), and where each event lies;

   - locate(raw): where every event of a capture lies in the file's bytes (the outer walk of
     wire._in_place), by walking XSpace.planes, XPlane.lines and XLine.events;
   - decode(data, starts, ends): every event's fields and stats (wire.decode_arrays): one pass
     over the events, no Python object per event;
   - firsts(stat_event, count, wide): each event's first row among its stats (wire.Events'
     first_stat), from the stats' event numbers;
   - times(offset_ps, duration_ps, bases, counts): frame.event_times' columns and row order, by
     merging the lines' runs (each line's events are mostly in time order already);
   - nest(starts, ends, order, own, parent): the stack walk of tables.intervals' nesting (self
     times and parents of one line's events), in place;
   - take(values, index, clip): numpy's values.take(index) (mode "clip" or "raise") for a
     signed integer index of any width, without the copy of the index as intp numpy makes.

   A file someone sends may be hostile: every read is bounded by the message it belongs to
   (never past the buffer), nothing is allocated from a length field (arrays grow with what
   was actually read: a stat takes at least two bytes of input), and what these functions do
   not decode themselves they leave to the numpy path or to upb, as the numpy path does:
   locate returns None, decode marks the event, times returns None.

   Protobuf wire format: a field is a tag varint (field number << 3 | wire type) then a varint
   (wire type 0), 8 bytes (1), a length varint and that many bytes (2) or 4 bytes (5).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

/* A growable array of fixed-size items, freed by the caller (or handed to numpy). */
typedef struct {
    char *items;
    Py_ssize_t count, room, size;
} Grow;

/* Where the kernel can (Linux 5.14 on), the pages of a large new block mapped in one call
   rather than one fault each as the decoder first writes them: the faults were a third of a
   warm decode's CPU time on an 80 MB capture. Nothing changes where it cannot. */
static void prefault(void *items, size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    if (bytes < ((size_t)1 << 20)) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = ((uintptr_t)items + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)items + bytes) & ~(page - 1);
    if (end > start) (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
#else
    (void)items;
    (void)bytes;
#endif
}

static int grow_init(Grow *g, Py_ssize_t size, Py_ssize_t room) {
    g->size = size;
    g->count = 0;
    g->room = room < 16 ? 16 : room;
    g->items = PyMem_RawMalloc((size_t)(g->room * size));
    if (!g->items) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* A full array grown by half, and its next item's place; NULL on failure. */
static void *grow_more(Grow *g) {
    Py_ssize_t room = g->room + g->room / 2 + 16;
    char *items = PyMem_RawRealloc(g->items, (size_t)(room * g->size));
    if (!items) {
        PyErr_NoMemory();
        return NULL;
    }
    g->items = items;
    g->room = room;
    return g->items + (g->count++) * g->size;
}

/* The next item's place (inline: decode adds four a stat, millions of them). */
static inline void *grow_add(Grow *g) {
    if (__builtin_expect(g->count == g->room, 0)) return grow_more(g);
    return g->items + (g->count++) * g->size;
}

static void grow_free(Grow *g) {
    PyMem_RawFree(g->items);
    g->items = NULL;
}

static void free_capsule(PyObject *capsule) {
    PyMem_RawFree(PyCapsule_GetPointer(capsule, "xlaprof.native"));
}

/* A 1-d numpy array over a Grow's items (which it then owns; trimmed to its length). */
static PyObject *grow_array(Grow *g, int typenum) {
    npy_intp length = g->count;
    char *items = g->items;
    if (g->count < g->room) {
        char *trimmed = PyMem_RawRealloc(items, (size_t)((g->count ? g->count : 1) * g->size));
        if (trimmed) items = trimmed;
    }
    g->items = NULL;
    PyObject *array = PyArray_SimpleNewFromData(1, &length, typenum, items);
    if (!array) {
        PyMem_RawFree(items);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(items, "xlaprof.native", free_capsule);
    if (!capsule) {
        Py_DECREF(array);
        PyMem_RawFree(items);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)array, capsule) < 0) {
        Py_DECREF(array);
        return NULL;
    }
    return array;
}

/* Where events lie, as locate and skeleton give them: int32 where every position fits (a file
   short of 2**31 - 64 bytes, as split_space's index), else int64; half the memory of a 1 GB
   host's two arrays (735 MB as int64, there at its decode's peak). */
static Py_ssize_t position_size(Py_ssize_t length) {
    return length < ((Py_ssize_t)1 << 31) - 64 ? 4 : 8;
}

/* The next item of a Grow of 4- or 8-byte indexes set to ``position`` (positions:
   position_size bytes an item; decode's stat event numbers too); -1 on failure. */
static inline int position_add(Grow *g, int64_t position) {
    void *slot = grow_add(g);
    if (!slot) return -1;
    if (g->size == 4)
        *(int32_t *)slot = (int32_t)position;
    else
        *(int64_t *)slot = position;
    return 0;
}

static PyObject *position_array(Grow *g) {
    return grow_array(g, g->size == 4 ? NPY_INT32 : NPY_INT64);
}

/* The varint at p (not past end): its size in bytes, 0 where end comes first, 11 where no
   byte of the first 10 ends it. Bits past 64 are dropped, as upb drops them. */
static inline int varint(const uint8_t *p, const uint8_t *end, uint64_t *value) {
    uint64_t v = 0;
    /* the bytes there are to read, at most ten: one bound for the loop, none per byte */
    int n = end - p < 10 ? (int)(end - p) : 10;
    for (int i = 0; i < n; i++) {
        uint8_t byte = p[i];
        v |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            *value = v;
            return i + 1;
        }
    }
    return n == 10 ? 11 : 0;
}

/* One field of a message whose bytes run to end: its field number and wire type, the varint
   after the tag (a length for wire type 2), where its payload begins; returns where the field
   ends, or NULL for what the numpy rounds leave to upb (a tag over one byte, field number 0,
   a group or wire type 6 or 7, a varint over 10 bytes, a length over 5 bytes, a field running
   past the message's end). */
static inline const uint8_t *field(const uint8_t *p, const uint8_t *end, int *number, int *wire,
                                   uint64_t *value, const uint8_t **payload) {
    uint8_t tag = *p++;
    if (tag & 0x80) return NULL;
    *number = tag >> 3;
    *wire = tag & 7;
    if (!*number) return NULL;
    int size;
    switch (*wire) {
    case 0:
        size = varint(p, end, value);
        if (size == 0 || size > 10) return NULL;
        *payload = p;
        return p + size;
    case 1:
        if (end - p < 8) return NULL;
        *payload = p;
        return p + 8;
    case 5:
        if (end - p < 4) return NULL;
        *payload = p;
        return p + 4;
    case 2:
        size = varint(p, end, value);
        if (size == 0 || size > 5) return NULL;
        p += size;
        if (*value > (uint64_t)(end - p)) return NULL;
        *payload = p;
        return p + *value;
    default:
        return NULL;
    }
}

static int put(Grow *g, const void *bytes, Py_ssize_t n);

/* Distinct byte strings (text or bytes values), each with its index in a Python list of the
   values made from them: an open-addressing table of (offset, length, index) into ``bytes``,
   a copy of each distinct value's bytes (so that what was read may be given back: decode's
   ``release``). */
typedef struct {
    Py_ssize_t *slots; /* 3 per slot: offset, length, index + 1 (0: empty) */
    Py_ssize_t mask, used;
    Grow bytes;
    PyObject *list;
    int hex;
} Distinct;

static int distinct_init(Distinct *d, int hex) {
    d->mask = 1023;
    d->used = 0;
    d->hex = hex;
    d->slots = PyMem_RawCalloc((size_t)(d->mask + 1) * 3, sizeof(Py_ssize_t));
    d->list = PyList_New(0);
    if (!d->slots || !d->list || grow_init(&d->bytes, 1, 4096) < 0) {
        PyMem_RawFree(d->slots);
        Py_XDECREF(d->list);
        d->slots = NULL;
        d->list = NULL;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void distinct_free(Distinct *d) {
    PyMem_RawFree(d->slots);
    grow_free(&d->bytes);
    Py_XDECREF(d->list);
}

static inline uint64_t hash_bytes(const uint8_t *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)n; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static int distinct_grow(Distinct *d) {
    const uint8_t *data = (const uint8_t *)d->bytes.items;
    Py_ssize_t mask = d->mask * 2 + 1;
    Py_ssize_t *slots = PyMem_RawCalloc((size_t)(mask + 1) * 3, sizeof(Py_ssize_t));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t s = 0; s <= d->mask; s++) {
        Py_ssize_t *old = d->slots + 3 * s;
        if (!old[2]) continue;
        Py_ssize_t at = (Py_ssize_t)(hash_bytes(data + old[0], old[1]) & (uint64_t)mask);
        while (slots[3 * at + 2]) at = (at + 1) & mask;
        memcpy(slots + 3 * at, old, 3 * sizeof(Py_ssize_t));
    }
    PyMem_RawFree(d->slots);
    d->slots = slots;
    d->mask = mask;
    return 0;
}

/* The index of p[0:n] among the distinct values (added if new); -1 with no exception set
   where it is text that is not UTF-8 (as bytes.decode() refuses it), -2 with an exception on
   failure. */
static Py_ssize_t distinct_index(Distinct *d, const uint8_t *p, Py_ssize_t n) {
    Py_ssize_t at = (Py_ssize_t)(hash_bytes(p, n) & (uint64_t)d->mask);
    for (;;) {
        Py_ssize_t *slot = d->slots + 3 * at;
        if (!slot[2]) break;
        if (slot[1] == n && memcmp(d->bytes.items + slot[0], p, (size_t)n) == 0)
            return slot[2] - 1;
        at = (at + 1) & d->mask;
    }
    PyObject *value;
    if (d->hex) {
        value = PyUnicode_New(2 * n, 127);
        if (!value) return -2;
        Py_UCS1 *out = PyUnicode_1BYTE_DATA(value);
        static const char digits[] = "0123456789abcdef";
        for (Py_ssize_t i = 0; i < n; i++) {
            out[2 * i] = (Py_UCS1)digits[p[i] >> 4];
            out[2 * i + 1] = (Py_UCS1)digits[p[i] & 15];
        }
    } else {
        value = PyUnicode_DecodeUTF8((const char *)p, n, NULL);
        if (!value) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                return -1;
            }
            return -2;
        }
    }
    Py_ssize_t index = PyList_GET_SIZE(d->list);
    int failed = PyList_Append(d->list, value);
    Py_DECREF(value);
    if (failed) return -2;
    Py_ssize_t offset = d->bytes.count;
    if (put(&d->bytes, p, n) < 0) return -2;
    Py_ssize_t *slot = d->slots + 3 * at;
    slot[0] = offset;
    slot[1] = n;
    slot[2] = index + 1;
    if (++d->used * 2 > d->mask && distinct_grow(d) < 0) return -2;
    return index;
}

/* XStat value kinds, as wire.py numbers them: the oneof member's field number. */
enum { DOUBLE = 2, UINT64 = 3, INT64 = 4, STR = 5, BYTES = 6, REF = 7 };

typedef struct {
    Grow event, ids, raws, kind; /* one array per column: they become the numpy arrays */
    Distinct texts, hexes;
} StatTable;

/* Nonzero where the int64 a varint gives (two's complement) does not fit int32. */
static inline uint64_t past_int32(uint64_t value) {
    return (value + 0x80000000u) >> 32;
}

/* An int32 Grow's items as int64, in place, its block grown to hold them (once an item does
   not fit int32). Item i moves from bytes [4i, 4i + 4) to [8i, 8i + 8): from the last item
   down, no item is overwritten before it is read. -1 on failure. */
static int widen(Grow *g) {
    char *items = PyMem_RawRealloc(g->items, (size_t)(g->room * 8));
    if (!items) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = g->count - 1; i >= 0; i--) {
        int32_t small;
        memcpy(&small, items + 4 * i, 4);
        int64_t wide = small;
        memcpy(items + 8 * i, &wide, 8);
    }
    g->items = items;
    g->size = 8;
    return 0;
}

/* The next item of a Grow of metadata ids, int32 until one does not fit (then int64 for all,
   ``widen``); -1 on failure. Written as int32 from the start rather than narrowed at the end:
   a 1 GB host's decode peaked holding 8 bytes an event and a stat for them. */
static inline int id_add(Grow *g, int64_t id) {
    if (g->size == 4 && past_int32((uint64_t)id) && widen(g) < 0) return -1;
    return position_add(g, id);
}

/* One XStat at data[p:end] added to the table; 1 where it marks its event, -1 on failure. */
static int decode_stat(StatTable *t, const uint8_t *p, const uint8_t *end, int64_t owner) {
    int64_t metadata_id = 0;
    uint64_t raw = 0;
    uint8_t kind = 0;
    while (p < end) {
        int number, wire;
        uint64_t value = 0;
        const uint8_t *payload;
        const uint8_t *next = field(p, end, &number, &wire, &value, &payload);
        if (!next) return 1;
        if (wire == 0) {
            if (number == 1) {
                metadata_id = (int64_t)value;
            } else if (number == UINT64 || number == INT64 || number == REF) {
                kind = (uint8_t)number;
                raw = value;
            }
        } else if (wire == 1 && number == DOUBLE) {
            kind = DOUBLE;
            memcpy(&raw, payload, 8); /* little-endian hosts only: see setup.py */
        } else if (wire == 2 && (number == STR || number == BYTES)) {
            Distinct *d = number == STR ? &t->texts : &t->hexes;
            Py_ssize_t index = distinct_index(d, payload, (Py_ssize_t)value);
            if (index == -2) return -1;
            if (index == -1) return 1;
            kind = (uint8_t)number;
            raw = (uint64_t)index;
        }
        p = next;
    }
    /* (the id kept: the last one read) */
    if (position_add(&t->event, owner) < 0 || id_add(&t->ids, metadata_id) < 0) return -1;
    uint64_t *value = grow_add(&t->raws);
    uint8_t *kinds = grow_add(&t->kind);
    if (!value || !kinds) return -1;
    *value = raw;
    *kinds = kind;
    return 0;
}

/* Positions given as a 1-d int32 or int64 array (split_space's index dtype). */
typedef struct {
    Py_buffer view;
    int wide;
} Positions;

static int positions(PyObject *object, Positions *out) {
    if (PyObject_GetBuffer(object, &out->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    Py_ssize_t size = out->view.itemsize;
    const char *format = out->view.format ? out->view.format : "B";
    char code = format[0] == '<' || format[0] == '=' || format[0] == '@' ? format[1] : format[0];
    int integer = strchr("ilqn", code) != NULL;
    if (out->view.ndim != 1 || !integer || (size != 4 && size != 8)) {
        PyBuffer_Release(&out->view);
        PyErr_SetString(PyExc_TypeError, "positions must be a 1-d int32 or int64 array");
        return -1;
    }
    out->wide = size == 8;
    return 0;
}

static inline int64_t position_at(const Positions *p, Py_ssize_t i) {
    return p->wide ? ((const int64_t *)p->view.buf)[i] : ((const int32_t *)p->view.buf)[i];
}

/* Whether every event ends where or before the next begins (the events in the data's order). */
static int in_order(const Positions *starts, const Positions *ends, Py_ssize_t count) {
    for (Py_ssize_t i = 1; i < count; i++)
        if (position_at(starts, i) < position_at(ends, i - 1)) return 0;
    return 1;
}

/* The pages of a buffer below a point given back to the kernel as decode passes them, a
   chunk of at least ``chunk`` bytes at a time (one call a chunk, not one an event; anonymous
   memory given back reads as zeros after). */
typedef struct {
    uintptr_t done, page, chunk; /* the first page not given back; the page size; the chunk */
    int on;
} Giveback;

static void giveback_init(Giveback *g, const uint8_t *base, Py_ssize_t chunk) {
#ifdef __linux__
    g->page = (uintptr_t)sysconf(_SC_PAGESIZE);
    g->on = chunk > 0 && g->page > 0;
#else
    g->page = 1;
    g->on = 0;
#endif
    g->chunk = chunk > 0 ? (uintptr_t)chunk : 0;
    g->done = g->on ? ((uintptr_t)base + g->page - 1) & ~(g->page - 1) : 0;
}

/* Every whole page below ``upto`` given back, once a chunk of them is there. */
static inline void giveback(Giveback *g, const uint8_t *upto) {
#ifdef __linux__
    uintptr_t end = (uintptr_t)upto & ~(g->page - 1);
    if (end > g->done && end - g->done >= g->chunk) {
        if (madvise((void *)g->done, end - g->done, MADV_DONTNEED) == 0)
            g->done = end;
        else
            g->on = 0; /* (the kernel refused: nothing more is given back) */
    }
#else
    (void)g;
    (void)upto;
#endif
}

/* A new 1-d array of ``length`` items, its memory from malloc rather than numpy's allocator:
   numpy asks for huge pages on arrays of 4 MB or more (madvise), and where the kernel then
   compacts memory to find them (transparent_hugepage/defrag = madvise, the default on many
   distributions) the first touch of each costs more than the decoding itself (measured: most
   of the system time of an 80 MB capture's analysis on a busy 2-core VM). */
static PyObject *new_array(npy_intp length, int typenum) {
    Grow g; /* the types used here: one byte (bool, uint8), four (int32) or eight */
    Py_ssize_t size = typenum == NPY_BOOL || typenum == NPY_UINT8 ? 1
                      : typenum == NPY_INT32                       ? 4
                                                                   : 8;
    if (grow_init(&g, size, length) < 0) return NULL;
    g.count = length;
    prefault(g.items, (size_t)(g.room * g.size)); /* every item is written */
    return grow_array(&g, typenum);
}

/* decode(data, starts, ends, release=0) -> (metadata_id, offset_ps, duration_ps, None,
   stat_event, stat_metadata_id, stat_kind, stat_raw, texts, hexes, marked)

   ``release`` > 0: data (a writable buffer of the caller's: an anonymous map) is given back to
   the kernel as the decode passes it, at least ``release`` bytes at a time, where the events
   lie in order (each ending where or before the next begins): what lies below an event's
   start is read no more (the distinct values are copies), and a 1 GB host's decode peaked
   holding the whole file beside the arrays. Its pages then read as zeros: a caller that needs
   the bytes again (a marked event's) reads them anew.

   The indexes are int32 where they must fit (as wire._decode_numpy makes them): stat_event
   where there are fewer than 2**31 events; the metadata ids (event's and stat's) where every
   one fits (``id_add``). A 1 GB host's four were 1.3 GB as int64. ``marked``: the numbers of
   the marked events (int64, in order; mostly none). Each event's first stat (numpy's
   first_stat) is left to ``firsts``, called once the caller has let go of data and the
   positions: a 1 GB host's decode peaked with it beside them (4 bytes an event). */
static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *data_object, *starts_object, *ends_object;
    Py_ssize_t release = 0;
    if (!PyArg_ParseTuple(args, "OOO|n", &data_object, &starts_object, &ends_object, &release))
        return NULL;
    Py_buffer data;
    Positions starts, ends;
    /* (a buffer given back reads as zeros after: as if written, so it must be writable) */
    if (PyObject_GetBuffer(data_object, &data, release > 0 ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return NULL;
    if (positions(starts_object, &starts) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (positions(ends_object, &ends) < 0) {
        PyBuffer_Release(&starts.view);
        PyBuffer_Release(&data);
        return NULL;
    }
    PyObject *result = NULL;
    PyObject *ids = NULL, *offsets = NULL, *durations = NULL, *marked = NULL;
    PyObject *event = NULL, *stat_ids = NULL, *kinds = NULL, *raws = NULL;
    StatTable t;
    memset(&t, 0, sizeof t);
    Grow event_ids, marks;
    memset(&event_ids, 0, sizeof event_ids);
    memset(&marks, 0, sizeof marks);
    Py_ssize_t count = starts.view.len / starts.view.itemsize;
    if (ends.view.len / ends.view.itemsize != count) {
        PyErr_SetString(PyExc_ValueError, "starts and ends differ in length");
        goto done;
    }
    const uint8_t *base = data.buf;
    const Py_ssize_t size = data.len;
    if (grow_init(&t.event, count <= INT32_MAX ? 4 : 8, count) < 0 ||
        grow_init(&t.ids, 4, count) < 0 || grow_init(&t.raws, 8, count) < 0 ||
        grow_init(&t.kind, 1, count) < 0 || distinct_init(&t.texts, 0) < 0 ||
        distinct_init(&t.hexes, 1) < 0 || grow_init(&event_ids, 4, count) < 0 ||
        grow_init(&marks, 8, 16) < 0)
        goto done;
    prefault(event_ids.items, (size_t)(event_ids.room * 4)); /* every item is written */
    offsets = new_array(count, NPY_INT64);
    durations = new_array(count, NPY_INT64);
    if (!offsets || !durations) goto done;
    int64_t *offset = PyArray_DATA((PyArrayObject *)offsets);
    int64_t *duration = PyArray_DATA((PyArrayObject *)durations);
    Giveback back;
    giveback_init(&back, base, release > 0 && in_order(&starts, &ends, count) ? release : 0);
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t a = position_at(&starts, i), b = position_at(&ends, i);
        if (back.on && a >= 0 && a <= size) giveback(&back, base + a);
        int64_t id = offset[i] = duration[i] = 0;
        int mark = 0;
        if (a < 0 || b > size || a > b) {
            PyErr_SetString(PyExc_ValueError, "an event outside the data");
            goto done;
        }
        const uint8_t *p = base + a, *end = base + b;
        while (p < end) {
            int number, wire;
            uint64_t value = 0;
            const uint8_t *payload;
            const uint8_t *next = field(p, end, &number, &wire, &value, &payload);
            if (!next) {
                mark = 1;
                break;
            }
            if (wire == 0) {
                if (number == 1)
                    id = (int64_t)value;
                else if (number == 2)
                    offset[i] = (int64_t)value;
                else if (number == 3)
                    duration[i] = (int64_t)value;
                else if (number == 5)
                    offset[i] = 0; /* num_occurrences took the oneof */
            } else if (wire == 2 && number == 4) {
                int found = decode_stat(&t, payload, next, (int64_t)i);
                if (found < 0) goto done;
                if (found) {
                    mark = 1;
                    break;
                }
            }
            p = next;
        }
        /* the id kept: the last one read (a marked event's, read before what marks it, too) */
        if (id_add(&event_ids, id) < 0 || (mark && position_add(&marks, i) < 0)) goto done;
    }
    ids = position_array(&event_ids);
    if (!ids) goto done;
    stat_ids = position_array(&t.ids);
    if (!stat_ids) goto done;
    raws = grow_array(&t.raws, NPY_UINT64);
    if (!raws) goto done;
    event = grow_array(&t.event, t.event.size == 4 ? NPY_INT32 : NPY_INT64);
    if (!event) goto done;
    kinds = grow_array(&t.kind, NPY_UINT8);
    if (!kinds) goto done;
    marked = position_array(&marks);
    if (!marked) goto done;
    result = Py_BuildValue("(NNNONNNNOON)", ids, offsets, durations, Py_None, event, stat_ids,
                           kinds, raws, t.texts.list, t.hexes.list, marked);
    if (result) ids = offsets = durations = event = stat_ids = kinds = raws = marked = NULL;
done:
    Py_XDECREF(ids);
    Py_XDECREF(offsets);
    Py_XDECREF(durations);
    Py_XDECREF(event);
    Py_XDECREF(stat_ids);
    Py_XDECREF(kinds);
    Py_XDECREF(raws);
    Py_XDECREF(marked);
    grow_free(&event_ids);
    grow_free(&marks);
    grow_free(&t.event);
    grow_free(&t.ids);
    grow_free(&t.raws);
    grow_free(&t.kind);
    distinct_free(&t.texts);
    distinct_free(&t.hexes);
    PyBuffer_Release(&ends.view);
    PyBuffer_Release(&starts.view);
    PyBuffer_Release(&data);
    return result;
}

/* One field of an outer message (XSpace, XPlane, XLine), read as upb reads any field: a tag
   varint of up to 5 bytes, then its payload by wire type. Returns where it ends, NULL where
   this walk does not follow it (a group, wire type 6 or 7, field number 0, a field past the
   message's end): locate then returns None. */
static const uint8_t *outer_field(const uint8_t *p, const uint8_t *end, uint64_t *number,
                                  int *wire, const uint8_t **payload) {
    uint64_t tag, value;
    int size = varint(p, end, &tag);
    if (size == 0 || size > 5) return NULL;
    p += size;
    *number = tag >> 3;
    *wire = (int)(tag & 7);
    if (!*number || *number > 0x1FFFFFFF) return NULL;
    *payload = p;
    switch (*wire) {
    case 0:
        size = varint(p, end, &value);
        return size == 0 || size > 10 ? NULL : p + size;
    case 1:
        return end - p < 8 ? NULL : p + 8;
    case 5:
        return end - p < 4 ? NULL : p + 4;
    case 2:
        size = varint(p, end, &value);
        if (size == 0 || size > 10) return NULL;
        p += size;
        if (value > (uint64_t)(end - p)) return NULL;
        *payload = p;
        return p + value;
    default:
        return NULL;
    }
}

/* locate(raw) -> (starts, ends, lines_per_plane, events_per_line) or None: every event of
   every line of every plane, in file order (XSpace.planes = 1, XPlane.lines = 3,
   XLine.events = 4, each a length-delimited field), the events' positions (position_size).
   The caller checks the counts against upb's (which parsed the same bytes) before using them. */
static PyObject *locate(PyObject *self, PyObject *args) {
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    const uint8_t *base = data.buf, *end = base + data.len;
    PyObject *result = NULL, *plane_lines = NULL, *line_events = NULL;
    Grow starts, ends;
    memset(&starts, 0, sizeof starts);
    memset(&ends, 0, sizeof ends);
    const Py_ssize_t wide = position_size(data.len);
    if (grow_init(&starts, wide, data.len / 64) < 0 || grow_init(&ends, wide, data.len / 64) < 0)
        goto done;
    plane_lines = PyList_New(0);
    line_events = PyList_New(0);
    if (!plane_lines || !line_events) goto done;
    const uint8_t *p = base;
    while (p < end) {
        uint64_t number;
        int wire;
        const uint8_t *payload;
        const uint8_t *next = outer_field(p, end, &number, &wire, &payload);
        if (!next) goto none;
        if (number == 1 && wire == 2) { /* a plane */
            long lines = 0;
            const uint8_t *q = payload;
            while (q < next) {
                const uint8_t *line_payload;
                const uint8_t *line_next = outer_field(q, next, &number, &wire, &line_payload);
                if (!line_next) goto none;
                if (number == 3 && wire == 2) { /* a line */
                    long events = 0;
                    const uint8_t *r = line_payload;
                    while (r < line_next) {
                        const uint8_t *event;
                        const uint8_t *event_next =
                            outer_field(r, line_next, &number, &wire, &event);
                        if (!event_next) goto none;
                        if (number == 4 && wire == 2) {
                            if (position_add(&starts, event - base) < 0 ||
                                position_add(&ends, event_next - base) < 0)
                                goto done;
                            events++;
                        }
                        r = event_next;
                    }
                    PyObject *n = PyLong_FromLong(events);
                    if (!n || PyList_Append(line_events, n) < 0) {
                        Py_XDECREF(n);
                        goto done;
                    }
                    Py_DECREF(n);
                    lines++;
                }
                q = line_next;
            }
            PyObject *n = PyLong_FromLong(lines);
            if (!n || PyList_Append(plane_lines, n) < 0) {
                Py_XDECREF(n);
                goto done;
            }
            Py_DECREF(n);
        }
        p = next;
    }
    PyObject *a = position_array(&starts);
    if (!a) goto done;
    PyObject *b = position_array(&ends);
    if (!b) {
        Py_DECREF(a);
        goto done;
    }
    result = Py_BuildValue("(NNOO)", a, b, plane_lines, line_events);
    goto done;
none:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(plane_lines);
    Py_XDECREF(line_events);
    grow_free(&starts);
    grow_free(&ends);
    PyBuffer_Release(&data);
    return result;
}

/* Bytes appended to a Grow of one-byte items. */
static int put(Grow *g, const void *bytes, Py_ssize_t n) {
    if (g->count + n > g->room) {
        Py_ssize_t room = g->room;
        while (room < g->count + n) room = room + room / 2 + 4096;
        char *items = PyMem_RawRealloc(g->items, (size_t)room);
        if (!items) {
            PyErr_NoMemory();
            return -1;
        }
        g->items = items;
        g->room = room;
    }
    memcpy(g->items + g->count, bytes, (size_t)n);
    g->count += n;
    return 0;
}

static int put_varint(Grow *g, uint64_t value) {
    uint8_t bytes[10];
    int n = 0;
    do {
        bytes[n] = (uint8_t)(value & 0x7F);
        value >>= 7;
        if (value) bytes[n] |= 0x80;
        n++;
    } while (value);
    return put(g, bytes, n);
}

static int varint_size(uint64_t value) {
    int n = 1;
    while (value >= 0x80) {
        value >>= 7;
        n++;
    }
    return n;
}

/* A field of a plane as the skeleton writes it: verbatim (line < 0), or a line: its tag's
   bytes, its length without its events, and its other fields (segments[first:first+count]). */
typedef struct {
    int64_t at, size, line_size, first, count, line;
} Item;

typedef struct {
    int64_t at, size;
} Segment;

/* skeleton(raw) -> (skeleton, starts, ends, events_per_line) or None: the file with every
   XLine.events field taken out (lengths of the lines and planes that held them written
   again), so that upb parses only what is not an event (a few thousand messages, where the
   events are millions), and where each event lies in raw. Fields are walked as locate walks
   them (every field of XSpace, XPlane and XLine, any tag encoding, unknown fields kept in
   place); None where that walk does not hold (the caller lets upb parse the whole file). */
static PyObject *skeleton(PyObject *self, PyObject *args) {
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    const uint8_t *base = data.buf, *end = base + data.len;
    PyObject *result = NULL, *line_events = NULL;
    Grow starts, ends, out, items, segments;
    memset(&starts, 0, sizeof starts);
    memset(&ends, 0, sizeof ends);
    memset(&out, 0, sizeof out);
    memset(&items, 0, sizeof items);
    memset(&segments, 0, sizeof segments);
    const Py_ssize_t wide = position_size(data.len);
    if (grow_init(&starts, wide, data.len / 64) < 0 || grow_init(&ends, wide, data.len / 64) < 0 ||
        grow_init(&out, 1, 1 << 16) < 0 || grow_init(&items, sizeof(Item), 64) < 0 ||
        grow_init(&segments, sizeof(Segment), 64) < 0)
        goto done;
    line_events = PyList_New(0);
    if (!line_events) goto done;
    const uint8_t *p = base;
    while (p < end) {
        uint64_t number, tag;
        int wire;
        const uint8_t *payload;
        const uint8_t *next = outer_field(p, end, &number, &wire, &payload);
        if (!next) goto none;
        if (!(number == 1 && wire == 2)) { /* not a plane: as it is */
            if (put(&out, p, next - p) < 0) goto done;
            p = next;
            continue;
        }
        /* A plane: its fields, each line's without its events, and the plane's new size. */
        items.count = segments.count = 0;
        int64_t plane_size = 0;
        const uint8_t *q = payload;
        while (q < next) {
            const uint8_t *line;
            const uint8_t *q_next = outer_field(q, next, &number, &wire, &line);
            if (!q_next) goto none;
            Item *item = grow_add(&items);
            if (!item) goto done;
            item->at = q - base;
            if (!(number == 3 && wire == 2)) {
                item->line = -1;
                item->size = q_next - q;
                plane_size += item->size;
                q = q_next;
                continue;
            }
            item->size = varint(q, q_next, &tag); /* the tag's bytes */
            item->first = segments.count;
            item->line_size = 0;
            long events = 0;
            const uint8_t *r = line;
            Segment *open = NULL;
            while (r < q_next) {
                const uint8_t *event;
                const uint8_t *r_next;
                if (r[0] == 0x22 && q_next - r > 2 && !(r[1] & 0x80) && r[1] <= q_next - r - 2) {
                    /* (the common case: an events field, a length under 128) */
                    number = 4;
                    wire = 2;
                    event = r + 2;
                    r_next = event + r[1];
                } else {
                    r_next = outer_field(r, q_next, &number, &wire, &event);
                }
                if (!r_next) goto none;
                if (number == 4 && wire == 2) {
                    if (position_add(&starts, event - base) < 0 ||
                        position_add(&ends, r_next - base) < 0)
                        goto done;
                    events++;
                    open = NULL;
                } else {
                    if (open) {
                        open->size += r_next - r;
                    } else {
                        open = grow_add(&segments);
                        if (!open) goto done;
                        open->at = r - base;
                        open->size = r_next - r;
                    }
                    item->line_size += r_next - r;
                }
                r = r_next;
            }
            /* (segments may have moved: item is re-read through its index below) */
            item = (Item *)items.items + (items.count - 1);
            item->count = segments.count - item->first;
            item->line = events;
            plane_size += item->size + varint_size((uint64_t)item->line_size) + item->line_size;
            PyObject *n = PyLong_FromLong(events);
            if (!n || PyList_Append(line_events, n) < 0) {
                Py_XDECREF(n);
                goto done;
            }
            Py_DECREF(n);
            q = q_next;
        }
        if (put(&out, p, varint(p, end, &tag)) < 0 || put_varint(&out, (uint64_t)plane_size) < 0)
            goto done;
        const Item *all = (const Item *)items.items;
        const Segment *runs = (const Segment *)segments.items;
        for (Py_ssize_t i = 0; i < items.count; i++) {
            const Item *item = &all[i];
            if (put(&out, base + item->at, item->size) < 0) goto done;
            if (item->line < 0) continue;
            if (put_varint(&out, (uint64_t)item->line_size) < 0) goto done;
            for (int64_t k = item->first; k < item->first + item->count; k++)
                if (put(&out, base + runs[k].at, runs[k].size) < 0) goto done;
        }
        p = next;
    }
    PyObject *bytes = PyBytes_FromStringAndSize(out.items, out.count);
    if (!bytes) goto done;
    PyObject *a = position_array(&starts);
    if (!a) {
        Py_DECREF(bytes);
        goto done;
    }
    PyObject *b = position_array(&ends);
    if (!b) {
        Py_DECREF(bytes);
        Py_DECREF(a);
        goto done;
    }
    result = Py_BuildValue("(NNNO)", bytes, a, b, line_events);
    goto done;
none:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(line_events);
    grow_free(&starts);
    grow_free(&ends);
    grow_free(&out);
    grow_free(&items);
    grow_free(&segments);
    PyBuffer_Release(&data);
    return result;
}

/* Floor division by 1000, as numpy's // on int64. */
static inline int64_t floor_div_1000(int64_t x) {
    int64_t q = x / 1000;
    return (x % 1000 < 0) ? q - 1 : q;
}

typedef struct {
    int64_t key;
    int64_t line; /* ties go to the earlier line: its events come first in a stable sort */
} Head;

static inline int head_less(const Head *a, const Head *b) {
    return a->key < b->key || (a->key == b->key && a->line < b->line);
}

static void sift_down(Head *heap, Py_ssize_t n, Py_ssize_t i) {
    for (;;) {
        Py_ssize_t least = i, l = 2 * i + 1, r = l + 1;
        if (l < n && head_less(&heap[l], &heap[least])) least = l;
        if (r < n && head_less(&heap[r], &heap[least])) least = r;
        if (least == i) return;
        Head swap = heap[i];
        heap[i] = heap[least];
        heap[least] = swap;
        i = least;
    }
}

/* times(offset_ps, duration_ps, bases, counts) -> (start_ns, end_ns, duration_ns, order) or
   None. The events are in line order (counts[i] events of line i, whose start is bases[i]
   picoseconds after the capture's base); each starts at its line's base plus its offset.
   The columns are frame.event_times' for a capture whose every event is kept (start and end
   within int64 picoseconds, no negative duration) and whose lines are each in time order: the
   stable sort by start is then a merge of the lines. None otherwise (frame.event_times does it
   with numpy). start_ns and end_ns are relative to the capture's base (the caller adds it).
   order is int32 where every event's number fits (4 bytes an event less while the frame is
   made), else intp. */
static PyObject *times(PyObject *self, PyObject *args) {
    PyArrayObject *offsets, *durations, *bases_array, *counts_array;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyArray_Type, &offsets, &PyArray_Type, &durations,
                          &PyArray_Type, &bases_array, &PyArray_Type, &counts_array))
        return NULL;
    PyArrayObject *arrays[4] = {offsets, durations, bases_array, counts_array};
    for (int k = 0; k < 4; k++) {
        if (PyArray_NDIM(arrays[k]) != 1 || PyArray_TYPE(arrays[k]) != NPY_INT64 ||
            !PyArray_IS_C_CONTIGUOUS(arrays[k])) {
            PyErr_SetString(PyExc_TypeError, "times takes 1-d contiguous int64 arrays");
            return NULL;
        }
    }
    npy_intp count = PyArray_DIM(offsets, 0), lines = PyArray_DIM(bases_array, 0);
    if (PyArray_DIM(durations, 0) != count || PyArray_DIM(counts_array, 0) != lines) {
        PyErr_SetString(PyExc_ValueError, "times: lengths differ");
        return NULL;
    }
    const int64_t *offset = PyArray_DATA(offsets), *duration = PyArray_DATA(durations);
    const int64_t *bases = PyArray_DATA(bases_array), *counts = PyArray_DATA(counts_array);
    const int64_t limit = (int64_t)1 << 62, max = INT64_MAX;
    npy_intp total = 0;
    for (npy_intp l = 0; l < lines; l++) {
        if (counts[l] < 0 || bases[l] < -limit || bases[l] > limit) Py_RETURN_NONE;
        total += counts[l];
    }
    if (total != count) {
        PyErr_SetString(PyExc_ValueError, "times: counts do not add up");
        return NULL;
    }
    /* Every event kept, every line in order of start_ns (else None, before any allocation).
       With |base|, |offset| <= 2^62 the sums fit int64. */
    npy_intp at = 0;
    for (npy_intp l = 0; l < lines; l++) {
        int64_t previous = INT64_MIN;
        for (npy_intp i = at; i < at + counts[l]; i++) {
            if (offset[i] < -limit || offset[i] > limit || duration[i] < 0) Py_RETURN_NONE;
            int64_t start = bases[l] + offset[i];
            if (start < -max || (start > 0 && duration[i] > max - start)) Py_RETURN_NONE;
            int64_t ns = floor_div_1000(start);
            if (ns < previous) Py_RETURN_NONE;
            previous = ns;
        }
        at += counts[l];
    }
    PyObject *starts = new_array(count, NPY_INT64), *ends = new_array(count, NPY_INT64);
    const int narrow = count <= INT32_MAX;
    PyObject *spans = new_array(count, NPY_FLOAT64);
    PyObject *orders = new_array(count, narrow ? NPY_INT32 : NPY_INTP);
    Head *heap = PyMem_RawMalloc((size_t)(lines ? lines : 1) * sizeof(Head));
    npy_intp *next = PyMem_RawMalloc((size_t)(lines ? lines : 1) * 2 * sizeof(npy_intp));
    if (!starts || !ends || !spans || !orders || !heap || !next) {
        Py_XDECREF(starts);
        Py_XDECREF(ends);
        Py_XDECREF(spans);
        Py_XDECREF(orders);
        PyMem_RawFree(heap);
        PyMem_RawFree(next);
        return PyErr_NoMemory();
    }
    int64_t *start_ns = PyArray_DATA((PyArrayObject *)starts);
    int64_t *end_ns = PyArray_DATA((PyArrayObject *)ends);
    double *duration_ns = PyArray_DATA((PyArrayObject *)spans);
    npy_intp *order = narrow ? NULL : PyArray_DATA((PyArrayObject *)orders);
    int32_t *order32 = narrow ? PyArray_DATA((PyArrayObject *)orders) : NULL;
    npy_intp *stop = next + lines;
    Py_ssize_t heads = 0;
    at = 0;
    for (npy_intp l = 0; l < lines; l++) {
        next[l] = at;
        stop[l] = at + counts[l];
        if (counts[l]) {
            heap[heads].key = floor_div_1000(bases[l] + offset[at]);
            heap[heads].line = l;
            heads++;
        }
        at += counts[l];
    }
    for (Py_ssize_t i = heads / 2 - 1; i >= 0; i--) sift_down(heap, heads, i);
    npy_intp row = 0;
    while (heads) {
        npy_intp l = heap[0].line;
        int64_t key = heap[0].key;
        /* Take this line's events while they stay before every other line's next. */
        for (;;) {
            npy_intp i = next[l]++;
            int64_t start = bases[l] + offset[i];
            if (narrow)
                order32[row] = (int32_t)i;
            else
                order[row] = i;
            start_ns[row] = key;
            end_ns[row] = floor_div_1000(start + duration[i]);
            duration_ns[row] = (double)duration[i] / 1000.0;
            row++;
            if (next[l] == stop[l]) {
                heap[0] = heap[--heads];
                break;
            }
            key = floor_div_1000(bases[l] + offset[next[l]]);
            Head candidate = {key, l};
            if (heads > 1) {
                /* The smaller child of the root bounds every other line's next. */
                Py_ssize_t c = heads > 2 && head_less(&heap[2], &heap[1]) ? 2 : 1;
                if (head_less(&heap[c], &candidate)) {
                    heap[0] = candidate;
                    break;
                }
            }
        }
        if (heads) sift_down(heap, heads, 0);
    }
    PyMem_RawFree(heap);
    PyMem_RawFree(next);
    return Py_BuildValue("(NNNN)", starts, ends, spans, orders);
}

/* nest(starts, ends, order, own, parent) -> True, or None: intervals._nest's stack walk over
   the events at order (in that order), in place: an event that starts at or after the top
   open event's end closes it; one that ends within the top open event is nested in it (its
   length taken off that event's own time, the top its parent); every event is then opened.
   starts and ends int64, order intp, own float64, parent int64, all 1-d and contiguous.
   None, before anything is written, where an index is out of range or a length end - start
   does not fit int64 (the Python walk, in exact integers, does those). */
static PyObject *nest(PyObject *self, PyObject *args) {
    PyArrayObject *starts_array, *ends_array, *order_array, *own_array, *parent_array;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!", &PyArray_Type, &starts_array, &PyArray_Type,
                          &ends_array, &PyArray_Type, &order_array, &PyArray_Type, &own_array,
                          &PyArray_Type, &parent_array))
        return NULL;
    PyArrayObject *arrays[5] = {starts_array, ends_array, order_array, own_array, parent_array};
    const int types[5] = {NPY_INT64, NPY_INT64, NPY_INTP, NPY_FLOAT64, NPY_INT64};
    for (int k = 0; k < 5; k++) {
        if (PyArray_NDIM(arrays[k]) != 1 || PyArray_TYPE(arrays[k]) != types[k] ||
            !PyArray_IS_C_CONTIGUOUS(arrays[k]) || (k >= 3 && !PyArray_ISWRITEABLE(arrays[k]))) {
            PyErr_SetString(PyExc_TypeError, "nest: 1-d contiguous arrays of the stated types");
            return NULL;
        }
    }
    npy_intp count = PyArray_DIM(starts_array, 0), rows = PyArray_DIM(order_array, 0);
    if (PyArray_DIM(ends_array, 0) != count || PyArray_DIM(own_array, 0) != count ||
        PyArray_DIM(parent_array, 0) != count) {
        PyErr_SetString(PyExc_ValueError, "nest: lengths differ");
        return NULL;
    }
    const int64_t *start = PyArray_DATA(starts_array), *end = PyArray_DATA(ends_array);
    const npy_intp *order = PyArray_DATA(order_array);
    double *own = PyArray_DATA(own_array);
    int64_t *parent = PyArray_DATA(parent_array);
    for (npy_intp i = 0; i < rows; i++) {
        npy_intp index = order[i];
        int64_t length;
        if (index < 0 || index >= count || __builtin_sub_overflow(end[index], start[index], &length))
            Py_RETURN_NONE;
    }
    npy_intp *stack = PyMem_RawMalloc((size_t)(rows ? rows : 1) * sizeof(npy_intp));
    if (!stack) return PyErr_NoMemory();
    npy_intp top = 0;
    for (npy_intp i = 0; i < rows; i++) {
        npy_intp index = order[i];
        int64_t a = start[index], b = end[index];
        while (top && end[stack[top - 1]] <= a) top--;
        if (top && b <= end[stack[top - 1]]) {
            own[stack[top - 1]] -= (double)(b - a);
            parent[index] = stack[top - 1];
        }
        stack[top++] = index;
    }
    PyMem_RawFree(stack);
    Py_RETURN_TRUE;
}

/* firsts(stat_event, count, wide) -> first_stat: for each of ``count`` events, the row of its
   first stat among the stats (their event numbers ``stat_event``, int32 or int64, in order, as
   decode gives them), and the stats' count last; int64 where ``wide``, else int32 (as decode's
   caller chose from the data's size). ValueError where an event number is out of order or
   range. */
static PyObject *firsts(PyObject *self, PyObject *args) {
    PyObject *event_object;
    Py_ssize_t count;
    int wide;
    if (!PyArg_ParseTuple(args, "Onp", &event_object, &count, &wide)) return NULL;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "a negative count of events");
        return NULL;
    }
    Positions event;
    if (positions(event_object, &event) < 0) return NULL;
    Py_ssize_t stats = event.view.len / event.view.itemsize;
    PyObject *found = new_array(count + 1, wide ? NPY_INT64 : NPY_INT32);
    if (!found) {
        PyBuffer_Release(&event.view);
        return NULL;
    }
    void *first = PyArray_DATA((PyArrayObject *)found);
    Py_ssize_t row = 0;
    for (Py_ssize_t i = 0; i <= count; i++) {
        if (wide)
            ((int64_t *)first)[i] = row;
        else
            ((int32_t *)first)[i] = (int32_t)row;
        /* (a number out of order or range is never reached: then rows are left over) */
        while (i < count && row < stats && position_at(&event, row) == i) row++;
    }
    PyBuffer_Release(&event.view);
    if (row != stats || (!wide && stats > INT32_MAX)) {
        Py_DECREF(found);
        PyErr_SetString(PyExc_ValueError, "the stats' event numbers are out of order or range");
        return NULL;
    }
    return found;
}

/* take(values, index, clip) -> values.take(index, mode="clip" if clip else "raise"), as numpy
   gives it, for ``values`` a 1-d contiguous array of plain numbers (bool, integers, floats:
   items of 1, 2, 4 or 8 bytes) and ``index`` a 1-d contiguous signed integer array; None
   for anything else (the caller then asks numpy). numpy first copies an index that is not
   intp into one that is: for the frame's int32 row orders, 8 bytes an event of memory first
   touched, and a cast, on every gather. Negative entries count from the end (``raise``) or
   read the first item (``clip``); IndexError where an entry is out of range, or where
   ``values`` is empty and ``index`` is not, as numpy. */
#define TAKE_LOOP(VT, IT)                                                               \
    do {                                                                                \
        const VT *from = (const VT *)PyArray_DATA(v);                                   \
        const IT *at = (const IT *)PyArray_DATA(ix);                                    \
        VT *to = (VT *)PyArray_DATA((PyArrayObject *)out);                              \
        for (npy_intp i = 0; i < count; i++) {                                          \
            npy_intp k = (npy_intp)at[i];                                               \
            if (k < 0 || k >= n) {                                                      \
                if (clip)                                                               \
                    k = k < 0 ? 0 : n - 1;                                              \
                else if (k < 0 && k + n >= 0)                                           \
                    k += n;                                                             \
                else {                                                                  \
                    bad = 1;                                                            \
                    break;                                                              \
                }                                                                       \
            }                                                                           \
            to[i] = from[k];                                                            \
        }                                                                               \
    } while (0)

#define TAKE_INDEX(VT)                                   \
    do {                                                 \
        if (index_size == 1)                             \
            TAKE_LOOP(VT, int8_t);                       \
        else if (index_size == 2)                        \
            TAKE_LOOP(VT, int16_t);                      \
        else if (index_size == 4)                        \
            TAKE_LOOP(VT, int32_t);                      \
        else                                             \
            TAKE_LOOP(VT, int64_t);                      \
    } while (0)

static PyObject *take(PyObject *self, PyObject *args) {
    PyObject *values_object, *index_object;
    int clip;
    if (!PyArg_ParseTuple(args, "OOp", &values_object, &index_object, &clip)) return NULL;
    if (!PyArray_Check(values_object) || !PyArray_Check(index_object)) Py_RETURN_NONE;
    PyArrayObject *v = (PyArrayObject *)values_object, *ix = (PyArrayObject *)index_object;
    PyArray_Descr *descr = PyArray_DESCR(v);
    int value_size = (int)PyArray_ITEMSIZE(v), index_size = (int)PyArray_ITEMSIZE(ix);
    int plain = strchr("biuf", descr->kind) != NULL && PyArray_ISNBO(descr->byteorder);
    int index_kind = PyArray_DESCR(ix)->kind == 'i' && PyArray_ISNBO(PyArray_DESCR(ix)->byteorder);
    if (PyArray_NDIM(v) != 1 || PyArray_NDIM(ix) != 1 || !PyArray_IS_C_CONTIGUOUS(v) ||
        !PyArray_IS_C_CONTIGUOUS(ix) || !plain || !index_kind ||
        (value_size != 1 && value_size != 2 && value_size != 4 && value_size != 8) ||
        (index_size != 1 && index_size != 2 && index_size != 4 && index_size != 8))
        Py_RETURN_NONE;
    npy_intp n = PyArray_DIM(v, 0), count = PyArray_DIM(ix, 0);
    if (n == 0 && count > 0) {
        PyErr_SetString(PyExc_IndexError, "cannot do a non-empty take from an empty axes.");
        return NULL;
    }
    Py_INCREF(descr); /* the new array takes this reference */
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, 1, &count, NULL, NULL, 0, NULL);
    if (!out) return NULL;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS;
    if (value_size == 1)
        TAKE_INDEX(uint8_t);
    else if (value_size == 2)
        TAKE_INDEX(uint16_t);
    else if (value_size == 4)
        TAKE_INDEX(uint32_t);
    else
        TAKE_INDEX(uint64_t);
    Py_END_ALLOW_THREADS;
    if (bad) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_IndexError, "index out of range for the values taken from");
        return NULL;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, "Every event's fields and stats (wire.decode_arrays')."},
    {"firsts", firsts, METH_VARARGS, "Each event's first stat (wire.Events.first_stat)."},
    {"locate", locate, METH_VARARGS, "Where each event of a capture lies, or None."},
    {"skeleton", skeleton, METH_VARARGS, "The capture without its events, and where they lie."},
    {"times", times, METH_VARARGS, "frame.event_times' columns and order by a merge, or None."},
    {"nest", nest, METH_VARARGS, "intervals._nest's stack walk in place, or None."},
    {"take", take, METH_VARARGS, "values.take(index) for a narrow index, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "The compiled core of the XSpace decoder.", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    import_array();
    return PyModule_Create(&module);
}
