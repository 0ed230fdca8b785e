/*
 * zk2kraft's optional native record packer and unpacker: the hot loops of encode_record_batch and
 * decode_batch_records in C.
 *
 * Why: the Python encoders spend about a microsecond per PartitionRecord fetching fields from the
 * dict and handing them to struct; a migration writes millions of records and the benchmark target
 * is twice kafka-python's framing speed with the record codec included. Decoding is bound by
 * allocating the record's objects (dict, lists, tuples), which C cannot avoid: it gains ~1.7x.
 *
 * What it knows: nothing about Kafka's schemas. migrator.kraft.records derives a *plan* per (apiKey,
 * version) from the declarations in schema.py -- the frame prefix, the untagged field names in wire
 * order, one operation byte per field, and the tagged fields with their defaults -- and this module
 * only executes plans. A record it cannot pack exactly (a non-default tagged field, unknown tagged
 * fields, a value of an unexpected type or out of range, a type without a plan) is left to the Python
 * encoder: pack_records stops there and returns what it packed. So the Python codec stays the
 * reference, and tests check that both produce the same bytes.
 *
 * Operations (one byte each; 'a' is followed by the element's operation):
 *   b h i q   int8 int16 int32 int64 (big-endian, exact int in range)
 *   H         uint16
 *   d         float64 (exact float)
 *   ?         bool (True or False only)
 *   u         uuid (exact uuid.UUID; its .int as 16 big-endian bytes)
 *   s S       compact string, S nullable (exact str, UTF-8)
 *   y Y       compact bytes, Y nullable (exact bytes)
 *   a<op>     compact array (exact list or tuple) of <op> elements
 * Tagged-field checks: (name, kind, default) with kind 'n' (is None), 'e' (falsy), '=' (== default).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *record_type = NULL; /* migrator.kraft.records.MetadataRecord */
static PyObject *uuid_type = NULL;   /* uuid.UUID */
static PyObject *unknown_key = NULL; /* the fields-dict key holding unknown tagged fields */
static PyObject *int_name = NULL;    /* "int" */
static PyObject *plans = NULL;       /* plans[apiKey][version]: a plan tuple or None */

typedef struct {
    char *p;
    Py_ssize_t len;
    Py_ssize_t cap;
} buf_t;

/* 0 ok, -1 MemoryError set. */
static int
reserve(buf_t *b, Py_ssize_t extra)
{
    if (extra > PY_SSIZE_T_MAX / 4 - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->len + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra)
        cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int
uvarint_size(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static char *
put_uvarint(char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

/* Results of the packers below. */
#define PACKED 0
#define FAILED -1 /* a Python error is set (memory) */
#define DECLINE 1 /* not packable here: the Python encoder takes the record */

/* Any Python error raised while probing a value means "let Python explain it". */
static int
decline(void)
{
    if (PyErr_Occurred())
        PyErr_Clear();
    return DECLINE;
}

static int
pack_int(buf_t *b, PyObject *v, int width, long long lo, long long hi)
{
    if (!PyLong_CheckExact(v))
        return DECLINE;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred()) || x < lo || x > hi)
        return decline();
    if (reserve(b, width) < 0)
        return FAILED;
    unsigned char *p = (unsigned char *)b->p + b->len;
    unsigned long long u = (unsigned long long)x;
    for (int k = width - 1; k >= 0; k--) {
        p[k] = (unsigned char)(u & 0xFF);
        u >>= 8;
    }
    b->len += width;
    return PACKED;
}

static int
pack_uuid(buf_t *b, PyObject *v)
{
    if ((PyObject *)Py_TYPE(v) != uuid_type)
        return DECLINE;
    PyObject *iv = PyObject_GetAttr(v, int_name);
    if (iv == NULL)
        return decline();
    if (!PyLong_CheckExact(iv)) {
        Py_DECREF(iv);
        return DECLINE;
    }
    if (reserve(b, 16) < 0) {
        Py_DECREF(iv);
        return FAILED;
    }
    unsigned char *p = (unsigned char *)b->p + b->len;
#if PY_VERSION_HEX >= 0x030D0000
    Py_ssize_t need = PyLong_AsNativeBytes(
        iv, p, 16,
        Py_ASNATIVEBYTES_BIG_ENDIAN | Py_ASNATIVEBYTES_UNSIGNED_BUFFER | Py_ASNATIVEBYTES_REJECT_NEGATIVE);
    Py_DECREF(iv);
    if (need < 0 || need > 16)
        return decline();
#else
    int rc = _PyLong_AsByteArray((PyLongObject *)iv, p, 16, 0 /* big-endian */, 0 /* unsigned */);
    Py_DECREF(iv);
    if (rc < 0)
        return decline();
#endif
    b->len += 16;
    return PACKED;
}

static int
pack_blob(buf_t *b, const char *data, Py_ssize_t n)
{
    if (reserve(b, n + 10) < 0)
        return FAILED;
    char *p = put_uvarint(b->p + b->len, (uint64_t)n + 1);
    memcpy(p, data, (size_t)n);
    b->len = (p - b->p) + n;
    return PACKED;
}

static int
pack_null(buf_t *b)
{
    if (reserve(b, 1) < 0)
        return FAILED;
    b->p[b->len++] = 0;
    return PACKED;
}

static int pack_value(buf_t *b, PyObject *v, const char **op);

static int
pack_scalar(buf_t *b, PyObject *v, char op)
{
    switch (op) {
    case 'b':
        return pack_int(b, v, 1, -128, 127);
    case 'h':
        return pack_int(b, v, 2, -32768, 32767);
    case 'H':
        return pack_int(b, v, 2, 0, 65535);
    case 'i':
        return pack_int(b, v, 4, INT32_MIN, INT32_MAX);
    case 'q':
        return pack_int(b, v, 8, INT64_MIN, INT64_MAX);
    case 'd':
        if (!PyFloat_CheckExact(v))
            return DECLINE;
        if (reserve(b, 8) < 0)
            return FAILED;
        if (PyFloat_Pack8(PyFloat_AS_DOUBLE(v), b->p + b->len, 0 /* big-endian */) < 0)
            return decline();
        b->len += 8;
        return PACKED;
    case '?':
        if (v != Py_True && v != Py_False)
            return DECLINE;
        if (reserve(b, 1) < 0)
            return FAILED;
        b->p[b->len++] = (char)(v == Py_True);
        return PACKED;
    case 'u':
        return pack_uuid(b, v);
    case 's':
    case 'S': {
        if (op == 'S' && v == Py_None)
            return pack_null(b);
        if (!PyUnicode_CheckExact(v))
            return DECLINE;
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        if (s == NULL)
            return decline(); /* e.g. lone surrogates: Python's encoder raises the explanation */
        return pack_blob(b, s, n);
    }
    case 'y':
    case 'Y':
        if (op == 'Y' && v == Py_None)
            return pack_null(b);
        if (!PyBytes_CheckExact(v))
            return DECLINE;
        return pack_blob(b, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    default:
        return DECLINE;
    }
}

/* Pack one value whose operation starts at *op; advances *op past it (arrays take two bytes). */
static int
pack_value(buf_t *b, PyObject *v, const char **op)
{
    char c = *(*op)++;
    if (c != 'a')
        return pack_scalar(b, v, c);
    char elem = *(*op)++;
    if (elem == 'a' || elem == '\0')
        return DECLINE;
    if (!PyList_CheckExact(v) && !PyTuple_CheckExact(v))
        return DECLINE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    PyObject **items = PySequence_Fast_ITEMS(v);
    if (reserve(b, 10) < 0)
        return FAILED;
    b->len = put_uvarint(b->p + b->len, (uint64_t)n + 1) - b->p;
    for (Py_ssize_t k = 0; k < n; k++) {
        /* a list may not change while we hold no reference to its items: nothing here runs Python code
           that could mutate it except PyObject_GetAttr on an exact UUID, whose "int" is a slot */
        int r = pack_scalar(b, items[k], elem);
        if (r != PACKED)
            return r;
    }
    return PACKED;
}

/* Pack the value of one record (frame prefix, body, empty tagged section) into b, after b->len. */
static int
pack_record_value(buf_t *b, PyObject *plan, PyObject *fields)
{
    /* plan = (prefix: bytes, names: tuple[str], ops: bytes, tagged: tuple[(name, kind, default)]) */
    PyObject *prefix = PyTuple_GET_ITEM(plan, 0);
    PyObject *names = PyTuple_GET_ITEM(plan, 1);
    const char *op = PyBytes_AS_STRING(PyTuple_GET_ITEM(plan, 2));
    PyObject *tagged = PyTuple_GET_ITEM(plan, 3);

    Py_ssize_t nt = PyTuple_GET_SIZE(tagged);
    for (Py_ssize_t k = 0; k < nt; k++) {
        PyObject *check = PyTuple_GET_ITEM(tagged, k);
        PyObject *v = PyDict_GetItemWithError(fields, PyTuple_GET_ITEM(check, 0));
        if (v == NULL)
            return decline();
        char kind = PyBytes_AS_STRING(PyTuple_GET_ITEM(check, 1))[0];
        int at_default;
        Py_INCREF(v); /* comparing may run Python code */
        if (kind == 'n')
            at_default = v == Py_None;
        else if (kind == 'e')
            at_default = PyObject_IsTrue(v) == 0;
        else
            at_default = PyObject_RichCompareBool(v, PyTuple_GET_ITEM(check, 2), Py_EQ) == 1;
        Py_DECREF(v);
        if (!at_default)
            return decline();
    }
    PyObject *unknown = PyDict_GetItemWithError(fields, unknown_key);
    if (unknown != NULL || PyErr_Occurred())
        return decline();

    Py_ssize_t plen = PyBytes_GET_SIZE(prefix);
    if (reserve(b, plen) < 0)
        return FAILED;
    memcpy(b->p + b->len, PyBytes_AS_STRING(prefix), (size_t)plen);
    b->len += plen;

    Py_ssize_t nf = PyTuple_GET_SIZE(names);
    for (Py_ssize_t k = 0; k < nf; k++) {
        PyObject *v = PyDict_GetItemWithError(fields, PyTuple_GET_ITEM(names, k));
        if (v == NULL)
            return decline();
        int r = pack_value(b, v, &op);
        if (r != PACKED)
            return r;
    }
    return pack_null(b); /* no tagged fields */
}

/* Find the plan for a record, or NULL (no error set) when there is none. */
static PyObject *
plan_for(PyObject *rec)
{
    if ((PyObject *)Py_TYPE(rec) != record_type || PyTuple_GET_SIZE(rec) != 3)
        return NULL;
    PyObject *ko = PyTuple_GET_ITEM(rec, 0), *vo = PyTuple_GET_ITEM(rec, 1);
    if (!PyLong_CheckExact(ko) || !PyLong_CheckExact(vo) || !PyDict_CheckExact(PyTuple_GET_ITEM(rec, 2)))
        return NULL;
    long key = PyLong_AsLong(ko), version = PyLong_AsLong(vo);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return NULL;
    }
    if (key < 0 || key >= PyTuple_GET_SIZE(plans))
        return NULL;
    PyObject *per = PyTuple_GET_ITEM(plans, key);
    if (!PyTuple_CheckExact(per) || version < 0 || version >= PyTuple_GET_SIZE(per))
        return NULL;
    PyObject *plan = PyTuple_GET_ITEM(per, version);
    return PyTuple_CheckExact(plan) ? plan : NULL;
}

/* One operation per name ('a' followed by its element's), only from `allowed`, nothing left over. */
static int
valid_ops(PyObject *ops, Py_ssize_t names, const char *allowed)
{
    const char *op = PyBytes_AS_STRING(ops);
    const char *end = op + PyBytes_GET_SIZE(ops);
    for (Py_ssize_t f = 0; f < names; f++) {
        if (op >= end || *op == '\0' || !strchr(allowed, *op))
            return 0;
        if (*op++ == 'a' && (op >= end || *op == '\0' || *op == 'a' || !strchr("bhHiqd?usSyY", *op++)))
            return 0;
    }
    return op == end;
}

/* A plan table: a tuple indexed by apiKey of None or tuples indexed by version of None or a plan that
   `valid_plan` accepts. */
static int
valid_table(PyObject *pl, int (*valid_plan)(PyObject *))
{
    if (!PyTuple_CheckExact(pl))
        return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(pl); k++) {
        PyObject *per = PyTuple_GET_ITEM(pl, k);
        if (per == Py_None)
            continue;
        if (!PyTuple_CheckExact(per))
            return 0;
        for (Py_ssize_t v = 0; v < PyTuple_GET_SIZE(per); v++) {
            PyObject *p = PyTuple_GET_ITEM(per, v);
            if (p != Py_None && (!PyTuple_CheckExact(p) || !valid_plan(p)))
                return 0;
        }
    }
    return 1;
}

/* (prefix: bytes, names: tuple, ops: bytes, tagged: tuple of (name, kind: 1 byte, default)) */
static int
valid_plan(PyObject *p)
{
    if (PyTuple_GET_SIZE(p) != 4 || !PyBytes_CheckExact(PyTuple_GET_ITEM(p, 0))
        || !PyTuple_CheckExact(PyTuple_GET_ITEM(p, 1)) || !PyBytes_CheckExact(PyTuple_GET_ITEM(p, 2))
        || !PyTuple_CheckExact(PyTuple_GET_ITEM(p, 3)))
        return 0;
    if (!valid_ops(PyTuple_GET_ITEM(p, 2), PyTuple_GET_SIZE(PyTuple_GET_ITEM(p, 1)), "bhHiqd?usSyYa"))
        return 0;
    PyObject *tagged = PyTuple_GET_ITEM(p, 3);
    for (Py_ssize_t t = 0; t < PyTuple_GET_SIZE(tagged); t++) {
        PyObject *c = PyTuple_GET_ITEM(tagged, t);
        if (!PyTuple_CheckExact(c) || PyTuple_GET_SIZE(c) != 3 || !PyBytes_CheckExact(PyTuple_GET_ITEM(c, 1))
            || PyBytes_GET_SIZE(PyTuple_GET_ITEM(c, 1)) != 1)
            return 0;
    }
    return 1;
}

PyDoc_STRVAR(pack_records_doc,
"pack_records(records, start) -> (bytes, stop)\n\n"
"Records start.. of a batch (list or tuple of MetadataRecord), each framed as it sits at its index in a\n"
"KRaft record batch, packed until the first record without a plan or not packable exactly; stop is that\n"
"record's index (len(records) when all were packed).");

static PyObject *
pack_records(PyObject *self, PyObject *args)
{
    PyObject *records;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "On", &records, &start))
        return NULL;
    if (plans == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    if (!PyList_CheckExact(records) && !PyTuple_CheckExact(records))
        return Py_BuildValue("(y#n)", "", (Py_ssize_t)0, start);
    if (start < 0)
        start = 0;

    buf_t out = {NULL, 0, 0}, val = {NULL, 0, 0};
    Py_ssize_t i = start;
    for (; i < PySequence_Fast_GET_SIZE(records); i++) {
        PyObject *rec = PySequence_Fast_GET_ITEM(records, i);
        PyObject *plan = plan_for(rec);
        if (plan == NULL)
            break;
        Py_INCREF(rec); /* PyObject_RichCompareBool may run Python code */
        val.len = 0;
        int r = pack_record_value(&val, plan, PyTuple_GET_ITEM(rec, 2));
        Py_DECREF(rec);
        if (r == FAILED)
            goto error;
        if (r == DECLINE)
            break;
        /* record: length, attributes 0, timestampDelta 0, offsetDelta, key null, value length, value,
           no headers -- lengths and deltas as zigzag varints of non-negative numbers */
        uint64_t zi = (uint64_t)i << 1, zv = (uint64_t)val.len << 1;
        uint64_t body = 2 + uvarint_size(zi) + 1 + uvarint_size(zv) + (uint64_t)val.len + 1;
        if (reserve(&out, (Py_ssize_t)body + 10) < 0)
            goto error;
        char *p = put_uvarint(out.p + out.len, body << 1);
        *p++ = 0;
        *p++ = 0;
        p = put_uvarint(p, zi);
        *p++ = 1;
        p = put_uvarint(p, zv);
        memcpy(p, val.p, (size_t)val.len);
        p += val.len;
        *p++ = 0;
        out.len = p - out.p;
    }
    PyObject *result = Py_BuildValue("(y#n)", out.p ? out.p : "", out.len, i);
    PyMem_Free(out.p);
    PyMem_Free(val.p);
    return result;
error:
    PyMem_Free(out.p);
    PyMem_Free(val.p);
    return NULL;
}

PyDoc_STRVAR(configure_doc,
"configure(record_type, uuid_type, unknown_key, plans)\n\n"
"The MetadataRecord type, uuid.UUID, the fields key of unknown tagged fields and the plans (a tuple\n"
"indexed by apiKey of tuples indexed by version of plan tuples or None); called once on import.");

static PyObject *
configure(PyObject *self, PyObject *args)
{
    PyObject *rt, *ut, *uk, *pl;
    if (!PyArg_ParseTuple(args, "OOUO", &rt, &ut, &uk, &pl))
        return NULL;
    if (!PyType_Check(rt) || !PyType_IsSubtype((PyTypeObject *)rt, &PyTuple_Type) || !PyType_Check(ut)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple subclass and uuid_type a type");
        return NULL;
    }
    if (!valid_table(pl, valid_plan)) {
        PyErr_SetString(PyExc_TypeError, "plans must be a tuple of per-apiKey tuples of plans");
        return NULL;
    }
    Py_INCREF(rt);
    Py_INCREF(ut);
    Py_INCREF(uk);
    Py_INCREF(pl);
    Py_XSETREF(record_type, rt);
    Py_XSETREF(uuid_type, ut);
    Py_XSETREF(unknown_key, uk);
    Py_XSETREF(plans, pl);
    Py_RETURN_NONE;
}


/* ------------------------------------------------------------------------------------------------
 * Unpacking: the inverse, for decode_batch_records.
 *
 * A decode plan (records.native_decode_plan) lists every field of a version in declaration order --
 * the order of the dict the Python decoders build -- with one operation each: the encoder's for an
 * untagged field, 't' for a tagged field (its default, an immutable object, from the defaults tuple)
 * or 'T' (a tagged field whose default is an empty list). unpack_records decodes records framed the
 * way KRaft writes them (attributes 0, timestampDelta 0, offsetDelta equal to the index, null key, no
 * headers) with an empty tagged section, and declines -- stops, leaving the record to the Python
 * decoders, which also explain damage -- at anything else. Every read is bounds-checked against the
 * record it belongs to; the input is a log file and may be corrupt.
 */

static PyObject *dec_plans = NULL;  /* dec_plans[apiKey][version]: a decode plan tuple or None */
static PyObject *uuid_cache = NULL; /* records._UUID_CACHE: 16 raw bytes -> uuid.UUID */
static PyObject *make_uuid = NULL;  /* records._make_uuid(raw) -> uuid.UUID (and caches it) */

#define MAX_DECODE_FIELDS 64

typedef struct {
    const unsigned char *p;   /* next byte */
    const unsigned char *end; /* end of what may be read */
} cursor_t;

/* Unsigned varint of at most 5 bytes and 32 bits (Kafka's ByteUtils.readUnsignedVarint); 0 on success. */
static int
read_uvarint(cursor_t *c, uint32_t *out)
{
    uint64_t v = 0;
    for (int k = 0; k < 5; k++) {
        if (c->p >= c->end)
            return -1;
        unsigned char b = *c->p++;
        v |= (uint64_t)(b & 0x7F) << (7 * k);
        if (b < 0x80) {
            if (v > 0xFFFFFFFFu)
                return -1;
            *out = (uint32_t)v;
            return 0;
        }
    }
    return -1;
}

/* Zigzag varint of at most 5 bytes (record framing); 0 on success. */
static int
read_varint(cursor_t *c, int64_t *out)
{
    uint32_t raw;
    if (read_uvarint(c, &raw) < 0)
        return -1;
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

static uint64_t
get_be(const unsigned char *p, int width)
{
    uint64_t v = 0;
    for (int k = 0; k < width; k++)
        v = (v << 8) | p[k];
    return v;
}

/* One scalar value, or NULL: declined (no error set) or failed (error set). */
static PyObject *
unpack_scalar(cursor_t *c, char op)
{
    int width;
    switch (op) {
    case 'b':
    case '?':
        width = 1;
        break;
    case 'h':
    case 'H':
        width = 2;
        break;
    case 'i':
        width = 4;
        break;
    case 'q':
    case 'd':
        width = 8;
        break;
    case 'u':
        width = 16;
        break;
    case 's':
    case 'S':
    case 'y':
    case 'Y': {
        uint32_t n;
        if (read_uvarint(c, &n) < 0)
            return NULL;
        if (n == 0) {
            if (op == 'S' || op == 'Y')
                Py_RETURN_NONE;
            return NULL; /* null in a non-nullable field: Python explains */
        }
        n -= 1;
        if ((size_t)(c->end - c->p) < n)
            return NULL;
        const char *s = (const char *)c->p;
        c->p += n;
        if (op == 'y' || op == 'Y')
            return PyBytes_FromStringAndSize(s, n);
        PyObject *str = PyUnicode_DecodeUTF8(s, n, NULL);
        if (str == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            PyErr_Clear(); /* declined: Python's decoder reports the bad UTF-8 */
        return str;
    }
    default:
        return NULL;
    }
    if (c->end - c->p < width)
        return NULL;
    const unsigned char *p = c->p;
    c->p += width;
    uint64_t u = width <= 8 ? get_be(p, width) : 0;
    switch (op) {
    case 'b':
        return PyLong_FromLong((long)(int8_t)u);
    case '?':
        return Py_NewRef(u ? Py_True : Py_False);
    case 'h':
        return PyLong_FromLong((long)(int16_t)u);
    case 'H':
        return PyLong_FromLong((long)u);
    case 'i':
        return PyLong_FromLong((long)(int32_t)u);
    case 'q':
        return PyLong_FromLongLong((long long)(int64_t)u);
    case 'd': {
        double d = PyFloat_Unpack8((const char *)p, 0 /* big-endian */);
        if (d == -1.0 && PyErr_Occurred())
            return NULL;
        return PyFloat_FromDouble(d);
    }
    default: { /* 'u' */
        PyObject *raw = PyBytes_FromStringAndSize((const char *)p, 16);
        if (raw == NULL)
            return NULL;
        PyObject *u16 = PyDict_GetItemWithError(uuid_cache, raw);
        if (u16 != NULL) {
            Py_DECREF(raw);
            return Py_NewRef(u16);
        }
        if (PyErr_Occurred()) {
            Py_DECREF(raw);
            return NULL;
        }
        u16 = PyObject_CallOneArg(make_uuid, raw);
        Py_DECREF(raw);
        return u16;
    }
    }
}

static PyObject *
unpack_value(cursor_t *c, const char **op)
{
    char code = *(*op)++;
    if (code != 'a')
        return unpack_scalar(c, code);
    char elem = *(*op)++;
    uint32_t n;
    if (read_uvarint(c, &n) < 0 || n == 0)
        return NULL; /* a null array is not packable here (non-nullable, or Python's call) */
    n -= 1;
    if ((size_t)(c->end - c->p) < n) /* every element takes at least one byte */
        return NULL;
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (uint32_t k = 0; k < n; k++) {
        PyObject *v = unpack_scalar(c, elem);
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, k, v);
    }
    return list;
}

/* The fields dict of one record body [c->p, c->end) under plan, or NULL (declined or failed). */
static PyObject *
unpack_body(cursor_t *c, PyObject *plan)
{
    PyObject *names = PyTuple_GET_ITEM(plan, 0);
    const char *op = PyBytes_AS_STRING(PyTuple_GET_ITEM(plan, 1));
    PyObject *defaults = PyTuple_GET_ITEM(plan, 2);
    Py_ssize_t nf = PyTuple_GET_SIZE(names);
    PyObject *vals[MAX_DECODE_FIELDS];
    Py_ssize_t k, got = 0;
    PyObject *fields = NULL;
    for (k = 0; k < nf; k++) {
        if (*op == 't' || *op == 'T') {
            vals[k] = NULL; /* filled below, once the tagged section is known to be empty */
            op++;
            continue;
        }
        vals[k] = unpack_value(c, &op);
        if (vals[k] == NULL)
            goto done;
        got = k + 1;
    }
    got = nf;
    uint32_t ntagged;
    if (read_uvarint(c, &ntagged) < 0 || ntagged != 0 || c->p != c->end)
        goto done;
    op = PyBytes_AS_STRING(PyTuple_GET_ITEM(plan, 1));
    for (k = 0; k < nf; k++) {
        if (*op == 't')
            vals[k] = Py_NewRef(PyTuple_GET_ITEM(defaults, k));
        else if (*op == 'T' && (vals[k] = PyList_New(0)) == NULL)
            goto done;
        op += *op == 'a' ? 2 : 1;
    }
#if PY_VERSION_HEX < 0x030D0000
    fields = _PyDict_NewPresized(nf); /* no resize while filling, as Python's dict displays */
#else
    fields = PyDict_New();
#endif
    if (fields == NULL)
        goto done;
    for (k = 0; k < nf; k++) {
        if (PyDict_SetItem(fields, PyTuple_GET_ITEM(names, k), vals[k]) < 0) {
            Py_CLEAR(fields);
            goto done;
        }
    }
done:
    for (k = 0; k < got; k++)
        Py_XDECREF(vals[k]);
    return fields;
}

static PyObject *
dec_plan_for(uint32_t key, uint32_t version)
{
    if (key >= (uint32_t)PyTuple_GET_SIZE(dec_plans))
        return NULL;
    PyObject *per = PyTuple_GET_ITEM(dec_plans, key);
    if (per == Py_None || version >= (uint32_t)PyTuple_GET_SIZE(per))
        return NULL;
    PyObject *plan = PyTuple_GET_ITEM(per, version);
    return plan == Py_None ? NULL : plan;
}

PyDoc_STRVAR(unpack_records_doc,
"unpack_records(data, pos, end, index, limit, base_offset, out) -> (stop, pos)\n\n"
"Decode the records of a batch's records section from byte pos (record index `index`) up to record\n"
"`limit`, setting out[i] = (base_offset + i, MetadataRecord); stops at the first record it declines\n"
"and returns that record's index and position.");

static PyObject *
unpack_records(PyObject *self, PyObject *args)
{
    PyObject *data, *out;
    Py_ssize_t pos, end, index, limit;
    long long base;
    if (!PyArg_ParseTuple(args, "OnnnnLO!", &data, &pos, &end, &index, &limit, &base, &PyList_Type, &out))
        return NULL;
    if (dec_plans == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure_decoding() was not called");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (end > view.len)
        end = view.len;
    if (limit > PyList_GET_SIZE(out))
        limit = PyList_GET_SIZE(out);
    const unsigned char *buf = view.buf;
    Py_ssize_t i = index;
    while (i < limit && pos >= 0 && pos < end) {
        cursor_t c = {buf + pos, buf + end};
        int64_t length, delta, keylen, vlen, ts;
        if (read_varint(&c, &length) < 0 || length < 0 || length > (int64_t)(c.end - c.p))
            break;
        const unsigned char *rend = c.p + length;
        c.end = rend;
        if (c.p >= c.end || *c.p++ != 0) /* attributes */
            break;
        if (read_varint(&c, &ts) < 0 || ts != 0 || read_varint(&c, &delta) < 0 || delta != i
            || read_varint(&c, &keylen) < 0 || keylen != -1 || read_varint(&c, &vlen) < 0 || vlen < 3
            || vlen > (int64_t)(c.end - c.p) - 1)
            break;
        const unsigned char *vend = c.p + vlen;
        if (vend + 1 != rend || *vend != 0) /* exactly one byte after the value: headerCount 0 */
            break;
        c.end = vend;
        uint32_t frame, key, version;
        if (read_uvarint(&c, &frame) < 0 || frame != 1 || read_uvarint(&c, &key) < 0
            || read_uvarint(&c, &version) < 0)
            break;
        PyObject *plan = dec_plan_for(key, version);
        if (plan == NULL)
            break;
        PyObject *fields = unpack_body(&c, plan);
        if (fields == NULL) {
            if (PyErr_Occurred())
                goto error;
            break;
        }
        PyObject *rec = ((PyTypeObject *)record_type)->tp_alloc((PyTypeObject *)record_type, 3);
        if (rec == NULL) {
            Py_DECREF(fields);
            goto error;
        }
        PyTuple_SET_ITEM(rec, 0, PyLong_FromUnsignedLong(key));
        PyTuple_SET_ITEM(rec, 1, PyLong_FromUnsignedLong(version));
        PyTuple_SET_ITEM(rec, 2, fields);
        PyObject *offset = PyLong_FromLongLong(base + i);
        if (PyTuple_GET_ITEM(rec, 0) == NULL || PyTuple_GET_ITEM(rec, 1) == NULL || offset == NULL) {
            Py_DECREF(rec);
            Py_XDECREF(offset);
            goto error;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(rec);
            Py_DECREF(offset);
            goto error;
        }
        PyTuple_SET_ITEM(pair, 0, offset);
        PyTuple_SET_ITEM(pair, 1, rec);
        if (PyList_SetItem(out, i, pair) < 0)
            goto error;
        pos = rend - buf;
        i++;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nn)", i, pos);
error:
    PyBuffer_Release(&view);
    return NULL;
}

/* (names: tuple, ops: bytes, defaults: tuple as long as names) */
static int
valid_dec_plan(PyObject *p)
{
    if (PyTuple_GET_SIZE(p) != 3 || !PyTuple_CheckExact(PyTuple_GET_ITEM(p, 0))
        || !PyBytes_CheckExact(PyTuple_GET_ITEM(p, 1)) || !PyTuple_CheckExact(PyTuple_GET_ITEM(p, 2)))
        return 0;
    Py_ssize_t nf = PyTuple_GET_SIZE(PyTuple_GET_ITEM(p, 0));
    return nf <= MAX_DECODE_FIELDS && PyTuple_GET_SIZE(PyTuple_GET_ITEM(p, 2)) == nf
           && valid_ops(PyTuple_GET_ITEM(p, 1), nf, "bhHiqd?usSyYatT");
}

PyDoc_STRVAR(configure_decoding_doc,
"configure_decoding(plans, uuid_cache, make_uuid)\n\n"
"The decode plans (plans[apiKey][version]: (names, ops, defaults) or None), the UUID cache dict and\n"
"the function that makes (and caches) a UUID from 16 bytes; called once on import, after configure().");

static PyObject *
configure_decoding(PyObject *self, PyObject *args)
{
    PyObject *pl, *cache, *maker;
    if (!PyArg_ParseTuple(args, "OO!O", &pl, &PyDict_Type, &cache, &maker))
        return NULL;
    if (record_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() first");
        return NULL;
    }
    if (!valid_table(pl, valid_dec_plan) || !PyCallable_Check(maker)) {
        PyErr_SetString(PyExc_TypeError, "plans must be a tuple of per-apiKey tuples of decode plans");
        return NULL;
    }
    Py_INCREF(pl);
    Py_INCREF(cache);
    Py_INCREF(maker);
    Py_XSETREF(dec_plans, pl);
    Py_XSETREF(uuid_cache, cache);
    Py_XSETREF(make_uuid, maker);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"pack_records", pack_records, METH_VARARGS, pack_records_doc},
    {"configure", configure, METH_VARARGS, configure_doc},
    {"unpack_records", unpack_records, METH_VARARGS, unpack_records_doc},
    {"configure_decoding", configure_decoding, METH_VARARGS, configure_decoding_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "migrator.kraft._speedups",
    "Native packer for metadata records whose layout a plan from migrator.kraft.records describes.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    int_name = PyUnicode_InternFromString("int");
    if (int_name == NULL)
        return NULL;
    return PyModule_Create(&module);
}
