/* SPDX-License-Identifier: GPL-2.0-only */
/* HotSpot frames in drained user stacks (bpf/profd-hotspot.h): a Java frame is one entry, the
 * method and the bytecode index, in place of the pc the native walk met; it stays so through the
 * drain and the aggregation and is named per process (symbolizer/hotspot-symbols.h). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h> /* for profd-hotspot.h */

#include "bpf/profd-hotspot.h"
#include "bpf/profd-python.h"

/* After the drain named it, a Java frame is PROFD_FRAME_HOTSPOT | HOTSPOT_FRAME_BOUND | the id of
 * the names read for it then (symbolizer/hotspot-symbols.h); one that could not be named for sure
 * stays as BPF wrote it (its method's address kept). Bit 60 is free on a HotSpot entry after the
 * Python splice (profd-python.h). */
#define HOTSPOT_FRAME_BOUND (1ULL << 60)
#define HOTSPOT_FRAME_ID_MASK 0xffffffffULL

static inline bool hotspot_frame_is(uint64_t f)
{
        return (f & PROFD_FRAME_HOTSPOT) && !(f & PROFD_FRAME_PYTHON);
}

static inline uint64_t hotspot_frame_method(uint64_t f)
{
        return (f & PROFD_HS_METHOD_MASK) << PROFD_HS_METHOD_SHIFT;
}

/* PROFD_HS_BCI_NONE: unknown. */
static inline uint32_t hotspot_frame_bci(uint64_t f)
{
        return (f >> PROFD_HS_BCI_SHIFT) & PROFD_HS_BCI_NONE;
}

/* Whether f (a HotSpot frame of a JVM whose BPF description has blob_compile_id: compile_id_known)
 * is a compiled frame's pc, not a method (profd-hotspot.h: PROFD_HS_PC_BITS). */
static inline bool hotspot_frame_is_compiled_pc(uint64_t f, bool compile_id_known)
{
        return compile_id_known && hotspot_frame_bci(f) == PROFD_HS_BCI_NONE;
}

static inline bool hotspot_frame_bound(uint64_t f)
{
        return f & HOTSPOT_FRAME_BOUND;
}
