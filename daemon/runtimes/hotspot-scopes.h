/* SPDX-License-Identifier: GPL-2.0-only */
/* The Java methods a compiled frame ran at a pc, inlined ones included: found as HotSpot finds
 * them (nmethod::pc_desc_at, ScopeDesc), read from the JVM's memory while it runs. The nmethod
 * holding the pc comes from its code heap's segment map (as the BPF walk found it); its PcDescs
 * map code offsets to scope descriptors, serialized in its scopes data as CompressedStream ints
 * (sender scope's offset, method index into the nmethod's Metadata* table, bci + 1, ...), the
 * innermost scope first, its sender the method it was inlined into, up to the nmethod's method.
 *
 * A caller frame's pc is a return address: HotSpot records a PcDesc at exactly that offset for
 * every call, and only that one is taken. The sampled pc of frame 0 is anywhere: the first PcDesc
 * at or after it is taken, as HotSpot's own AsyncGetCallTrace and JFR do (its lines may be those
 * of the next safepoint, calls or loop back-edge, of the same scope).
 *
 * Checked, never guessed: the nmethod found must carry the compile id the BPF walk recorded, the
 * outermost scope must be the nmethod's own method, and every method is named only when it is
 * its class's (hotspot-method.h). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h> /* for profd-hotspot.h */

#include "bpf/profd-hotspot.h"
#include "runtimes/hotspot-offsets.h"
#include "runtimes/hotspot-vmstructs.h"

/* Scopes of one pc, at most: C2 inlines up to MaxInlineLevel (15 from JDK 14, 9 before) methods
 * deep; a deeper chain (another compiler) is not taken whole (-E2BIG). */
#define HOTSPOT_SCOPES_MAX 24
/* PcDescs of one nmethod read, at most (16 bytes each): a large C2 method has a few thousand. */
#define HOTSPOT_PC_DESCS_MAX (64u << 10)
/* Hops back through a segment map (1 byte read each): a blob of up to 4096 * 254 segments. */
#define HOTSPOT_SEGMAP_HOPS_MAX 4096

typedef struct HotspotScope {
        uint64_t method; /* Method* */
        uint32_t bci;    /* 0 for a method's entry (InvocationEntryBci) */
} HotspotScope;

typedef struct HotspotScopes {
        uint64_t nmethod_method; /* the nmethod's Method*, when its nmethod was found */
        bool approximate;        /* frame 0: the PcDesc after the pc, not at it */
        size_t n;                /* innermost first; the last is nmethod_method's scope */
        HotspotScope scopes[HOTSPOT_SCOPES_MAX];
} HotspotScopes;

/* The scopes of the compiled frame entry (profd-hotspot.h: pc offset, frame 0 bit and compile id)
 * of the JVM whose code is described by code (hotspot-procs.h), through read_fn.
 * -ENOENT: no nmethod at the pc; -ESTALE: the nmethod there is not the one sampled (another compile
 * id); -ENODATA: no PcDesc for the pc, or one without scopes (ret->nmethod_method set);
 * -EBADMSG: impossible data; -EPROTONOSUPPORT: the JDK's tables lack what is needed; -EFAULT. */
int hotspot_scopes_read(const HotspotOffsets *o, const struct profd_hotspot_proc *code,
                        HotspotReadFn read_fn, void *userdata, uint64_t frame, HotspotScopes *ret);

/* The blob (CodeBlob*) holding pc in the code heaps of code (CodeHeap::find_blob), its size and
 * its name (CodeBlob::_name, up to size - 1 bytes): what a pc in a stub, an adapter or the
 * interpreter is. -ENOENT: none; -EPROTONOSUPPORT: the tables lack the name or size. */
int hotspot_blob_name(const HotspotOffsets *o, const struct profd_hotspot_proc *code, HotspotReadFn read_fn,
                      void *userdata, uint64_t pc, uint64_t *ret_blob, uint64_t *ret_end, char *ret_name,
                      size_t size);

/* Reads n bytes at offset off of the scopes data, or of the Metadata* table (8 bytes an entry);
 * returns the bytes read (fewer at the end), negative on errors. */
typedef struct HotspotScopesSource {
        int (*scopes)(void *userdata, uint32_t off, uint8_t *buf, size_t n);
        int (*metadata)(void *userdata, uint32_t index, uint64_t *ret);
        void *userdata;
} HotspotScopesSource;

/* Decodes the scope chain at decode_offset (HotSpot's ScopeDesc::decode_body and sender()): the
 * scopes innermost first into ret (at most max). Used by hotspot_scopes_read(); for tests. */
int hotspot_scopes_decode(const HotspotScopesSource *src, uint32_t decode_offset, uint32_t jdk_major,
                          HotspotScope *ret, size_t max, size_t *ret_n);
