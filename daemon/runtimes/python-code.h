/* SPDX-License-Identifier: GPL-2.0-only */
/* Names and lines of CPython code objects, for the Python frames BPF stores in user stacks
 * (bpf/profd-python.h: a code object's address and an instruction index). A code object is read
 * once from its process (process_vm_readv: never a file, never blocking) and kept, so that the
 * process's frames are still named after it exited: its qualified name (3.11+; co_name before),
 * file name, first line and raw line table, from which the line of any instruction is computed
 * without the process. Bounded in entries and bytes (least recently used evicted first); what is
 * read is checked (the object's type, the strings' type and layout, sizes) so that memory that is
 * not a code object gives an error, never a made-up name. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <linux/types.h> /* for profd-python.h */

#include "bpf/profd-python.h"

#include "runtimes/python-offsets.h"
#include "util/macro.h"

typedef struct PythonCodeCache PythonCodeCache;

/* Defaults of python_code_cache_new() (0 asks for them). A code object costs ~100 bytes plus its
 * names and line table (typically a few hundred bytes). 8 MiB: an hour of a build running Python
 * grew the cache to 14.7 MiB under a 32 MiB bound, too much of profd's 128 MiB; past the bound the
 * least recently used go (counted), a running process's are read again when next needed. */
#define PYTHON_CODE_MAX_ENTRIES 65536u
#define PYTHON_CODE_MAX_BYTES (8u << 20)
/* Characters of a name or file name kept; longer ones are cut there (counted). */
#define PYTHON_CODE_MAX_NAME 1024u
/* Bytes of a line table kept; a code object with a bigger one is kept without it: its lines are
 * unknown (0), counted. */
#define PYTHON_CODE_MAX_LINE_TABLE (64u << 10)
/* The instruction index BPF stores when the real one does not fit (PROFD_PY_INSTR_MAX): the line
 * is unknown. */
#define PYTHON_CODE_INSTR_UNKNOWN ((uint32_t)PROFD_PY_INSTR_MAX)

typedef struct PythonFrameInfo {
        const char *name;    /* UTF-8: co_qualname from 3.11 ("Outer.method"), co_name before */
        const char *file;    /* UTF-8: co_filename as the process has it */
        uint32_t line;       /* of the instruction; 0: unknown */
        uint32_t first_line; /* co_firstlineno */
} PythonFrameInfo;

/* Which members of a code object its fingerprint covers (bpf/profd-python.h), for offsets o: BPF
 * takes it at each sample (struct profd_python_proc's fp_*), the cache from what it reads, and a
 * frame is named only when both agree. start: where the bytes hashed begin in the object, len:
 * how many; words: offsets of 8-byte members in them, u32: of co_firstlineno. -EINVAL when o
 * lacks a member, or they do not fit PROFD_PY_FP_READ_MAX bytes. */
typedef struct PythonFingerprintLayout {
        uint16_t start;
        uint8_t len;
        uint8_t u32;
        uint8_t words[PROFD_PY_FP_WORDS];
} PythonFingerprintLayout;
int python_code_fingerprint_layout(const PythonOffsets *o, PythonFingerprintLayout *ret);

/* The fingerprint of the code object at addr in process pid now, as BPF takes it (tools, tests). */
int python_code_fingerprint_at(pid_t pid, const PythonOffsets *o, uint64_t addr, uint32_t *ret);

/* max_entries, max_bytes: bounds, 0 for the defaults above. -ENOMEM. */
int python_code_cache_new(size_t max_entries, size_t max_bytes, PythonCodeCache **ret);
PythonCodeCache *python_code_cache_free(PythonCodeCache *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(PythonCodeCache *, python_code_cache_free);

/* The function, file and line of instruction instr of the code object at code_addr in process
 * pid (start_time: /proc/PID/stat starttime, telling a reused pid apart) whose fingerprint is fp,
 * from the cache or read from the process with offsets o. instr is in the units of o->line_table (see
 * PythonLineTable: bytes for LNOTAB, code units from 3.10), PYTHON_CODE_INSTR_UNKNOWN for no line.
 * code_type_addr, str_type_addr: addresses of PyCode_Type and PyUnicode_Type in that process
 * (exported symbols of the interpreter), which the code object and its strings must have as
 * ob_type. ret may be NULL: the code object is only made sure to be cached. The strings of ret
 * belong to the cache: valid until the next python_code_resolve(),
 * python_code_cache_forget() or python_code_cache_free() (which may evict them);
 * python_code_lookup() does not invalidate them.
 * Errors (each counted): -ESTALE the object there now has another fingerprint: the one sampled
 * was freed and its memory reused (the object read is cached under its own fingerprint); -ENODATA
 * fp is 0 (BPF could not read the object); -ESRCH the process is gone (or is another one now);
 * -EBADMSG the memory is not a code object of this runtime (wrong type, malformed string); -EFAULT
 * the address is not readable; -EPERM/-EACCES not allowed to read the process; -ENOMEM. */
int python_code_resolve(PythonCodeCache *c, pid_t pid, uint64_t start_time, const PythonOffsets *o,
                        uint64_t code_type_addr, uint64_t str_type_addr, uint64_t code_addr, uint32_t fp,
                        uint32_t instr, PythonFrameInfo *ret);

/* The same from the cache only, never reading the process (for processes that exited): -ENOENT
 * when the code object is not cached (never read, or evicted). */
int python_code_lookup(PythonCodeCache *c, pid_t pid, uint64_t start_time, uint64_t code_addr, uint32_t fp,
                       uint32_t instr, PythonFrameInfo *ret);

/* Drops every entry of process (pid, start_time), e.g. once the process table forgets it.
 * Walks all entries: for occasional calls. */
void python_code_cache_forget(PythonCodeCache *c, pid_t pid, uint64_t start_time);

/* The line of instruction instr in a raw line table (co_lnotab, 3.10's co_linetable or the 3.11+
 * location table, as kind says) of a code object whose first line is first_line; 0 when unknown
 * (no line for it, past the table's end, malformed). Exposed for tests and tools. */
uint32_t python_line_of(PythonLineTable kind, const uint8_t *table, size_t len, uint32_t first_line,
                        uint32_t instr);

size_t python_code_cache_entries(const PythonCodeCache *c);
size_t python_code_cache_bytes(const PythonCodeCache *c);
/* Lowers (or raises back) the byte bound (0: PYTHON_CODE_MAX_BYTES), evicting the least recently
 * used over it now (counted as evictions); returns how many went. */
size_t python_code_cache_set_max_bytes(PythonCodeCache *c, size_t max_bytes);
/* Prometheus text: profd_python_code_*. */
void python_code_cache_write_metrics(const PythonCodeCache *c, FILE *f);
