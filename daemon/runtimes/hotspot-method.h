/* SPDX-License-Identifier: GPL-2.0-only */
/* A HotSpot method's names and the line of a bytecode index, read from the JVM's metaspace:
 * Method -> ConstMethod (name and signature indexes, bytecodes, the compressed line number table
 * right after them) -> ConstantPool (its Utf8 slots are Symbol*; _pool_holder, the class) ->
 * Klass::_name. Offsets from hotspot-offsets.h; reads through a HotspotReadFn (the daemon's:
 * remote-memory.h, never a file on FUSE).
 *
 * Checked, never guessed: the method must be its holder's (InstanceKlass::_methods holds it at its
 * ConstMethod's _method_idnum): memory of an unloaded class's method that now holds something
 * else fails that (-ESTALE), as does anything that is not a method (-EBADMSG for impossible
 * sizes, indexes or names). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "runtimes/hotspot-offsets.h"
#include "runtimes/hotspot-vmstructs.h"

/* Longest class, method, signature or file name kept (Symbol lengths are u2: up to 65535). */
#define HOTSPOT_NAME_MAX 1024
/* Largest line number table read (bytes after the bytecodes): a method has at most 65535 bytecodes. */
#define HOTSPOT_LINE_TABLE_MAX (64u << 10)

typedef struct HotspotMethodInfo {
        char klass[HOTSPOT_NAME_MAX];     /* "java.lang.Thread" (dots, as Java writes it) */
        char name[HOTSPOT_NAME_MAX];      /* "sleep" */
        char signature[HOTSPOT_NAME_MAX]; /* "(J)V" */
        char file[HOTSPOT_NAME_MAX];      /* "Thread.java"; "" when the class has none */
        uint32_t line;                    /* of bci; 0: unknown (no table, bci outside) */
        uint32_t code_size;
} HotspotMethodInfo;

/* Names method (a Method*) and the line of bci in it. -EFAULT: unreadable; -EBADMSG: not a
 * method; -ESTALE: not (any more) its class's method. */
int hotspot_method_read(const HotspotOffsets *o, HotspotReadFn read_fn, void *userdata, uint64_t method,
                        uint32_t bci, HotspotMethodInfo *ret);

/* The line of bci in a compressed line number table (HotSpot's CompressedLineNumberReadStream:
 * (bci delta, line delta) pairs, one byte when small, else 0xFF and two sign-folded UNSIGNED5
 * ints; a 0 byte ends it): the line of the last entry whose bci is <= bci, 0 when none. The
 * ints' encoding is the JDK's (jdk_major: UNSIGNED5 without 0 bytes from JDK 21). */
uint32_t hotspot_line_at(const uint8_t *table, size_t size, uint32_t bci, uint32_t jdk_major);

/* One int of a CompressedReadStream (UNSIGNED5, in the JDK's encoding: jdk_major) at p: the bytes
 * it took, 0 when size bytes do not hold it. */
size_t hotspot_read_unsigned5(const uint8_t *p, size_t size, uint32_t jdk_major, uint32_t *ret);
