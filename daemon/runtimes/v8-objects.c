/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <string.h>

#include "runtimes/v8-objects.h"

/* Cons strings followed, at most: a name built by concatenation is a short tree; a deeper one is
 * refused rather than walked without bound. */
#define V8_CONS_DEPTH_MAX 8

/* ScopeInfo: context locals whose names are kept inline, below this many (V8 9.x-12.x:
 * kScopeInfoMaxInlinedLocalNamesSize); a count beyond V8_SCOPE_INFO_LOCALS_MAX is taken for a
 * misread. Slots looked at after the locals: saved class variable, receiver, the function
 * variable's name and slot, the inferred name. */
#define V8_SCOPE_INFO_INLINED_LOCALS 75
#define V8_SCOPE_INFO_LOCALS_MAX 65536
#define V8_SCOPE_INFO_SCAN 5

static int read_word(const RemoteMemory *m, uint64_t addr, uint64_t *ret)
{
        return remote_memory_read(m, addr, ret, sizeof(*ret));
}

/* The untagged address of a tagged heap object pointer, or 0. */
static uint64_t untag(const V8Offsets *o, uint64_t obj)
{
        if (!v8_is_heap_object(o, obj) || obj < 4096)
                return 0;
        return obj - (uint64_t)o->heap_object_tag;
}

/* The instance type of obj, and its map word. */
static int object_map_type(const RemoteMemory *m, const V8Offsets *o, uint64_t obj, uint64_t *ret_map,
                           uint16_t *ret)
{
        uint64_t base = untag(o, obj), map, map_base;
        int r;

        if (!base)
                return -EBADMSG;
        r = read_word(m, base + o->heap_object_map, &map);
        if (r < 0)
                return r;
        map_base = untag(o, map);
        if (!map_base)
                return -EBADMSG;
        *ret_map = map;
        return remote_memory_read(m, map_base + o->map_instance_type, ret, sizeof(*ret));
}

int v8_object_type(const RemoteMemory *m, const V8Offsets *o, uint64_t obj, uint16_t *ret)
{
        uint64_t map;

        return object_map_type(m, o, obj, &map, ret);
}

/* V8's instance type bit 4 on an external string: its data pointer is not cached in it (a short
 * external string); the same in every V8 since 7 (instance-type.h kUncachedExternalStringMask). Not
 * in the post-mortem metadata. */
#define V8_UNCACHED_EXTERNAL_STRING_BIT (1u << 4)

int v8_string_chars(const RemoteMemory *m, const V8Offsets *o, uint64_t base, uint32_t type, uint64_t *ret)
{
        uint32_t repr = type & (uint32_t)o->string_representation_mask;
        bool one_byte = (type & (uint32_t)o->string_encoding_mask) == (uint32_t)o->one_byte_string_tag;
        uint64_t data;
        int r;

        if (repr == (uint32_t)o->seq_string_tag) {
                *ret = base + (uint64_t)(one_byte ? o->seq_one_byte_chars : o->seq_two_byte_chars);
                return 0;
        }
        if (o->external_string_tag == V8_OFFSET_NONE || o->external_resource == V8_OFFSET_NONE ||
            repr != (uint32_t)o->external_string_tag || (type & V8_UNCACHED_EXTERNAL_STRING_BIT))
                return -EOPNOTSUPP;
        /* The resource's data, cached by V8 in the word after the resource pointer (a raw address:
         * Node.js builds V8 without its sandbox). */
        r = read_word(
                m, base + o->external_resource + (o->pointer_size != V8_OFFSET_NONE ? o->pointer_size : 8),
                &data);
        if (r < 0)
                return r;
        if (!data)
                return -EBADMSG;
        *ret = data;
        return 0;
}

/* Appends the string at str to buf (used bytes *pos, room size - 1). */
static int append_string(const RemoteMemory *m, const V8Offsets *o, uint64_t str, char *buf, size_t size,
                         size_t *pos, unsigned depth)
{
        uint16_t type;
        uint64_t base;
        int32_t len;
        int r;

        if (depth > V8_CONS_DEPTH_MAX)
                return -EBADMSG;
        r = v8_object_type(m, o, str, &type);
        if (r < 0)
                return r;
        if (type >= (uint32_t)o->first_nonstring_type)
                return -EMEDIUMTYPE;
        base = untag(o, str);
        r = remote_memory_read(m, base + o->string_length, &len, sizeof(len));
        if (r < 0)
                return r;
        if (len < 0)
                return -EBADMSG;

        uint32_t repr = type & (uint32_t)o->string_representation_mask;
        if (repr == (uint32_t)o->cons_string_tag) {
                uint64_t first, second;

                if (o->cons_first == V8_OFFSET_NONE || o->cons_second == V8_OFFSET_NONE)
                        return -EBADMSG;
                if ((r = read_word(m, base + o->cons_first, &first)) < 0 ||
                    (r = read_word(m, base + o->cons_second, &second)) < 0)
                        return r;
                r = append_string(m, o, first, buf, size, pos, depth + 1);
                if (r < 0 || *pos + 1 >= size)
                        return r;
                return append_string(m, o, second, buf, size, pos, depth + 1);
        }
        if (o->thin_string_tag != V8_OFFSET_NONE && repr == (uint32_t)o->thin_string_tag) {
                uint64_t actual;

                if (o->thin_actual == V8_OFFSET_NONE)
                        return -EBADMSG;
                if ((r = read_word(m, base + o->thin_actual, &actual)) < 0)
                        return r;
                return append_string(m, o, actual, buf, size, pos, depth + 1);
        }
        uint64_t chars;
        r = v8_string_chars(m, o, base, type, &chars);
        if (r < 0)
                return r == -EOPNOTSUPP ? -EBADMSG : r; /* sliced strings: not names V8 makes */

        size_t room = size - 1 - *pos, n = (size_t)len < room ? (size_t)len : room;
        if ((type & (uint32_t)o->string_encoding_mask) == (uint32_t)o->one_byte_string_tag) {
                r = remote_memory_read(m, chars, buf + *pos, n);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++) /* Latin-1 beyond ASCII: not UTF-8 */
                        if ((unsigned char)buf[*pos + i] >= 0x80 || buf[*pos + i] == 0)
                                buf[*pos + i] = '?';
        } else {
                uint16_t units[V8_NAME_MAX];

                if (n > V8_NAME_MAX)
                        n = V8_NAME_MAX;
                r = remote_memory_read(m, chars, units, n * 2);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++)
                        buf[*pos + i] = units[i] > 0 && units[i] < 0x80 ? (char)units[i] : '?';
        }
        *pos += n;
        buf[*pos] = 0;
        return 0;
}

int v8_read_string(const RemoteMemory *m, const V8Offsets *o, uint64_t str, char *buf, size_t size)
{
        size_t pos = 0;
        int r;

        if (size == 0)
                return -EINVAL;
        buf[0] = 0;
        r = append_string(m, o, str, buf, size, &pos, 0);
        if (r < 0)
                buf[0] = 0;
        return r;
}

/* The name a compiled function keeps in its ScopeInfo (V8 moves it there from the
 * SharedFunctionInfo): after the header come context_local_count names and as many infos (the
 * names are one hash table slot from V8_SCOPE_INFO_INLINED_LOCALS on), then optional Smi slots
 * (saved class variable, receiver) and the function variable's name (a String, or Smi 0 when the
 * function has none), or V8's inferred name. The first slot there that is a String is the name,
 * as V8's own SharedFunctionInfo::DebugName() would pick; any other object ends the search. The
 * flag bits saying which optional slots exist change between versions and are not in the
 * metadata: the types of the slots tell instead. */
static int scope_info_name(const RemoteMemory *m, const V8Offsets *o, uint64_t scope_info, char *buf,
                           size_t size)
{
        uint64_t base = untag(o, scope_info), count_word, slots[V8_SCOPE_INFO_SCAN];
        int64_t count, first;
        int r;

        if (o->scope_info_ncontextlocals == V8_OFFSET_NONE || o->scope_info_first_vars == V8_OFFSET_NONE)
                return -EBADMSG;
        /* Slot indices count from the first slot after the map. */
        r = read_word(m, base + 8 + 8 * (uint64_t)o->scope_info_ncontextlocals, &count_word);
        if (r < 0)
                return r;
        if (!v8_is_smi(o, count_word))
                return -EBADMSG;
        count = v8_smi_value(o, count_word);
        if (count < 0 || count > V8_SCOPE_INFO_LOCALS_MAX)
                return -EBADMSG;
        first = o->scope_info_first_vars + (count < V8_SCOPE_INFO_INLINED_LOCALS ? 2 * count : 1 + count);
        r = remote_memory_read(m, base + 8 + 8 * (uint64_t)first, slots, sizeof(slots));
        if (r < 0)
                return r;
        for (size_t i = 0; i < V8_SCOPE_INFO_SCAN; i++) {
                if (v8_is_smi(o, slots[i]))
                        continue;
                return v8_read_string(m, o, slots[i], buf, size);
        }
        return -EBADMSG;
}

static int shared_names(const RemoteMemory *m, const V8Offsets *o, uint64_t shared, V8FunctionNames *ret);

int v8_function_names(const RemoteMemory *m, const V8Offsets *o, uint64_t fn, V8FunctionNames *ret)
{
        uint64_t shared;
        uint16_t type;
        int r;

        ret->function[0] = ret->script[0] = 0;
        ret->identity = (V8FunctionIdentity){};
        r = object_map_type(m, o, fn, &ret->identity.map, &type);
        if (r < 0)
                return r;
        if (type != (uint32_t)o->type_js_function)
                return -EMEDIUMTYPE;
        r = read_word(m, untag(o, fn) + o->js_function_shared, &shared);
        if (r < 0)
                return r;
        return shared_names(m, o, shared, ret);
}

int v8_shared_names(const RemoteMemory *m, const V8Offsets *o, uint64_t shared, V8FunctionNames *ret)
{
        ret->function[0] = ret->script[0] = 0;
        ret->identity = (V8FunctionIdentity){};
        return shared_names(m, o, shared, ret);
}

static int shared_names(const RemoteMemory *m, const V8Offsets *o, uint64_t shared, V8FunctionNames *ret)
{
        uint64_t name, script, script_name;
        uint16_t type;
        int r;

        r = v8_object_type(m, o, shared, &type);
        if (r < 0)
                return r == -EBADMSG ? -EMEDIUMTYPE : r;
        if (type != (uint32_t)o->type_shared_function_info)
                return -EMEDIUMTYPE;

        ret->identity.shared = shared;
        r = read_word(m, untag(o, shared) + o->sfi_name_or_scope_info, &name);
        if (r < 0)
                return r;
        ret->identity.sfi_name = name;
        r = v8_object_type(m, o, name, &type);
        if (r == 0 && o->type_scope_info != V8_OFFSET_NONE && type == (uint32_t)o->type_scope_info)
                r = scope_info_name(m, o, name, ret->function, sizeof(ret->function));
        else if (r == 0)
                r = v8_read_string(m, o, name, ret->function, sizeof(ret->function));
        if (r < 0 && r != -EMEDIUMTYPE && r != -EBADMSG)
                return r;

        if (o->sfi_script_or_debug_info == V8_OFFSET_NONE)
                return 0;
        r = read_word(m, untag(o, shared) + o->sfi_script_or_debug_info, &script);
        if (r < 0)
                return r;
        ret->identity.sfi_script = script;
        if (v8_object_type(m, o, script, &type) < 0 || type != (uint32_t)o->type_script)
                return 0; /* no script (a builtin), or a DebugInfo (a debugger is attached) */
        r = read_word(m, untag(o, script) + o->script_name, &script_name);
        if (r < 0)
                return r;
        r = v8_read_string(m, o, script_name, ret->script, sizeof(ret->script));
        if (r < 0 && r != -EMEDIUMTYPE && r != -EBADMSG)
                return r;
        return 0;
}

/* Two members of the object at base (untagged): one read when they lie within
 * V8_IDENTITY_SPAN_MAX bytes of each other, two otherwise. */
#define V8_IDENTITY_SPAN_MAX 64
static int read_pair(const RemoteMemory *m, uint64_t base, int32_t off_a, int32_t off_b, uint64_t *ret_a,
                     uint64_t *ret_b)
{
        int32_t lo = off_a < off_b ? off_a : off_b, hi = off_a < off_b ? off_b : off_a;
        uint64_t words[V8_IDENTITY_SPAN_MAX / 8];
        int r;

        if (lo < 0 || (lo & 7) || (hi & 7) || hi - lo >= V8_IDENTITY_SPAN_MAX) {
                r = read_word(m, base + off_a, ret_a);
                return r < 0 ? r : read_word(m, base + off_b, ret_b);
        }
        r = remote_memory_read(m, base + lo, words, (size_t)(hi - lo) + 8);
        if (r < 0)
                return r;
        *ret_a = words[(off_a - lo) / 8];
        *ret_b = words[(off_b - lo) / 8];
        return 0;
}

int v8_function_identity(const RemoteMemory *m, const V8Offsets *o, uint64_t fn, V8FunctionIdentity *ret)
{
        uint64_t base = untag(o, fn), shared_base, script = 0;
        int r;

        *ret = (V8FunctionIdentity){};
        if (!base)
                return -EBADMSG;
        r = read_pair(m, base, o->heap_object_map, o->js_function_shared, &ret->map, &ret->shared);
        if (r < 0)
                return r;
        shared_base = untag(o, ret->shared);
        if (!shared_base)
                return -EBADMSG;
        if (o->sfi_script_or_debug_info == V8_OFFSET_NONE)
                return read_word(m, shared_base + o->sfi_name_or_scope_info, &ret->sfi_name);
        r = read_pair(m, shared_base, o->sfi_name_or_scope_info, o->sfi_script_or_debug_info, &ret->sfi_name,
                      &script);
        if (r < 0)
                return r;
        ret->sfi_script = script;
        return 0;
}
