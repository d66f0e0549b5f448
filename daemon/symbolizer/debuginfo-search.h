/* SPDX-License-Identifier: GPL-2.0-only */
/* Separate debug files for libdwfl, looked up like dwfl_standard_find_debuginfo() does (by build
 * ID under every absolute directory of the debuginfo path, then by .gnu_debuglink next to the
 * file, in its .debug/ and under those directories; the dwz file of .gnu_debugaltlink by build ID
 * and by its name), in profd's root and then in the process's own root, but every candidate
 * opened with safe_open_in_root(): a FIFO, a device or a symlink out of the process's root where
 * a debug file is looked for is refused, never opened (libdwfl's own search open()s each path
 * and waits forever on a FIFO). A candidate is taken only if it carries the module's build ID
 * (or, for a file without one, the .gnu_debuglink CRC). */
#pragma once

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/memory-owners.h"

typedef struct DebuginfoSearch {
        /* profd's debuginfod cache (DIR/HEXID/debuginfo), searched after the local files; NULL:
         * none. */
        const char *debuginfod_dir;
        const char *path; /* libdwfl's format (":.debug:/usr/lib/debug"); NULL: that default */
        char *root;       /* "/proc/PID/root" when the process sees another filesystem, else NULL */
        uint64_t main_dev, main_ino; /* the main file: never its own debug file */
        Elf *main_elf;
        const char *main_debuglink;
        /* The .gnu_debugaltlink build ID of the debug file handed to libdwfl, if it has one. */
        uint8_t alt_id[64];
        size_t alt_id_size;
        bool debug_given;
        /* The dwz file was found: libdwfl hands it to libdw. Without it, libdw would look for it
         * itself with a blocking open() of a path the file names, when DWARF refers to it. */
        bool alt_given;
        /* The separate debug file and dwz file handed to libdwfl (.size 0: none). */
        MemoryFile files[2];
        /* DWARF bytes the debug file would take inflated (its compressed .debug_* sections); a
         * debug file over max_dwarf_bytes (0: no limit) is refused, and refused_large set. */
        uint64_t debug_dwarf_bytes, max_dwarf_bytes;
        bool refused_large;
        /* A debug file with this much compressed DWARF or more (up to inflate_max_bytes) is handed
         * to the inflater (dwarf-inflate.h; NULL: none): its inflated copy, once ready, is what
         * libdwfl gets (inflated), else the file as it is, its copy being made (inflate_pending).
         * A copy is asked for only while *inflate_queue (the owner's: lookups made ahead of a
         * request, which can go without DWARF until it is ready; a request's own lookup has libdw
         * inflate the file at once, and a copy would never be used). */
        struct DwarfInflater *inflater;
        const bool *inflate_queue;
        uint64_t inflate_max_bytes;
        bool inflated, inflate_pending;
} DebuginfoSearch;

enum { DEBUGINFO_FILE_DEBUG, DEBUGINFO_FILE_ALT };

/* After dwfl_report_elf(): makes mod's userdata point at ds (which must outlive the Dwfl). */
void debuginfo_search_attach(DebuginfoSearch *ds, Dwfl_Module *mod);
void debuginfo_search_done(DebuginfoSearch *ds);

/* Dwfl_Callbacks.find_debuginfo. */
int debuginfo_search_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                                    const char *file_name, const char *debuglink_file,
                                    GElf_Word debuglink_crc, char **debuginfo_file_name);
/* Dwfl_Callbacks.find_elf: modules are always reported with their descriptor; never by path. */
int debuginfo_search_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                              char **file_name, Elf **elfp);

/* The build ID that follows the file name in elf's .gnu_debugaltlink (the dwz file's); its size,
 * 0 if none. */
size_t debuginfo_elf_altlink_id(Elf *elf, uint8_t id[64]);
/* Whether elf has DWARF of its own (a .debug_info with contents). */
bool debuginfo_elf_has_dwarf(Elf *elf);

/* Bytes libdw would allocate to inflate elf's compressed .debug_* sections, read from the raw
 * image's section headers: valid only before libdw opened elf's DWARF (inflating, libelf rewrites
 * its headers, in the mapped image itself when it reads them from there). */
uint64_t debuginfo_dwarf_inflated_bytes(Elf *elf);

/* Whether libdw may be let loose on dw: it opens files by the names DWARF gives, blocking, for
 * split DWARF units (.dwo) and for a dwz file libdwfl was not given. Such DWARF is not read
 * (the symbol table still names the frames). Returns NULL, or what makes it unsafe. */
const char *debuginfo_search_dwarf_unsafe(const DebuginfoSearch *ds, Dwarf *dw);
