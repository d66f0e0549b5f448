/* SPDX-License-Identifier: GPL-2.0-only */
#include "runtimes/python-code.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "runtimes/remote-memory.h"
#include "tracker/process-table.h"
#include "util/hash.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"

typedef struct PythonCode PythonCode;
struct LineCheckpoint;
struct PythonCode {
        pid_t pid;
        uint64_t start_time;
        uint64_t addr;
        uint32_t fp;
        PythonCode *bucket_next;
        PythonCode *lru_prev, *lru_next; /* lru_next: used less recently */
        PythonLineTable kind;
        uint32_t first_line;
        bool no_table; /* the line table was too large to keep: every line is unknown */
        /* < 0: reading this (address, fingerprint) failed for good (-ESTALE, -EBADMSG, -EFAULT):
         * a frame of it is never named, and not read again. No names then. */
        int error;
        size_t table_len;
        size_t n_cps;
        size_t bytes;
        /* checkpoints of the line table, the table, name and file (NUL-terminated), in one
         * allocation after the struct */
        const struct LineCheckpoint *cps;
        const uint8_t *table;
        const char *name;
        const char *file;
};

enum {
        ERR_GONE,
        ERR_UNREADABLE,
        ERR_BAD_OBJECT,
        ERR_PERMISSION,
        ERR_REPLACED,
        ERR_NO_FINGERPRINT,
        ERR_OTHER,
        _ERR_MAX,
};

struct PythonCodeCache {
        PythonCode **buckets;
        size_t n_buckets; /* power of two */
        size_t n_entries, bytes;
        size_t n_failed; /* of n_entries: failed reads remembered (PythonCode.error) */
        size_t max_entries, max_bytes;
        PythonCode *lru_head, *lru_tail; /* head: most recently used */

        uint64_t n_cached, n_read, n_lookup_miss, n_known_bad;
        uint64_t n_errors[_ERR_MAX];
        uint64_t n_evicted, n_tables_too_large, n_names_truncated, n_lines_unknown;

        /* Where the process's memory may be read (remote-memory.h), kept for reads that follow
         * within REMOTE_SNAPSHOT_NS: a drain reads many code objects of one process. */
        RemoteMemory *mem;
        pid_t mem_pid;
        uint64_t mem_ns;
        uint64_t n_untrusted;
};

#define REMOTE_SNAPSHOT_NS (1000 * 1000 * 1000ULL)
#define REMOTE_RETAKE_NS (2 * 1000 * 1000ULL)

int python_code_cache_new(size_t max_entries, size_t max_bytes, PythonCodeCache **ret)
{
        PythonCodeCache *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->max_entries = max_entries ?: PYTHON_CODE_MAX_ENTRIES;
        c->max_bytes = max_bytes ?: PYTHON_CODE_MAX_BYTES;
        c->n_buckets = 64;
        c->buckets = calloc(c->n_buckets, sizeof(*c->buckets));
        if (!c->buckets) {
                free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

PythonCodeCache *python_code_cache_free(PythonCodeCache *c)
{
        if (!c)
                return NULL;
        for (PythonCode *e = c->lru_head, *next; e; e = next) {
                next = e->lru_next;
                free(e);
        }
        free(c->buckets);
        remote_memory_free(c->mem);
        return mfree(c);
}

size_t python_code_cache_entries(const PythonCodeCache *c)
{
        return c->n_entries;
}

size_t python_code_cache_bytes(const PythonCodeCache *c)
{
        return c->bytes + c->n_buckets * sizeof(*c->buckets);
}

static size_t hash_key(pid_t pid, uint64_t start_time, uint64_t addr, uint32_t fp)
{
        return hash_mix64(addr ^ (uint64_t)fp << 47 ^ hash_mix64((uint64_t)pid << 32 ^ start_time));
}

static size_t bucket_of(const PythonCodeCache *c, pid_t pid, uint64_t start_time, uint64_t addr, uint32_t fp)
{
        return hash_key(pid, start_time, addr, fp) & (c->n_buckets - 1);
}

static void lru_unlink(PythonCodeCache *c, PythonCode *e)
{
        if (e->lru_prev)
                e->lru_prev->lru_next = e->lru_next;
        else
                c->lru_head = e->lru_next;
        if (e->lru_next)
                e->lru_next->lru_prev = e->lru_prev;
        else
                c->lru_tail = e->lru_prev;
        e->lru_prev = e->lru_next = NULL;
}

static void lru_push(PythonCodeCache *c, PythonCode *e)
{
        e->lru_prev = NULL;
        e->lru_next = c->lru_head;
        if (c->lru_head)
                c->lru_head->lru_prev = e;
        c->lru_head = e;
        if (!c->lru_tail)
                c->lru_tail = e;
}

static PythonCode *find(PythonCodeCache *c, pid_t pid, uint64_t start_time, uint64_t addr, uint32_t fp)
{
        for (PythonCode *e = c->buckets[bucket_of(c, pid, start_time, addr, fp)]; e; e = e->bucket_next)
                if (e->addr == addr && e->fp == fp && e->pid == pid && e->start_time == start_time) {
                        lru_unlink(c, e);
                        lru_push(c, e);
                        return e;
                }
        return NULL;
}

static void remove_entry(PythonCodeCache *c, PythonCode *e)
{
        PythonCode **p = &c->buckets[bucket_of(c, e->pid, e->start_time, e->addr, e->fp)];

        while (*p != e)
                p = &(*p)->bucket_next;
        *p = e->bucket_next;
        lru_unlink(c, e);
        c->n_entries--;
        c->n_failed -= e->error != 0;
        c->bytes -= e->bytes;
        free(e);
}

static void grow(PythonCodeCache *c)
{
        size_t n = c->n_buckets * 2;
        PythonCode **b;

        /* Load factor up to 1; a table that cannot grow stays correct, only slower. */
        if (c->n_entries < c->n_buckets)
                return;
        b = calloc(n, sizeof(*b));
        if (!b)
                return;
        for (size_t i = 0; i < c->n_buckets; i++)
                for (PythonCode *e = c->buckets[i], *next; e; e = next) {
                        size_t j = hash_key(e->pid, e->start_time, e->addr, e->fp) & (n - 1);
                        next = e->bucket_next;
                        e->bucket_next = b[j];
                        b[j] = e;
                }
        free(c->buckets);
        c->buckets = b;
        c->n_buckets = n;
}

static void insert(PythonCodeCache *c, PythonCode *e)
{
        size_t i;

        /* Make room first, least recently used first, so that the bounds hold at every moment. */
        while (c->lru_tail && (c->n_entries + 1 > c->max_entries || c->bytes + e->bytes > c->max_bytes)) {
                remove_entry(c, c->lru_tail);
                c->n_evicted++;
        }
        grow(c);
        i = bucket_of(c, e->pid, e->start_time, e->addr, e->fp);
        e->bucket_next = c->buckets[i];
        c->buckets[i] = e;
        lru_push(c, e);
        c->n_entries++;
        c->n_failed += e->error != 0;
        c->bytes += e->bytes;
}

size_t python_code_cache_set_max_bytes(PythonCodeCache *c, size_t max_bytes)
{
        size_t n = 0;

        if (!c)
                return 0;
        c->max_bytes = max_bytes ?: PYTHON_CODE_MAX_BYTES;
        while (c->lru_tail && c->bytes > c->max_bytes) {
                remove_entry(c, c->lru_tail);
                c->n_evicted++;
                n++;
        }
        return n;
}

void python_code_cache_forget(PythonCodeCache *c, pid_t pid, uint64_t start_time)
{
        if (!c)
                return;
        for (PythonCode *e = c->lru_head, *next; e; e = next) {
                next = e->lru_next;
                if (e->pid == pid && e->start_time == start_time)
                        remove_entry(c, e);
        }
}

/* --- line tables ------------------------------------------------------------------------------ */

/* Where a walk of a line table stands before the entry at byte pos: the address that entry starts
 * at (bytes for co_lnotab and 3.10, code units from 3.11) and the line computed so far. Any such
 * state at an address not past the one looked for is a valid start, so an entry keeps one every
 * LINE_CHECKPOINT_STRIDE bytes of its table: a lookup walks at most that much. */
typedef struct LineCheckpoint {
        uint32_t pos;
        uint32_t addr;
        int64_t line;
} LineCheckpoint;

_Static_assert(sizeof(struct PythonCode) % _Alignof(LineCheckpoint) == 0, "checkpoints follow the entry");

#define LINE_CHECKPOINT_STRIDE 512u
#define LINE_CHECKPOINTS_MAX (PYTHON_CODE_MAX_LINE_TABLE / LINE_CHECKPOINT_STRIDE + 1)
/* Smaller tables are walked whole: the checkpoints would cost more than they save. */
#define LINE_CHECKPOINT_MIN_TABLE (2 * LINE_CHECKPOINT_STRIDE)

/* Records (when cps) a checkpoint at the first entry boundary of each stride. */
typedef struct LineRecorder {
        LineCheckpoint *cps;
        size_t n, max;
} LineRecorder;

static void record(LineRecorder *rec, size_t pos, uint64_t addr, int64_t line)
{
        if (!rec || rec->n >= rec->max || pos < (rec->n + 1) * LINE_CHECKPOINT_STRIDE || addr > UINT32_MAX)
                return;
        rec->cps[rec->n++] = (LineCheckpoint){.pos = (uint32_t)pos, .addr = (uint32_t)addr, .line = line};
}

static uint32_t line_value(bool has_line, int64_t line)
{
        return has_line && line > 0 && line <= UINT32_MAX ? (uint32_t)line : 0;
}

/* 3.8-3.9 co_lnotab (Objects/lnotab_notes.txt @v3.9): pairs of (bytecode bytes advanced, unsigned;
 * lines advanced, signed) from (0, co_firstlineno). An instruction's line is that of the last
 * pair whose address does not pass it. */
static uint32_t line_lnotab(const uint8_t *t, size_t len, LineCheckpoint s, uint64_t target,
                            LineRecorder *rec)
{
        uint64_t addr = s.addr;
        int64_t line = s.line;

        for (size_t i = s.pos; i + 1 < len; i += 2) { /* bounded by len <= PYTHON_CODE_MAX_LINE_TABLE */
                record(rec, i, addr, line);
                addr += t[i];
                if (addr > target)
                        break;
                line += (int8_t)t[i + 1];
        }
        return line_value(true, line);
}

/* 3.10 co_linetable (Objects/lnotab_notes.txt @v3.10): pairs of (bytes the range covers,
 * unsigned; line delta, signed, -128 for a range without a line) describing consecutive ranges
 * from address 0; a range's line is co_firstlineno plus the deltas so far. */
static uint32_t line_310(const uint8_t *t, size_t len, LineCheckpoint s, uint64_t target, LineRecorder *rec)
{
        uint64_t start = s.addr;
        int64_t line = s.line;

        for (size_t i = s.pos; i + 1 < len; i += 2) {
                uint64_t end = start + t[i];
                int8_t delta = (int8_t)t[i + 1];
                bool has_line = delta != -128;

                record(rec, i, start, line);
                if (has_line)
                        line += delta;
                if (target >= start && target < end)
                        return line_value(has_line, line);
                start = end;
        }
        return 0;
}

/* Varints of the location table: 6-bit chunks, least significant first, 0x40 set in every chunk
 * but the last. false past the table's end or beyond 32 bits. */
static bool read_varint(const uint8_t *t, size_t len, size_t *i, uint32_t *ret)
{
        uint32_t v = 0;

        for (unsigned shift = 0; shift < 32; shift += 6) { /* at most 6 chunks carry 32 bits */
                if (*i >= len)
                        return false;
                v |= (uint32_t)(t[*i] & 0x3f) << shift;
                if (!(t[(*i)++] & 0x40)) {
                        *ret = v;
                        return true;
                }
        }
        return false;
}

static bool read_svarint(const uint8_t *t, size_t len, size_t *i, int64_t *ret)
{
        uint32_t u;

        if (!read_varint(t, len, i, &u))
                return false;
        *ret = u & 1 ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
        return true;
}

/* 3.11+ location table (PEP 657; InternalDocs/code_objects.md, Objects/locations.md): entries of
 * consecutive code unit ranges from 0, each starting with a byte 1CCCCLLL: LLL + 1 code units,
 * code CCCC saying what follows: 0-9 short form (line unchanged, 1 byte of columns), 10-12 one-line
 * form (line + code - 10, 2 bytes of columns), 13 no columns (svarint line delta), 14 long form
 * (svarint line delta, then end line delta, start and end column as varints), 15 no location.
 * Line deltas add up from co_firstlineno; an entry without location leaves the line as it is. */
static uint32_t line_locations(const uint8_t *t, size_t len, LineCheckpoint s, uint64_t target,
                               LineRecorder *rec)
{
        uint64_t start = s.addr;
        int64_t line = s.line;
        size_t i = s.pos;

        while (i < len) { /* every step consumes at least one byte */
                uint8_t first = t[i];
                unsigned code = (first >> 3) & 0xf, units = (first & 7) + 1;
                bool has_line = true;
                int64_t delta = 0;
                uint32_t skip;

                if (!(first & 0x80))
                        return 0; /* not the start of an entry: malformed */
                record(rec, i, start, line);
                i++;
                if (code <= 9)
                        i += 1;
                else if (code <= 12) {
                        delta = code - 10;
                        i += 2;
                } else if (code == 13) {
                        if (!read_svarint(t, len, &i, &delta))
                                return 0;
                } else if (code == 14) {
                        if (!read_svarint(t, len, &i, &delta))
                                return 0;
                        for (unsigned k = 0; k < 3; k++) /* end line, start column, end column */
                                if (!read_varint(t, len, &i, &skip))
                                        return 0;
                } else
                        has_line = false;
                line += delta;
                if (target >= start && target < start + units)
                        return line_value(has_line, line);
                start += units;
        }
        return 0;
}

/* The line of instr, walking from checkpoint s (recording checkpoints into rec if given). */
static uint32_t line_walk(PythonLineTable kind, const uint8_t *table, size_t len, LineCheckpoint s,
                          uint32_t instr, LineRecorder *rec)
{
        switch (kind) {
        case PYTHON_LINE_TABLE_LNOTAB:
                return line_lnotab(table, len, s, instr, rec);
        case PYTHON_LINE_TABLE_LINETABLE_310:
                return line_310(table, len, s, (uint64_t)instr * 2, rec); /* bytes, from code units */
        case PYTHON_LINE_TABLE_LOCATIONS:
                return line_locations(table, len, s, instr, rec);
        }
        return 0;
}

/* The address instr is at in the table's own unit. */
static uint64_t table_addr(PythonLineTable kind, uint32_t instr)
{
        return kind == PYTHON_LINE_TABLE_LINETABLE_310 ? (uint64_t)instr * 2 : instr;
}

uint32_t python_line_of(PythonLineTable kind, const uint8_t *table, size_t len, uint32_t first_line,
                        uint32_t instr)
{
        if (!table || instr == PYTHON_CODE_INSTR_UNKNOWN)
                return 0;
        return line_walk(kind, table, len, (LineCheckpoint){.line = first_line}, instr, NULL);
}

/* The checkpoints of a table, into cps (LINE_CHECKPOINTS_MAX); their number. */
static size_t line_checkpoints(PythonLineTable kind, const uint8_t *table, size_t len, uint32_t first_line,
                               LineCheckpoint *cps)
{
        LineRecorder rec = {.cps = cps, .max = LINE_CHECKPOINTS_MAX};

        if (len < LINE_CHECKPOINT_MIN_TABLE)
                return 0;
        (void)line_walk(kind, table, len, (LineCheckpoint){.line = first_line}, UINT32_MAX - 1, &rec);
        return rec.n;
}

/* The line of instr from the last checkpoint at or before it. */
static uint32_t line_from_checkpoints(PythonLineTable kind, const uint8_t *table, size_t len,
                                      uint32_t first_line, const LineCheckpoint *cps, size_t n,
                                      uint32_t instr)
{
        LineCheckpoint s = {.line = first_line};
        uint64_t addr = table_addr(kind, instr);
        size_t lo = 0, hi = n;

        if (instr == PYTHON_CODE_INSTR_UNKNOWN)
                return 0;
        while (lo < hi) { /* the first checkpoint past addr */
                size_t mid = lo + (hi - lo) / 2;
                if (cps[mid].addr <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo > 0)
                s = cps[lo - 1];
        return line_walk(kind, table, len, s, instr, NULL);
}

/* --- reading the process ---------------------------------------------------------------------- */

/* End of user addresses: 2^47 on x86-64, 2^48 on arm64 (48-bit virtual addresses, as Debian's
 * arm64 kernels give user space). */
#if defined(__aarch64__)
#define USER_ADDR_END (1ULL << 48)
#else
#define USER_ADDR_END (1ULL << 47)
#endif

/* Only where reading cannot wait on a file a user serves (remote-memory.h): a code object in
 * memory mapped from a FUSE file is refused (-EFAULT, counted as untrusted), never read. */
static int read_mem(PythonCodeCache *c, pid_t pid, uint64_t addr, void *buf, size_t n)
{
        uint64_t now;
        int r;

        if (n == 0)
                return 0;
        /* User addresses end at USER_ADDR_END; anything else (or a range wrapping) is no object. */
        if (addr == 0 || addr >= USER_ADDR_END || n > USER_ADDR_END - addr)
                return -EFAULT;
        now = now_ns(CLOCK_MONOTONIC);
        for (unsigned attempt = 0;; attempt++) { /* at most twice: see below */
                if (!c->mem || c->mem_pid != pid || now - c->mem_ns > REMOTE_SNAPSHOT_NS) {
                        c->mem = remote_memory_free(c->mem);
                        r = remote_memory_open(pid, &c->mem);
                        if (r < 0)
                                return r;
                        c->mem_pid = pid;
                        c->mem_ns = now;
                }
                r = remote_memory_read(c->mem, addr, buf, n);
                /* A process that just started maps its heap after the snapshot: outside it, a
                 * snapshot older than REMOTE_RETAKE_NS is taken again once. */
                if (r != -EFAULT || attempt > 0 || now - c->mem_ns < REMOTE_RETAKE_NS)
                        break;
                c->mem_ns = 0;
        }
        if (r == -ENOTSUP) {
                c->n_untrusted++;
                return -EFAULT;
        }
        return r;
}

static uint64_t get_u64(const uint8_t *p, uint16_t off)
{
        uint64_t v;
        memcpy(&v, p + off, sizeof(v));
        return v;
}

static uint32_t get_u32(const uint8_t *p, size_t off)
{
        uint32_t v;
        memcpy(&v, p + off, sizeof(v));
        return v;
}

/* ob_type of every object in the default (GIL) build of 3.8-3.14: after Py_ssize_t ob_refcnt. */
#define PY_OB_TYPE 8

static size_t utf8_put(char *out, uint32_t cp)
{
        if (cp >= 0xd800 && cp <= 0xdfff)
                cp = 0xfffd; /* lone surrogates (possible in a str) are no UTF-8 */
        if (cp < 0x80) {
                out[0] = (char)cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char)(0xc0 | cp >> 6);
                out[1] = (char)(0x80 | (cp & 0x3f));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char)(0xe0 | cp >> 12);
                out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
                out[2] = (char)(0x80 | (cp & 0x3f));
                return 3;
        }
        out[0] = (char)(0xf0 | cp >> 18);
        out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        return 4;
}

/* The str at addr as UTF-8 in a new string. Code objects' names and file names are compact str
 * (text right after the header); kind says 1, 2 or 4 bytes per character (Latin-1, UCS-2, UCS-4).
 * -EBADMSG: not a str of this runtime, or not compact. */
static int read_str(PythonCodeCache *c, pid_t pid, const PythonOffsets *o, uint64_t str_type_addr,
                    uint64_t addr, char **ret)
{
        uint8_t hdr[256];
        uint64_t length;
        uint32_t state;
        unsigned kind;
        bool ascii;
        size_t n, data;
        _cleanup_free_ uint8_t *raw = NULL;
        _cleanup_free_ char *out = NULL;
        size_t k = 0;
        int r;

        if (o->unicode_ascii_data > sizeof(hdr) || o->unicode_state + 4 > o->unicode_ascii_data ||
            o->unicode_length + 8 > o->unicode_ascii_data)
                return -EINVAL;
        /* The shorter header first: an ASCII str's text follows it and may end with its mapping. */
        r = read_mem(c, pid, addr, hdr, o->unicode_ascii_data);
        if (r < 0)
                return r == -EFAULT ? -EBADMSG : r;
        if (get_u64(hdr, PY_OB_TYPE) != str_type_addr)
                return -EBADMSG;
        state = get_u32(hdr, o->unicode_state);
        length = get_u64(hdr, o->unicode_length);
        kind = (state >> o->unicode_kind_shift) & 7;
        ascii = (state >> o->unicode_ascii_bit) & 1;
        if (!((state >> o->unicode_compact_bit) & 1) || (kind != 1 && kind != 2 && kind != 4) ||
            (ascii && kind != 1) || length > (1ULL << 40))
                return -EBADMSG;
        n = length;
        if (n > PYTHON_CODE_MAX_NAME) {
                n = PYTHON_CODE_MAX_NAME;
                c->n_names_truncated++;
        }
        data = ascii ? o->unicode_ascii_data : o->unicode_compact_data;
        raw = malloc(n * kind + 1);
        out = malloc(n * 4 + 1);
        if (!raw || !out)
                return -ENOMEM;
        r = read_mem(c, pid, addr + data, raw, n * kind);
        if (r < 0)
                return r == -EFAULT ? -EBADMSG : r;
        for (size_t i = 0; i < n; i++) {
                uint32_t cp = kind == 1   ? raw[i]
                              : kind == 2 ? (uint32_t)raw[2 * i] | (uint32_t)raw[2 * i + 1] << 8
                                          : get_u32(raw, 4 * i);

                /* A NUL would cut the name; the rest cannot be in a str of this kind. */
                if (cp == 0 || cp > 0x10ffff || (ascii && cp >= 0x80))
                        return -EBADMSG;
                k += utf8_put(out + k, cp);
        }
        out[k] = 0;
        *ret = TAKE_PTR(out);
        return 0;
}

/* The bytes object at addr (a line table): its size, and its contents if at most max bytes.
 * Bytes objects are not type-checked (PyBytes_Type is not passed in); the size must be sane. */
static int read_bytes(PythonCodeCache *c, pid_t pid, const PythonOffsets *o, uint64_t addr, size_t max,
                      uint8_t **ret, size_t *ret_len)
{
        uint8_t hdr[64];
        uint64_t size;
        uint8_t *buf;
        int r;

        if (o->bytes_ob_sval > sizeof(hdr) || o->var_ob_size + 8 > o->bytes_ob_sval)
                return -EINVAL;
        r = read_mem(c, pid, addr, hdr, o->bytes_ob_sval);
        if (r < 0)
                return r == -EFAULT ? -EBADMSG : r;
        size = get_u64(hdr, o->var_ob_size);
        if (size > (1ULL << 40))
                return -EBADMSG;
        *ret_len = size;
        if (size > max) {
                *ret = NULL;
                return 0;
        }
        buf = malloc(size ?: 1);
        if (!buf)
                return -ENOMEM;
        r = read_mem(c, pid, addr + o->bytes_ob_sval, buf, size);
        if (r < 0) {
                free(buf);
                return r == -EFAULT ? -EBADMSG : r;
        }
        *ret = buf;
        return 0;
}

/* The second word of every object of 3.8-3.14's default build: ob_size of a variable-size object
 * (from 3.11, a code object's number of code units), co_argcount and co_posonlyargcount before. */
#define PY_OB_SIZE 16

int python_code_fingerprint_layout(const PythonOffsets *o, PythonFingerprintLayout *ret)
{
        const uint16_t N = PYTHON_OFFSET_NONE;
        /* Most telling first: a file name and qualified name set a code object apart from every
         * other but its own earlier copies; the line table and size from those. */
        uint16_t words[] = {
                o->code_filename,
                o->code_qualname != N ? o->code_qualname : o->code_name,
                o->line_table == PYTHON_LINE_TABLE_LNOTAB ? o->code_lnotab : o->code_linetable,
                o->code_code,
                PY_OB_SIZE,
                o->code_qualname != N ? o->code_name : N,
        };
        PythonFingerprintLayout l = {.u32 = PROFD_PY_FP_NONE};
        unsigned start = o->code_firstlineno, end = o->code_firstlineno + 4u, n = 0;

        _Static_assert(ELEMENTSOF(words) == PROFD_PY_FP_WORDS, "one slot per member");
        if (o->code_firstlineno == N || words[0] == N || words[1] == N || words[2] == N)
                return -EINVAL;
        memset(l.words, PROFD_PY_FP_NONE, sizeof(l.words));
        /* Members are taken in order while the bytes they span fit one BPF read. */
        for (size_t i = 0; i < ELEMENTSOF(words); i++) {
                unsigned s = words[i] < start ? words[i] : start,
                         e = words[i] + 8u > end ? words[i] + 8u : end;

                if (words[i] == N)
                        continue;
                if (e - s > PROFD_PY_FP_READ_MAX) {
                        if (i < 3)
                                return -EINVAL;
                        continue;
                }
                start = s;
                end = e;
                words[n++] = words[i];
        }
        l.start = start;
        l.len = end - start;
        l.u32 = o->code_firstlineno - start;
        for (unsigned i = 0; i < n; i++)
                l.words[i] = words[i] - start;
        *ret = l;
        return 0;
}

static uint32_t fingerprint_of(const uint8_t *object, const PythonFingerprintLayout *l)
{
        uint8_t buf[PROFD_PY_FP_READ_MAX + 8] = {};

        memcpy(buf, object + l->start, l->len);
        return profd_py_fingerprint(buf, l->words, l->u32);
}

int python_code_fingerprint_at(pid_t pid, const PythonOffsets *o, uint64_t addr, uint32_t *ret)
{
        _cleanup_(remote_memory_freep) RemoteMemory *m = NULL;
        uint8_t buf[PROFD_PY_FP_READ_MAX + 8] = {};
        PythonFingerprintLayout l;
        int r;

        r = python_code_fingerprint_layout(o, &l);
        if (r < 0)
                return r;
        r = remote_memory_open(pid, &m);
        if (r < 0)
                return r;
        r = remote_memory_read(m, addr + l.start, buf, l.len);
        if (r < 0)
                return r;
        *ret = profd_py_fingerprint(buf, l.words, l.u32);
        return 0;
}

static int read_code(PythonCodeCache *c, pid_t pid, uint64_t start_time, const PythonOffsets *o,
                     uint64_t code_type_addr, uint64_t str_type_addr, uint64_t code_addr, PythonCode **ret)
{
        _cleanup_free_ char *name = NULL, *file = NULL;
        _cleanup_free_ uint8_t *table = NULL;
        uint8_t hdr[512], again[512];
        uint16_t name_off, table_off, end = 0;
        size_t table_len = 0, name_len, file_len, n, n_cps;
        LineCheckpoint cps[LINE_CHECKPOINTS_MAX];
        PythonFingerprintLayout fl;
        uint8_t *p;
        uint64_t now_start;
        PythonCode *e;
        int32_t first_line;
        int r;

        r = python_code_fingerprint_layout(o, &fl);
        if (r < 0)
                return r;
        end = fl.start + fl.len;

        name_off = o->code_qualname != PYTHON_OFFSET_NONE ? o->code_qualname : o->code_name;
        table_off = o->line_table == PYTHON_LINE_TABLE_LNOTAB ? o->code_lnotab : o->code_linetable;
        for (size_t i = 0; i < 4; i++) {
                uint16_t f = (uint16_t[]){name_off, table_off, o->code_filename, o->code_firstlineno}[i];

                if (f == PYTHON_OFFSET_NONE)
                        return -EINVAL;
                end = f + 8 > end ? f + 8 : end;
        }
        if (end > sizeof(hdr))
                return -EINVAL;
        r = read_mem(c, pid, code_addr, hdr, end);
        if (r < 0)
                return r;
        if (get_u64(hdr, PY_OB_TYPE) != code_type_addr)
                return -EBADMSG;
        first_line = (int32_t)get_u32(hdr, o->code_firstlineno);
        if (first_line < 0)
                return -EBADMSG;
        r = read_str(c, pid, o, str_type_addr, get_u64(hdr, name_off), &name);
        if (r < 0)
                return r;
        r = read_str(c, pid, o, str_type_addr, get_u64(hdr, o->code_filename), &file);
        if (r < 0)
                return r;
        r = read_bytes(c, pid, o, get_u64(hdr, table_off), PYTHON_CODE_MAX_LINE_TABLE, &table, &table_len);
        if (r < 0)
                return r;
        /* The object may have been freed while its names and line table were read, and they
         * reused by another's (a module's code object goes once its import ran): what was read is
         * its own only if the object is still there, the same. */
        r = read_mem(c, pid, code_addr, again, end);
        if (r < 0)
                return r;
        if (get_u64(again, PY_OB_TYPE) != code_type_addr ||
            fingerprint_of(again, &fl) != fingerprint_of(hdr, &fl))
                return -ESTALE;

        /* Read from the process the caller means, not from one that took its pid meanwhile. */
        r = process_read_start_time(pid, &now_start);
        if (r < 0 || now_start != start_time)
                return -ESRCH;

        name_len = strlen(name) + 1;
        file_len = strlen(file) + 1;
        n_cps = table ? line_checkpoints(o->line_table, table, table_len, (uint32_t)first_line, cps) : 0;
        n = sizeof(*e) + n_cps * sizeof(LineCheckpoint) + (table ? table_len : 0) + name_len + file_len;
        e = calloc(1, n);
        if (!e)
                return -ENOMEM;
        *e = (PythonCode){
                .pid = pid,
                .start_time = start_time,
                .addr = code_addr,
                .fp = fingerprint_of(hdr, &fl),
                .kind = o->line_table,
                .first_line = (uint32_t)first_line,
                .no_table = !table,
                .table_len = table ? table_len : 0,
                .bytes = n,
        };
        p = (uint8_t *)(e + 1); /* sizeof(*e) keeps the checkpoints aligned */
        e->cps = memcpy_safe(p, cps, n_cps * sizeof(LineCheckpoint));
        e->n_cps = n_cps;
        p += n_cps * sizeof(LineCheckpoint);
        e->table = memcpy_safe(p, table, e->table_len);
        p += e->table_len;
        e->name = memcpy(p, name, name_len);
        e->file = memcpy(p + name_len, file, file_len);
        if (!table)
                c->n_tables_too_large++;
        *ret = e;
        return 0;
}

static void fill(PythonCodeCache *c, const PythonCode *e, uint32_t instr, PythonFrameInfo *ret)
{
        *ret = (PythonFrameInfo){
                .name = e->name,
                .file = e->file,
                .line = e->no_table ? 0
                                    : line_from_checkpoints(e->kind, e->table, e->table_len, e->first_line,
                                                            e->cps, e->n_cps, instr),
                .first_line = e->first_line,
        };
        if (ret->line == 0)
                c->n_lines_unknown++;
}

/* A code object that cannot be the one sampled any more: its memory holds another one now.
 * Remembered (a small entry, within the cache's bounds) so that the drains and later reports do
 * not read it again and again while the loop waits. */
static void remember_failure(PythonCodeCache *c, pid_t pid, uint64_t start_time, uint64_t addr, uint32_t fp,
                             int error)
{
        PythonCode *e = calloc(1, sizeof(*e));

        if (!e)
                return;
        *e = (PythonCode){
                .pid = pid,
                .start_time = start_time,
                .addr = addr,
                .fp = fp,
                .error = error,
                .no_table = true,
                .bytes = sizeof(*e),
        };
        insert(c, e);
}

int python_code_lookup(PythonCodeCache *c, pid_t pid, uint64_t start_time, uint64_t code_addr, uint32_t fp,
                       uint32_t instr, PythonFrameInfo *ret)
{
        PythonCode *e = find(c, pid, start_time, code_addr, fp);

        if (e && e->error) {
                c->n_known_bad++;
                return e->error;
        }
        if (!e) {
                c->n_lookup_miss++;
                return -ENOENT;
        }
        c->n_cached++;
        fill(c, e, instr, ret);
        return 0;
}

int python_code_resolve(PythonCodeCache *c, pid_t pid, uint64_t start_time, const PythonOffsets *o,
                        uint64_t code_type_addr, uint64_t str_type_addr, uint64_t code_addr, uint32_t fp,
                        uint32_t instr, PythonFrameInfo *ret)
{
        PythonCode *e;
        int r;

        if (!o)
                return -EINVAL;
        if (fp == 0) {
                c->n_errors[ERR_NO_FINGERPRINT]++;
                return -ENODATA;
        }
        e = find(c, pid, start_time, code_addr, fp);
        if (e) {
                if (e->error) {
                        c->n_known_bad++;
                        return e->error;
                }
                c->n_cached++;
                if (ret)
                        fill(c, e, instr, ret);
                return 0;
        }
        r = read_code(c, pid, start_time, o, code_type_addr, str_type_addr, code_addr, &e);
        if (r < 0) {
                c->n_errors[r == -ESRCH                   ? ERR_GONE
                            : r == -EFAULT                ? ERR_UNREADABLE
                            : r == -EBADMSG               ? ERR_BAD_OBJECT
                            : r == -EPERM || r == -EACCES ? ERR_PERMISSION
                            : r == -ESTALE                ? ERR_REPLACED
                                                          : ERR_OTHER]++;
                /* Only what is certain: memory outside the snapshot (EFAULT, and EBADMSG for a
                 * string there) may be mapped since; a later read can succeed. */
                if (r == -ESTALE)
                        remember_failure(c, pid, start_time, code_addr, fp, r);
                return r;
        }
        if (e->fp != fp) {
                /* Not the object that was sampled: that one was freed and its memory holds
                 * another now. Kept under its own fingerprint, for the frames that ran it. */
                c->n_errors[ERR_REPLACED]++;
                if (find(c, pid, start_time, code_addr, e->fp))
                        free(e);
                else
                        insert(c, e);
                remember_failure(c, pid, start_time, code_addr, fp, -ESTALE);
                return -ESTALE;
        }
        c->n_read++;
        insert(c, e);
        if (ret)
                fill(c, e, instr, ret);
        return 0;
}

void python_code_cache_write_metrics(const PythonCodeCache *c, FILE *f)
{
        static const char *const error_names[_ERR_MAX] = {
                [ERR_GONE] = "gone",
                [ERR_UNREADABLE] = "unreadable",
                [ERR_BAD_OBJECT] = "bad_object",
                [ERR_PERMISSION] = "permission",
                [ERR_REPLACED] = "replaced",
                [ERR_NO_FINGERPRINT] = "no_fingerprint",
                [ERR_OTHER] = "other",
        };
        char help[160];

        metric_gauge(f, "profd_python_code_entries",
                     "Python code objects whose names and line tables are kept.",
                     c->n_entries - c->n_failed);
        metric_gauge(
                f, "profd_python_code_failures_remembered",
                "Code objects (address and fingerprint) found replaced by another code object, remembered "
                "so that they are not read again.",
                c->n_failed);
        metric_gauge(f, "profd_python_code_bytes",
                     "Memory of the kept code objects (names, line tables, index).",
                     python_code_cache_bytes(c));
        metric_labelled(f, "profd_python_code_lookups_total", "counter",
                        "Python frames named: from the cache, read from the process, or not cached when the "
                        "process could not be read any more, or known not to be readable as the code object "
                        "sampled (a failed read remembered).",
                        "result", (const char *const[]){"cache", "read", "miss", "known_bad"},
                        (const uint64_t[]){c->n_cached, c->n_read, c->n_lookup_miss, c->n_known_bad}, 4);
        metric_labelled(
                f, "profd_python_code_errors_total", "counter",
                "Python frames whose code object could not be read: process gone, address unreadable, "
                "memory that is no code object of the runtime, no permission, replaced by another code "
                "object since the sample (its fingerprint differs), no fingerprint taken at the sample. "
                "Such frames stay unnamed.",
                "reason", error_names, c->n_errors, _ERR_MAX);
        metric_counter(f, "profd_python_code_evictions_total",
                       "Code objects dropped, least recently used first, to stay within the cache's bounds.",
                       c->n_evicted);
        snprintf(help, sizeof(help),
                 "Code objects kept without their line table (over %u bytes): their lines are unknown.",
                 PYTHON_CODE_MAX_LINE_TABLE);
        metric_counter(f, "profd_python_code_line_tables_too_large_total", help, c->n_tables_too_large);
        snprintf(help, sizeof(help), "Names and file names cut at %u characters.", PYTHON_CODE_MAX_NAME);
        metric_counter(f, "profd_python_code_names_truncated_total", help, c->n_names_truncated);
        metric_counter(
                f, "profd_python_code_lines_unknown_total",
                "Python frames named without a line: the instruction index saturated, no line for the "
                "instruction, or no line table kept.",
                c->n_lines_unknown);
        metric_counter(
                f, "profd_python_code_reads_refused_total",
                "Reads of code objects refused because the memory is a mapping of a file on FUSE or a "
                "network filesystem (a read could wait on whoever serves it).",
                c->n_untrusted);
}
