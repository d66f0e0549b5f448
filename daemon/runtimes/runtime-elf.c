/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stddef.h>

#include "runtimes/runtime-elf.h"

int runtime_elf_open(int fd, Elf **ret)
{
        Elf *elf;

        elf_version(EV_CURRENT);
        elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        if (!elf)
                return -EBADMSG;
        if (elf_kind(elf) != ELF_K_ELF) {
                elf_end(elf);
                return -EBADMSG;
        }
        *ret = elf;
        return 0;
}

int runtime_elf_dynsym_foreach(Elf *elf, RuntimeElfSymbolFn fn, void *userdata)
{
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;

        while ((scn = elf_nextscn(elf, scn))) {
                Elf_Data *d;
                size_t n;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0)
                        continue;
                d = elf_getdata(scn, NULL);
                if (!d)
                        return -EBADMSG;
                n = sh.sh_size / sh.sh_entsize;
                for (size_t i = 0; i < n; i++) {
                        GElf_Sym sym;
                        const char *name;
                        int r;

                        if (!gelf_getsym(d, i, &sym) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
                                continue;
                        name = elf_strptr(elf, sh.sh_link, sym.st_name);
                        if (!name)
                                continue;
                        r = fn(&sym, name, userdata);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        return -ENOENT;
}
