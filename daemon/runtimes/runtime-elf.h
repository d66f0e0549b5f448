/* SPDX-License-Identifier: GPL-2.0-only */
/* What every runtime reads first from the files a process maps: the symbols its interpreter or VM
 * exports (CPython's _PyRuntime, HotSpot's gHotSpotVM* tables, V8's v8dbg_* metadata). */
#pragma once

#include <gelf.h>
#include <libelf.h>

/* elf_begin(ELF_C_READ_MMAP) of fd; -EBADMSG when it is not an ELF file. Free with elf_end(). */
int runtime_elf_open(int fd, Elf **ret);

/* Called for each defined symbol with a value; a negative return stops the scan and is returned. */
typedef int (*RuntimeElfSymbolFn)(const GElf_Sym *sym, const char *name, void *userdata);
/* Every such symbol of the file's first .dynsym; -ENOENT when it has none. */
int runtime_elf_dynsym_foreach(Elf *elf, RuntimeElfSymbolFn fn, void *userdata);
