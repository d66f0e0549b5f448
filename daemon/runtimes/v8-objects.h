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

typedef struct V8FunctionNames {
        char function[V8_NAME_MAX]; /* "" for an anonymous function */
        char script[V8_NAME_MAX];   /* "" when the function has no script with a name */
} V8FunctionNames;

/* The instance type of the heap object at tagged address obj. -EBADMSG: obj is not a tagged heap
 * object pointer, or its map is none; what remote_memory_read() returns otherwise. */
int v8_object_type(const RemoteMemory *m, const V8Offsets *o, uint64_t obj, uint16_t *ret);

/* The string at tagged address str, as UTF-8 (two-byte strings: characters beyond ASCII become
 * '?'), cut at size - 1 bytes. -EMEDIUMTYPE: not a string; -EBADMSG: a string profd cannot read
 * (too deep a cons tree, a representation it does not know). */
int v8_read_string(const RemoteMemory *m, const V8Offsets *o, uint64_t str, char *buf, size_t size);

/* The names of the JSFunction at tagged address fn. -EMEDIUMTYPE: fn is not a JSFunction now (freed
 * or moved by the GC), or its SharedFunctionInfo is not one. A name that cannot be read (an
 * unexpected ScopeInfo layout) is left "", as an anonymous function's. */
int v8_function_names(const RemoteMemory *m, const V8Offsets *o, uint64_t fn, V8FunctionNames *ret);
