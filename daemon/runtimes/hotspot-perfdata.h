/* SPDX-License-Identifier: GPL-2.0-only */
/* A HotSpot JVM's perf data (hsperfdata, hotspot/share/runtime/perfMemory.hpp and perfData.hpp):
 * the memory at PerfMemory::_start, the same since JDK 1.4 (major version 2), holds a prologue
 * (magic 0xcafec0c0 in big-endian order, byte order, version, used bytes, the offset of the
 * first entry and their number) followed by entries (length, name offset, vector length, type,
 * flags, units, variability, data offset), the name and the value inside the entry. It is read
 * from the process (runtimes/remote-memory.h), never from its /tmp/hsperfdata_USER file. */
#pragma once

#include <stdint.h>

#include "runtimes/hotspot-vmstructs.h"

/* Bounds against a corrupt or hostile JVM: the default PerfDataMemorySize is 64 KiB (JDK 11..25)
 * and a JVM has ~300 entries. */
#define HOTSPOT_PERFDATA_MAX_BYTES (256 * 1024)
#define HOTSPOT_PERFDATA_MAX_ENTRIES 4096

/* The address, in the process, of the value of the long counter named name ("java.cls.
 * unloadedClasses") in the perf data at start (PerfMemory::_start's value). -ENOENT: no such
 * counter (yet: counters are created while the JVM starts); -EBADMSG: not perf data profd reads. */
int hotspot_perfdata_find_long(HotspotReadFn read_fn, void *userdata, uint64_t start, const char *name,
                               uint64_t *ret_addr);
