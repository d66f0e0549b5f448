/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/v8-lines.h"
#include "runtimes/v8-objects.h"
#include "util/macro.h"

/* Tagged words of a SharedFunctionInfo, and of its InterpreterData or baseline Code, looked at for
 * the BytecodeArray: its function data is among the first few members in every V8 seen (10.2:
 * function_data second; 13.6: trusted_function_data first), whose name the metadata of V8 12+ no
 * longer gives. */
#define V8_SFI_SCAN_WORDS 8

/* Source bytes read a remote read, and cons string levels followed (a script's source is one flat
 * string, or a short concatenation). */
#define V8_SOURCE_CHUNK (16 * 1024)
#define V8_SOURCE_DEPTH_MAX 8

static uint64_t untag(const V8Offsets *o, uint64_t obj)
{
        if (!v8_is_heap_object(o, obj) || obj < 4096)
                return 0;
        return obj - (uint64_t)o->heap_object_tag;
}

static int type_of(const RemoteMemory *m, const V8Offsets *o, uint64_t obj, int32_t *ret)
{
        uint64_t base = untag(o, obj), map, map_base;
        uint16_t type;
        int r;

        if (!base)
                return -EBADMSG;
        r = remote_memory_read(m, base + o->heap_object_map, &map, sizeof(map));
        if (r < 0)
                return r;
        map_base = untag(o, map);
        if (!map_base)
                return -EBADMSG;
        r = remote_memory_read(m, map_base + o->map_instance_type, &type, sizeof(type));
        if (r < 0)
                return r;
        *ret = type;
        return 0;
}

static bool is_type(int32_t type, int32_t want)
{
        return want != V8_OFFSET_NONE && type == want;
}

void v8_line_table_done(V8LineTable *t)
{
        free(t->entries);
        *t = (V8LineTable){};
}

uint32_t v8_line_table_find(const V8LineTable *t, uint32_t offset)
{
        size_t lo = 0, hi = t->n;

        /* the last entry at or before offset */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (t->entries[mid].offset <= offset)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo ? t->entries[lo - 1].line : 0;
}

int v8_bytecode_offset(const V8Offsets *o, uint32_t raw, uint32_t *ret)
{
        int64_t first;

        if (o->bytecode_array_data == V8_OFFSET_NONE)
                return -EOPNOTSUPP;
        first = (int64_t)o->bytecode_array_data - o->heap_object_tag;
        if ((int64_t)raw < first)
                return -ERANGE;
        *ret = (uint32_t)((int64_t)raw - first);
        return 0;
}

static bool words_hold(const uint64_t *w, size_t n, uint64_t v)
{
        for (size_t i = 0; i < n; i++)
                if (w[i] == v)
                        return true;
        return false;
}

int v8_bytecode_belongs(const RemoteMemory *m, const V8Offsets *o, uint64_t sfi, uint64_t bca)
{
        uint64_t w[V8_SFI_SCAN_WORDS], inner[V8_SFI_SCAN_WORDS];
        int32_t type;
        int r;

        if (o->type_bytecode_array == V8_OFFSET_NONE)
                return -EOPNOTSUPP;
        r = type_of(m, o, bca, &type);
        if (r < 0)
                return r;
        if (type != o->type_bytecode_array)
                return -EMEDIUMTYPE;
        if (!untag(o, sfi))
                return -EBADMSG;
        r = remote_memory_read(m, untag(o, sfi), w, sizeof(w));
        if (r < 0)
                return r;
        if (words_hold(w + 1, V8_SFI_SCAN_WORDS - 1, bca))
                return 0;
        /* Baseline (Sparkplug) code or InterpreterData in between: one level down. */
        for (size_t i = 1; i < V8_SFI_SCAN_WORDS; i++) {
                if (!untag(o, w[i]) || type_of(m, o, w[i], &type) < 0)
                        continue;
                if (!is_type(type, o->type_code) && !is_type(type, o->type_interpreter_data))
                        continue;
                if (remote_memory_read(m, untag(o, w[i]), inner, sizeof(inner)) < 0)
                        continue;
                if (words_hold(inner + 1, V8_SFI_SCAN_WORDS - 1, bca))
                        return 0;
        }
        return -EMEDIUMTYPE;
}

/* Where the BytecodeArray keeps its source position table: after constant_pool and handler_table
 * (V8 10.2 and 11.3: FixedArrayBase's length, then those), or right after its wrapper (V8 12+,
 * a trusted object: length, wrapper, source_position_table, handler_table, constant_pool). */
static int64_t positions_member(const V8Offsets *o)
{
        if (o->bytecode_array_wrapper != V8_OFFSET_NONE)
                return (int64_t)o->bytecode_array_wrapper + 8;
        if (o->fixed_array_length == V8_OFFSET_NONE)
                return -1;
        return (int64_t)o->fixed_array_length + 3 * 8;
}

int v8_bytecode_identity(const RemoteMemory *m, const V8Offsets *o, uint64_t bca, uint64_t *ret_map,
                         uint64_t *ret_length, uint64_t *ret_positions)
{
        int64_t pos = positions_member(o);
        uint64_t base = untag(o, bca), w[8];
        int r;

        if (pos < 0 || pos + 8 > (int64_t)sizeof(w) || o->fixed_array_length + 8 > (int32_t)sizeof(w) ||
            o->heap_object_map != 0)
                return -EOPNOTSUPP;
        if (!base)
                return -EBADMSG;
        r = remote_memory_read(m, base, w, (size_t)pos + 8);
        if (r < 0)
                return r;
        *ret_map = w[0];
        *ret_length = w[o->fixed_array_length / 8];
        *ret_positions = w[pos / 8];
        return 0;
}

int v8_vlq_read(const uint8_t *b, size_t n, size_t *i, uint64_t *ret)
{
        uint64_t v = 0;
        unsigned shift = 0;
        uint8_t c;

        do {
                if (*i >= n || shift > 63)
                        return -EBADMSG;
                c = b[(*i)++];
                v |= (uint64_t)(c & 0x7f) << shift;
                shift += 7;
        } while (c & 0x80);
        *ret = v;
        return 0;
}

static int read_varint(const uint8_t *b, size_t n, size_t *i, int64_t *ret)
{
        uint64_t v;
        int r = v8_vlq_read(b, n, i, &v);

        if (r < 0)
                return r;
        *ret = (int64_t)(v >> 1) ^ -(int64_t)(v & 1); /* zigzag */
        return 0;
}

int v8_positions_decode(const uint8_t *bytes, size_t n, uint32_t *ret_code_offsets,
                        int32_t *ret_script_offsets, size_t max)
{
        int64_t code = 0, source = 0;
        size_t i = 0, out = 0;

        while (i < n && out < max) {
                int64_t dc, ds;

                if (read_varint(bytes, n, &i, &dc) < 0 || read_varint(bytes, n, &i, &ds) < 0)
                        return -EBADMSG;
                code += dc >= 0 ? dc : -(dc + 1); /* the sign says statement or expression */
                source += ds;
                if (code < 0 || code > UINT32_MAX)
                        return -EBADMSG;
                if (source & 1)
                        continue; /* external (wasm) position */
                ret_code_offsets[out] = (uint32_t)code;
                ret_script_offsets[out] = (int32_t)((source >> 1) & ((1LL << 30) - 1)) - 1;
                out++;
        }
        return (int)out;
}

int v8_positions_at(const uint8_t *bytes, size_t n, uint32_t offset, int64_t *ret)
{
        int64_t code = 0, source = 0;
        size_t i = 0;
        bool found = false;

        while (i < n) {
                int64_t dc, ds;

                if (read_varint(bytes, n, &i, &dc) < 0 || read_varint(bytes, n, &i, &ds) < 0)
                        return -EBADMSG;
                code += dc >= 0 ? dc : -(dc + 1);
                source += ds;
                if (code < 0 || code > (int64_t)offset)
                        break; /* entries are in code offset order */
                if (source & 1)
                        continue; /* external (wasm) position */
                *ret = source;
                found = true;
        }
        return found ? 0 : -ENODATA;
}

/* The line ends V8 computed (Script::line_ends, a FixedArray of Smis), read whole. */
static int read_v8_line_ends(const RemoteMemory *m, const V8Offsets *o, uint64_t script, V8LineEnds *ret)
{
        _cleanup_free_ uint64_t *v = NULL;
        uint64_t ends, len_word;
        int64_t len;
        int32_t type;
        int r;

        if (o->script_line_ends == V8_OFFSET_NONE || o->type_fixed_array == V8_OFFSET_NONE ||
            o->fixed_array_length == V8_OFFSET_NONE || o->fixed_array_data == V8_OFFSET_NONE)
                return -ENOLINK;
        r = remote_memory_read(m, untag(o, script) + o->script_line_ends, &ends, sizeof(ends));
        if (r < 0)
                return r;
        if (!untag(o, ends))
                return -ENOLINK; /* undefined or a Smi: not computed */
        r = type_of(m, o, ends, &type);
        if (r < 0)
                return r;
        if (type != o->type_fixed_array)
                return -ENOLINK;
        r = remote_memory_read(m, untag(o, ends) + o->fixed_array_length, &len_word, sizeof(len_word));
        if (r < 0)
                return r;
        if (!v8_is_smi(o, len_word))
                return -EMEDIUMTYPE;
        len = v8_smi_value(o, len_word);
        if (len <= 0)
                return -ENOLINK;
        if (len > V8_LINE_ENDS_MAX)
                return -E2BIG;
        v = malloc((size_t)len * sizeof(*v));
        ret->ends = malloc((size_t)len * sizeof(*ret->ends));
        if (!v || !ret->ends)
                return -ENOMEM;
        r = remote_memory_read(m, untag(o, ends) + o->fixed_array_data, v, (size_t)len * sizeof(*v));
        if (r < 0)
                return r;
        for (int64_t i = 0; i < len; i++) {
                int64_t e = v8_smi_value(o, v[i]);

                if (!v8_is_smi(o, v[i]) || e < 0 || e > UINT32_MAX)
                        return -EMEDIUMTYPE;
                ret->ends[i] = (uint32_t)e;
        }
        ret->n = (size_t)len;
        return 0;
}

static int push_end(V8LineEnds *e, size_t *cap, uint64_t pos)
{
        if (e->n >= V8_LINE_ENDS_MAX || pos > UINT32_MAX)
                return -E2BIG;
        if (e->n == *cap) {
                size_t c = *cap ? *cap * 2 : 1024;
                uint32_t *v = realloc(e->ends, c * sizeof(*v));

                if (!v)
                        return -ENOMEM;
                e->ends = v;
                *cap = c;
        }
        e->ends[e->n++] = (uint32_t)pos;
        return 0;
}

/* Appends the positions of the line feeds of the string at str (UTF-16 units from *pos on). */
static int scan_string(const RemoteMemory *m, const V8Offsets *o, uint64_t str, V8LineEnds *e, size_t *cap,
                       uint64_t *pos, unsigned depth)
{
        uint8_t chunk[V8_SOURCE_CHUNK];
        uint64_t base = untag(o, str);
        int32_t type, len;
        uint32_t repr;
        int r;

        if (depth > V8_SOURCE_DEPTH_MAX || !base)
                return -EBADMSG;
        r = type_of(m, o, str, &type);
        if (r < 0)
                return r;
        if (type >= o->first_nonstring_type)
                return -EMEDIUMTYPE;
        r = remote_memory_read(m, base + o->string_length, &len, sizeof(len));
        if (r < 0)
                return r;
        if (len < 0 || *pos + (uint64_t)len > V8_SOURCE_MAX)
                return -E2BIG;
        repr = (uint32_t)type & (uint32_t)o->string_representation_mask;
        if (repr == (uint32_t)o->cons_string_tag && o->cons_first != V8_OFFSET_NONE &&
            o->cons_second != V8_OFFSET_NONE) {
                uint64_t first, second;

                if ((r = remote_memory_read(m, base + o->cons_first, &first, sizeof(first))) < 0 ||
                    (r = remote_memory_read(m, base + o->cons_second, &second, sizeof(second))) < 0)
                        return r;
                r = scan_string(m, o, first, e, cap, pos, depth + 1);
                return r < 0 ? r : scan_string(m, o, second, e, cap, pos, depth + 1);
        }
        if (o->thin_string_tag != V8_OFFSET_NONE && repr == (uint32_t)o->thin_string_tag &&
            o->thin_actual != V8_OFFSET_NONE) {
                uint64_t actual;

                if ((r = remote_memory_read(m, base + o->thin_actual, &actual, sizeof(actual))) < 0)
                        return r;
                return scan_string(m, o, actual, e, cap, pos, depth + 1);
        }
        /* sequential, or external (Node.js's own modules: the source in the node binary) */
        uint64_t chars;
        r = v8_string_chars(m, o, base, (uint32_t)type, &chars);
        if (r < 0)
                return r; /* sliced, uncached external */
        bool one_byte =
                ((uint32_t)type & (uint32_t)o->string_encoding_mask) == (uint32_t)o->one_byte_string_tag;
        size_t unit = one_byte ? 1 : 2, per_chunk = sizeof(chunk) / unit;

        for (size_t done = 0; done < (size_t)len;) {
                size_t n = (size_t)len - done < per_chunk ? (size_t)len - done : per_chunk;

                r = remote_memory_read(m, chars + done * unit, chunk, n * unit);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++) {
                        uint16_t c = one_byte ? chunk[i] : (uint16_t)(chunk[2 * i] | chunk[2 * i + 1] << 8);

                        /* V8's line terminators but a lone CR (String::CalculateLineEnds) */
                        if ((c == '\n' || c == 0x2028 || c == 0x2029) &&
                            (r = push_end(e, cap, *pos + done + i)) < 0)
                                return r;
                }
                done += n;
        }
        *pos += (uint64_t)len;
        return 0;
}

int v8_script_source(const RemoteMemory *m, const V8Offsets *o, uint64_t script, uint64_t *ret)
{
        int32_t type;
        int r;

        if (o->script_source == V8_OFFSET_NONE)
                return -EOPNOTSUPP;
        r = type_of(m, o, script, &type);
        if (r < 0)
                return r;
        if (type != o->type_script)
                return -EMEDIUMTYPE;
        return remote_memory_read(m, untag(o, script) + o->script_source, ret, sizeof(*ret));
}

int v8_script_line_ends(const RemoteMemory *m, const V8Offsets *o, uint64_t script, V8LineEnds *ret,
                        uint64_t *ret_source)
{
        V8LineEnds e = {};
        uint64_t source, pos = 0;
        size_t cap = 0;
        int r;

        r = v8_script_source(m, o, script, &source);
        if (r < 0)
                return r;
        *ret_source = source;
        r = read_v8_line_ends(m, o, script, &e);
        if (r == 0 || r != -ENOLINK) {
                if (r < 0)
                        v8_line_ends_done(&e);
                else
                        *ret = e;
                return r;
        }
        /* Not computed by V8 (it does on a stack trace's first need): from the source. */
        v8_line_ends_done(&e);
        r = scan_string(m, o, source, &e, &cap, &pos, 0);
        /* and the end of the source, as V8 counts it: the last line needs no terminator */
        if (r == 0)
                r = push_end(&e, &cap, pos);
        if (r < 0) {
                v8_line_ends_done(&e);
                return r;
        }
        *ret = e;
        return 0;
}

void v8_line_ends_done(V8LineEnds *e)
{
        free(e->ends);
        *e = (V8LineEnds){};
}

/* 1-based line of script offset pos: the first line whose end is at or after it; 0 past the end. */
static uint32_t line_of(const uint32_t *ends, size_t n, int32_t pos)
{
        size_t lo = 0, hi = n;

        if (pos < 0)
                return 0;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (ends[mid] < (uint32_t)pos)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < n ? (uint32_t)lo + 1 : 0;
}

uint32_t v8_line_of(const V8LineEnds *ends, int32_t pos)
{
        return line_of(ends->ends, ends->n, pos);
}

int v8_bytecode_lines(const RemoteMemory *m, const V8Offsets *o, uint64_t bca, const V8LineEnds *ends,
                      V8LineTable *ret)
{
        _cleanup_free_ uint8_t *bytes = NULL;
        _cleanup_free_ uint32_t *codes = NULL;
        _cleanup_free_ int32_t *sources = NULL;
        V8LineTable t = {};
        uint64_t len_word;
        int64_t len;
        int32_t type;
        int r, n;

        r = v8_bytecode_identity(m, o, bca, &t.map, &t.length, &t.positions);
        if (r < 0)
                return r;
        if (!untag(o, t.positions))
                return -ENODATA;
        r = type_of(m, o, t.positions, &type);
        if (r < 0)
                return r;
        /* undefined (not collected yet), exception (collecting failed): an Oddball */
        if (!is_type(type, o->type_byte_array) && !is_type(type, o->type_trusted_byte_array))
                return -ENODATA;
        r = remote_memory_read(m, untag(o, t.positions) + o->fixed_array_length, &len_word,
                               sizeof(len_word));
        if (r < 0)
                return r;
        if (!v8_is_smi(o, len_word))
                return -EMEDIUMTYPE;
        len = v8_smi_value(o, len_word);
        if (len < 0)
                return -EMEDIUMTYPE;
        if (len == 0)
                return -ENODATA; /* empty_byte_array: never has positions */
        if (len > V8_POSITION_TABLE_MAX)
                return -E2BIG;
        bytes = malloc((size_t)len);
        /* an entry takes two bytes at least */
        codes = calloc((size_t)len / 2 + 1, sizeof(*codes));
        sources = calloc((size_t)len / 2 + 1, sizeof(*sources));
        if (!bytes || !codes || !sources)
                return -ENOMEM;
        /* ByteArray: the bytes right after the length */
        r = remote_memory_read(m, untag(o, t.positions) + o->fixed_array_length + 8, bytes, (size_t)len);
        if (r < 0)
                return r;
        n = v8_positions_decode(bytes, (size_t)len, codes, sources, (size_t)len / 2 + 1);
        if (n < 0)
                return n;
        t.entries = calloc((size_t)n + 1, sizeof(*t.entries));
        if (!t.entries)
                return -ENOMEM;
        for (int i = 0; i < n; i++) {
                uint32_t line = line_of(ends->ends, ends->n, sources[i]);

                if (!line)
                        continue;
                /* table order is by offset; keep the last position an offset gets */
                if (t.n > 0 && t.entries[t.n - 1].offset == codes[i])
                        t.n--;
                if (t.n > 0 && t.entries[t.n - 1].offset > codes[i]) {
                        v8_line_table_done(&t);
                        return -EBADMSG;
                }
                t.entries[t.n++] = (V8LineEntry){.offset = codes[i], .line = line};
        }
        *ret = t;
        return 0;
}
