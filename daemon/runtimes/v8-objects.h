/* SPDX-License-Identifier: GPL-2.0-only */
/* Reading V8 heap objects of another process: a JSFunction's name and its script's name, through
 * the never-blocking remote memory path. Every object's map is read and its instance type checked
 * before a member of it is trusted: memory the garbage collector freed or moved is soon another
 * object, and a frame must stay unnamed rather than be named wrongly. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "runtimes/remote-memory.h"
#include "runtimes/v8-offsets.h"

/* Longest name kept (bytes, NUL included); longer ones are cut. */
#define V8_NAME_MAX 256

/* The words that make a JSFunction's names what they are: its map and SharedFunctionInfo, and the
 * SharedFunctionInfo's name (or ScopeInfo) and script. Equal words at the same address later: the
 * same names (a cache's check, far cheaper than naming again). */
typedef struct V8FunctionIdentity {
        uint64_t map, shared, sfi_name, sfi_script; /* sfi_script 0 when the build has no such member */
} V8FunctionIdentity;

typedef struct V8FunctionNames {
        char function[V8_NAME_MAX];  /* "" for an anonymous function */
        char script[V8_NAME_MAX];    /* "" when the function has no script with a name */
        V8FunctionIdentity identity; /* the words the names were read through */
} V8FunctionNames;

/* The instance type of the heap object at tagged address obj. -EBADMSG: obj is not a tagged heap
 * object pointer, or its map is none; what remote_memory_read() returns otherwise. */
int v8_object_type(const RemoteMemory *m, const V8Offsets *o, uint64_t obj, uint16_t *ret);

/* The string at tagged address str, as UTF-8 (two-byte strings: characters beyond ASCII become
 * '?'), cut at size - 1 bytes. -EMEDIUMTYPE: not a string; -EBADMSG: a string profd cannot read
 * (too deep a cons tree, a representation it does not know). */
int v8_read_string(const RemoteMemory *m, const V8Offsets *o, uint64_t str, char *buf, size_t size);

/* Where the characters of the flat string at untagged address base, of instance type type, are:
 * a sequential string's own, or an external string's (Node.js's modules: their source stays in the
 * node binary) through the data pointer V8 caches in it. -EOPNOTSUPP: another representation
 * (cons, thin, sliced: the caller's), or an external string without that cached pointer. */
int v8_string_chars(const RemoteMemory *m, const V8Offsets *o, uint64_t base, uint32_t type, uint64_t *ret);

/* The names of the JSFunction at tagged address fn. -EMEDIUMTYPE: fn is not a JSFunction now (freed
 * or moved by the GC), or its SharedFunctionInfo is not one. A name that cannot be read (an
 * unexpected ScopeInfo layout) is left "", as an anonymous function's. */
int v8_function_names(const RemoteMemory *m, const V8Offsets *o, uint64_t fn, V8FunctionNames *ret);

/* The names of the SharedFunctionInfo at tagged address shared (a function TurboFan or Maglev
 * inlined: no JSFunction of its own in the frame); identity.map stays 0. -EMEDIUMTYPE: not a
 * SharedFunctionInfo. */
int v8_shared_names(const RemoteMemory *m, const V8Offsets *o, uint64_t shared, V8FunctionNames *ret);

/* The identity words of the object at tagged address fn (two remote reads when the members lie
 * close together, as in every V8 build seen). Nothing is checked: the caller compares them with
 * those of a JSFunction it named. -EBADMSG: fn or its shared word is not a heap object pointer. */
int v8_function_identity(const RemoteMemory *m, const V8Offsets *o, uint64_t fn, V8FunctionIdentity *ret);
