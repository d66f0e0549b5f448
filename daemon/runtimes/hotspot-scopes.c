/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/hotspot-method.h"
#include "runtimes/hotspot-scopes.h"
#include "util/macro.h"

/* The ints of a scope descriptor read (sender, method index, bci): 5 bytes each at most. */
#define SCOPE_HEAD_BYTES 15
/* DebugInformationRecorder::serialized_null: no scope (PcDesc), no sender (ScopeDesc). */
#define SERIALIZED_NULL 0
/* PcDesc::lower_offset_limit: the nmethod's first PcDesc, a sentinel before its code. */
#define PC_OFFSET_SENTINEL -1

int hotspot_scopes_decode(const HotspotScopesSource *src, uint32_t decode_offset, uint32_t jdk_major,
                          HotspotScope *ret, size_t max, size_t *ret_n)
{
        size_t n = 0;

        /* Bounded by max: every scope of the chain is stored. */
        while (decode_offset != SERIALIZED_NULL) {
                uint8_t buf[SCOPE_HEAD_BYTES];
                uint32_t v[3], sender;
                size_t pos = 0;
                uint64_t method = 0;
                int got, r;

                if (n >= max)
                        return -E2BIG;
                got = src->scopes(src->userdata, decode_offset, buf, sizeof(buf));
                if (got < 0)
                        return got;
                for (int k = 0; k < 3; k++) {
                        size_t used = hotspot_read_unsigned5(buf + pos, (size_t)got - pos, jdk_major, &v[k]);

                        if (used == 0)
                                return -EBADMSG;
                        pos += used;
                }
                sender = v[0];
                /* Senders are written before the scopes inlined into them: their offsets are
                 * smaller, so the chain cannot loop. */
                if (sender != SERIALIZED_NULL && sender >= decode_offset)
                        return -EBADMSG;
                if (v[1] == 0) /* a scope with no method: not a Java frame's */
                        return -EBADMSG;
                r = src->metadata(src->userdata, v[1], &method);
                if (r < 0)
                        return r;
                if (!method || (method & 7))
                        return -EBADMSG;
                /* read_bci(): the int is bci - InvocationEntryBci (-1); the entry (-1) has the
                 * line of bci 0, as Method::line_number_from_bci() gives it. */
                ret[n++] = (HotspotScope){.method = method, .bci = v[2] == 0 ? 0 : v[2] - 1};
                decode_offset = sender;
        }
        *ret_n = n;
        return 0;
}

typedef struct Remote {
        HotspotReadFn fn;
        void *userdata;
        uint64_t scopes, scopes_end;     /* [scopes, scopes_end): the scopes data */
        uint64_t metadata, metadata_end; /* [metadata, metadata_end): Metadata*, index 1 first */
} Remote;

static int rd(const Remote *m, uint64_t addr, void *buf, size_t n)
{
        if (addr < 4096)
                return -EFAULT;
        return m->fn(m->userdata, addr, buf, n);
}

static int rd_u64(const Remote *m, uint64_t addr, uint64_t *ret)
{
        *ret = 0;
        return rd(m, addr, ret, sizeof(*ret));
}

static int rd_i32(const Remote *m, uint64_t addr, int32_t *ret)
{
        *ret = 0;
        return rd(m, addr, ret, sizeof(*ret));
}

static int remote_scopes(void *userdata, uint32_t off, uint8_t *buf, size_t n)
{
        const Remote *m = userdata;
        uint64_t at = m->scopes + off;
        int r;

        if (at >= m->scopes_end)
                return -EBADMSG;
        if (n > m->scopes_end - at)
                n = m->scopes_end - at;
        r = rd(m, at, buf, n);
        return r < 0 ? r : (int)n;
}

static int remote_metadata(void *userdata, uint32_t index, uint64_t *ret)
{
        const Remote *m = userdata;
        uint64_t at = m->metadata + 8 * ((uint64_t)index - 1);

        if (index == 0 || at + 8 > m->metadata_end)
                return -EBADMSG;
        return rd_u64(m, at, ret);
}

static bool known(uint32_t v)
{
        return v != HOTSPOT_OFFSET_NONE;
}

/* The blob holding pc (CodeHeap::find_blob, as bpf/hotspot.bpf.h finds it). */
static int find_blob(const Remote *m, const struct profd_hotspot_proc *code, uint64_t pc, uint64_t *ret)
{
        for (unsigned h = 0; h < code->n_heaps && h < PROFD_HS_MAX_HEAPS; h++) {
                const struct profd_hs_heap *heap = &code->heaps[h];
                uint64_t idx;

                if (pc < heap->low || pc >= heap->high)
                        continue;
                idx = (pc - heap->low) >> heap->log2_segment;
                /* Bounded by HOTSPOT_SEGMAP_HOPS_MAX. */
                for (unsigned i = 0; i < HOTSPOT_SEGMAP_HOPS_MAX; i++) {
                        uint8_t hop = 0xff;
                        int r = rd(m, heap->segmap + idx, &hop, 1);

                        if (r < 0)
                                return r;
                        if (hop == 0xff || hop > idx)
                                return -ENOENT;
                        if (hop == 0) {
                                *ret = heap->low + (idx << heap->log2_segment) + code->heap_block_size;
                                return 0;
                        }
                        idx -= hop;
                }
                return -ENOENT;
        }
        return -ENOENT;
}

/* Where the nmethod's PcDescs, scopes and Metadata* table are (see hotspot-offsets.h). */
static int locate(const HotspotOffsets *o, Remote *m, uint64_t nm, uint64_t *ret_pcs, uint64_t *ret_pcs_end)
{
        int32_t pcs_off, end_off, meta_off;
        int r;

        if (known(o->nmethod_immutable_data) && known(o->nmethod_immutable_data_size) &&
            known(o->nmethod_scopes_pcs_offset) && known(o->nmethod_scopes_data_offset)) {
                uint64_t imm;
                int32_t imm_size = 0;

                if ((r = rd_u64(m, nm + o->nmethod_immutable_data, &imm)) < 0 ||
                    (r = rd_i32(m, nm + o->nmethod_immutable_data_size, &imm_size)) < 0 ||
                    (r = rd_i32(m, nm + o->nmethod_scopes_pcs_offset, &pcs_off)) < 0 ||
                    (r = rd_i32(m, nm + o->nmethod_scopes_data_offset, &end_off)) < 0)
                        return r;
                if (!imm || pcs_off < 0 || end_off < pcs_off || imm_size < end_off)
                        return -EBADMSG;
                *ret_pcs = imm + (uint32_t)pcs_off;
                *ret_pcs_end = imm + (uint32_t)end_off;
                m->scopes = *ret_pcs_end;
                /* The scopes end before the end of the immutable data (speculations and a
                 * counter follow): a bound, not their exact end. */
                m->scopes_end = imm + (uint32_t)imm_size;
        } else if (known(o->nmethod_scopes_pcs_offset) && known(o->nmethod_dependencies_offset) &&
                   known(o->nmethod_scopes_data_begin)) {
                if ((r = rd_i32(m, nm + o->nmethod_scopes_pcs_offset, &pcs_off)) < 0 ||
                    (r = rd_i32(m, nm + o->nmethod_dependencies_offset, &end_off)) < 0 ||
                    (r = rd_u64(m, nm + o->nmethod_scopes_data_begin, &m->scopes)) < 0)
                        return r;
                if (pcs_off <= 0 || end_off < pcs_off || m->scopes <= nm ||
                    m->scopes > nm + (uint32_t)pcs_off)
                        return -EBADMSG;
                *ret_pcs = nm + (uint32_t)pcs_off;
                *ret_pcs_end = nm + (uint32_t)end_off;
                m->scopes_end = *ret_pcs; /* the PcDescs follow the scopes */
        } else {
                return -EPROTONOSUPPORT;
        }

        if (known(o->code_blob_mutable_data) && known(o->code_blob_relocation_size) &&
            known(o->code_blob_mutable_data_size)) {
                uint64_t mut;
                int32_t reloc, size;

                if ((r = rd_u64(m, nm + o->code_blob_mutable_data, &mut)) < 0 ||
                    (r = rd_i32(m, nm + o->code_blob_relocation_size, &reloc)) < 0 ||
                    (r = rd_i32(m, nm + o->code_blob_mutable_data_size, &size)) < 0)
                        return r;
                if (!mut || reloc < 0 || size < reloc)
                        return -EBADMSG;
                m->metadata = mut + (uint32_t)reloc;
                m->metadata_end = mut + (uint32_t)size;
        } else if (known(o->nmethod_metadata_offset) && !known(o->nmethod_immutable_data)) {
                /* Up to JDK 22 the Metadata* table ends where the scopes begin. */
                if ((r = rd_i32(m, nm + o->nmethod_metadata_offset, &meta_off)) < 0)
                        return r;
                if (meta_off <= 0 || nm + (uint32_t)meta_off > m->scopes)
                        return -EBADMSG;
                m->metadata = nm + (uint32_t)meta_off;
                m->metadata_end = m->scopes;
        } else {
                return -EPROTONOSUPPORT; /* JDK 23: the table's place is in no table */
        }
        return 0;
}

/* The PcDesc for pc_offset: the one at it (exact), else the first after it; its scope offset. */
static int find_pc_desc(const HotspotOffsets *o, const Remote *m, uint64_t pcs, uint64_t pcs_end,
                        int32_t pc_offset, bool exact, uint32_t *ret_scope, bool *ret_approximate)
{
        size_t size = o->pc_desc_sizeof, n;
        _cleanup_free_ uint8_t *buf = NULL;
        int r;

        if (size < 8 || size > 64 || (pcs_end - pcs) % size)
                return -EBADMSG;
        n = (pcs_end - pcs) / size;
        if (n == 0)
                return -ENODATA;
        if (n > HOTSPOT_PC_DESCS_MAX)
                return -E2BIG;
        buf = malloc(n * size);
        if (!buf)
                return -ENOMEM;
        r = rd(m, pcs, buf, n * size);
        if (r < 0)
                return r;
        /* Sorted by pc offset (the sentinel first). Bounded by n. */
        for (size_t i = 0; i < n; i++) {
                int32_t off, scope;

                memcpy(&off, buf + i * size + o->pc_desc_pc_offset, sizeof(off));
                memcpy(&scope, buf + i * size + o->pc_desc_scope_decode_offset, sizeof(scope));
                if (off == PC_OFFSET_SENTINEL || off < pc_offset)
                        continue;
                if (off != pc_offset && exact)
                        return -ENODATA;
                if (scope <= 0)
                        return -ENODATA;
                *ret_scope = (uint32_t)scope;
                *ret_approximate = off != pc_offset;
                return 0;
        }
        return -ENODATA;
}

int hotspot_scopes_read(const HotspotOffsets *o, const struct profd_hotspot_proc *code,
                        HotspotReadFn read_fn, void *userdata, uint64_t frame, HotspotScopes *ret)
{
        Remote m = {.fn = read_fn, .userdata = userdata};
        const HotspotScopesSource src = {
                .scopes = remote_scopes, .metadata = remote_metadata, .userdata = &m};
        uint64_t pc = code->code_start + (frame & ((1ULL << PROFD_HS_PC_BITS) - 1));
        bool leaf = frame & PROFD_HS_PC_LEAF;
        uint32_t want_id = (frame >> PROFD_HS_ID_SHIFT) & PROFD_HS_ID_MASK, scope = 0;
        uint64_t nm = 0, begin = 0, pcs = 0, pcs_end = 0;
        int32_t id = 0, size = 0;
        int r;

        memset(ret, 0, sizeof(*ret));
        if (!known(o->nmethod_compile_id) || !known(o->pc_desc_sizeof) || !known(o->pc_desc_pc_offset) ||
            !known(o->pc_desc_scope_decode_offset) || !known(o->code_blob_size) ||
            (!known(o->code_blob_code_begin) && !known(o->code_blob_code_offset)))
                return -EPROTONOSUPPORT;
        r = find_blob(&m, code, pc, &nm);
        if (r < 0)
                return r;
        if ((r = rd_i32(&m, nm + o->nmethod_compile_id, &id)) < 0 ||
            (r = rd_i32(&m, nm + o->code_blob_size, &size)) < 0)
                return r;
        if (((uint32_t)id & PROFD_HS_ID_MASK) != want_id || id <= 0)
                return -ESTALE;
        if (known(o->code_blob_code_begin)) {
                r = rd_u64(&m, nm + o->code_blob_code_begin, &begin);
        } else {
                int32_t off = 0;

                r = rd_i32(&m, nm + o->code_blob_code_offset, &off);
                begin = off > 0 ? nm + (uint32_t)off : 0;
        }
        if (r < 0)
                return r;
        if (size <= 0 || begin <= nm || pc < begin || pc >= nm + (uint32_t)size)
                return -EBADMSG;
        if ((r = rd_u64(&m, nm + o->compiled_method_method, &ret->nmethod_method)) < 0)
                return r;
        if ((r = locate(o, &m, nm, &pcs, &pcs_end)) < 0)
                return r;
        r = find_pc_desc(o, &m, pcs, pcs_end, (int32_t)(pc - begin), !leaf, &scope, &ret->approximate);
        if (r < 0)
                return r;
        r = hotspot_scopes_decode(&src, scope, o->jdk_major, ret->scopes, HOTSPOT_SCOPES_MAX, &ret->n);
        if (r < 0)
                return r;
        /* The outermost scope is the method compiled. */
        if (ret->n == 0 || ret->scopes[ret->n - 1].method != ret->nmethod_method)
                return -EBADMSG;
        return 0;
}

int hotspot_blob_name(const HotspotOffsets *o, const struct profd_hotspot_proc *code, HotspotReadFn read_fn,
                      void *userdata, uint64_t pc, uint64_t *ret_blob, uint64_t *ret_end, char *ret_name,
                      size_t size)
{
        Remote m = {.fn = read_fn, .userdata = userdata};
        uint64_t blob = 0, name = 0;
        int32_t blob_size = 0;
        int r;

        if (!known(o->code_blob_name) || !known(o->code_blob_size) || size == 0)
                return -EPROTONOSUPPORT;
        r = find_blob(&m, code, pc, &blob);
        if (r < 0)
                return r;
        if ((r = rd_i32(&m, blob + o->code_blob_size, &blob_size)) < 0 ||
            (r = rd_u64(&m, blob + o->code_blob_name, &name)) < 0)
                return r;
        if (blob_size <= 0 || pc >= blob + (uint32_t)blob_size || !name)
                return -EBADMSG;
        /* Names are C strings in libjvm's data or the C heap: read a little, up to the first NUL. */
        memset(ret_name, 0, size);
        for (size_t got = 0; got < size - 1;) {
                size_t n = size - 1 - got < 16 ? size - 1 - got : 16;

                if (rd(&m, name + got, ret_name + got, n) < 0)
                        break;
                if (memchr(ret_name + got, 0, n))
                        break;
                got += n;
        }
        ret_name[size - 1] = 0;
        if (!ret_name[0])
                return -EBADMSG;
        for (char *c = ret_name; *c; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                        return -EBADMSG; /* HotSpot names its blobs in ASCII */
        *ret_blob = blob;
        *ret_end = blob + (uint32_t)blob_size;
        return 0;
}
