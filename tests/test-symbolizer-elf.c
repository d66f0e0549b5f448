/* SPDX-License-Identifier: GPL-2.0-only */
/* Symbol-table corner cases on real binaries compiled here, through the process table and the
 * symbolizer (no BPF): PLT entries (lazy binding, -z now, IBT's .plt.sec, .plt.got, a static
 * binary's IRELATIVE PLT) named "func@plt" as objdump names them; addresses in gaps between
 * functions and past sizeless symbols; versioned symbol names (.symver aliases, glibc's
 * __libc_start_main); room made before large reads (DWARF, a large symbol table). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "symbolizer/symbolizer.h"
#include "tracker/process-table.h"

#include "lib/test-child.h"
#include "lib/test-util.h"

static const char program[] =
        "#define _GNU_SOURCE\n"
        "#include <dlfcn.h>\n"
        "#include <stdio.h>\n"
        "#include <stdlib.h>\n"
        "#include <string.h>\n"
        "#include <time.h>\n"
        "#include <unistd.h>\n"
        "volatile size_t sink;\n"
        "__attribute__((noinline)) void hot(const char *s) { sink += strlen(s) + (size_t)abs((int)sink); }\n"
        /* A sized function followed by 32 bytes no symbol covers, a sizeless one, and a sized one
         * after it. */
        "__asm__(\".text\\n.p2align 4\\n\"\n"
        "        \".globl profd_sized\\n.type profd_sized,@function\\nprofd_sized:\\nnop\\nret\\n\"\n"
        "        \".size profd_sized,.-profd_sized\\n.fill 32,1,0xcc\\n\"\n"
        "        \".globl profd_nosize\\n.type profd_nosize,@function\\nprofd_nosize:\\nnop\\nret\\n\"\n"
        "        \".fill 32,1,0xcc\\n\"\n"
        "        \".globl profd_after\\n.type profd_after,@function\\nprofd_after:\\nret\\n\"\n"
        "        \".size profd_after,.-profd_after\\n\");\n"
        "void profd_sized(void), profd_nosize(void), profd_after(void);\n"
        "extern char _init[];\n"
        "int main(int argc, char **argv)\n"
        "{\n"
        "        struct timespec ts;\n"
        "        char c;\n"
        "        clock_gettime(CLOCK_MONOTONIC, &ts);\n"
        "        hot(argv[0]);\n"
        "        void *lsm = NULL, *v1 = NULL, *v2 = NULL;\n"
        "#ifndef STATIC\n"
        "        lsm = dlsym(RTLD_DEFAULT, \"__libc_start_main\");\n"
        "        if (argc > 1) {\n"
        "                void *h = dlopen(argv[1], RTLD_NOW);\n"
        "                v1 = h ? dlvsym(h, \"vfunc\", \"V_1\") : NULL;\n"
        "                v2 = h ? dlvsym(h, \"vfunc\", \"V_2\") : NULL;\n"
        "        }\n"
        "#endif\n"
        "        printf(\"%p %p %p %p %p %p %p %p %p\\n\", (void *)main, (void *)strlen, (void *)_init,\n"
        "               (void *)profd_sized, (void *)profd_nosize, (void *)profd_after, lsm, v1, v2);\n"
        "        fflush(stdout);\n"
        "        while (read(0, &c, 1) > 0)\n"
        "                ;\n"
        "        return 0;\n"
        "}\n";

static const char libv[] = "__attribute__((noinline)) int vfunc_v1(int x) { return x + 1; }\n"
                           "__attribute__((noinline)) int vfunc_v2(int x) { return x + 2; }\n"
                           "__asm__(\".symver vfunc_v1, vfunc@V_1\");\n"
                           "__asm__(\".symver vfunc_v2, vfunc@@V_2\");\n";
static const char libv_map[] = "V_1 { global: vfunc; local: *; };\nV_2 { global: vfunc; } V_1;\n";

enum { A_MAIN, A_STRLEN, A_INIT, A_SIZED, A_NOSIZE, A_AFTER, A_LSM, A_V1, A_V2, _A_MAX };

typedef struct Child {
        pid_t pid;
        int to;
        uint64_t a[_A_MAX];
} Child;

static int child_start(const char *path, const char *arg, Child *c)
{
        int from = -1;
        char buf[512];
        ssize_t n;
        void *p[_A_MAX];

        c->pid = fork_piped(&c->to, &from);
        if (c->pid < 0)
                return c->pid;
        if (c->pid == 0) {
                execl(path, path, arg, (char *)NULL);
                _exit(127);
        }
        n = read(from, buf, sizeof(buf) - 1);
        close(from);
        if (n <= 0)
                return -EIO;
        buf[n] = 0;
        /* glibc prints NULL as "(nil)", which %p reads back as 0 only after a rewrite. */
        for (char *s; (s = strstr(buf, "(nil)"));)
                memcpy(s, "0x0  ", 5);
        if (sscanf(buf, "%p %p %p %p %p %p %p %p %p", &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7],
                   &p[8]) != _A_MAX)
                return -EIO;
        for (size_t i = 0; i < _A_MAX; i++)
                c->a[i] = (uint64_t)p[i];
        return 0;
}

static void child_stop(Child *c)
{
        close(c->to);
        waitpid(c->pid, NULL, 0);
}

typedef struct Ctx {
        ProcessTable *procs;
        Symbolizer *sym;
        Process *p;
} Ctx;

/* Name and system name at a runtime address; "(none)" when no mapping holds it. */
static const char *name_at(Ctx *x, uint64_t addr, char *sysname, size_t sysname_size)
{
        static char name[4096];
        const ProcMapping *m = process_find_mapping(x->p, addr);
        SymResult res;

        if (sysname)
                snprintf(sysname, sysname_size, "(none)");
        if (!m || symbolizer_user(x->sym, x->p, m, addr, &res) < 0)
                return "(none)";
        /* The outermost frame carries the symbol-table name. */
        snprintf(name, sizeof(name), "%s", res.frames[res.n_frames - 1].name);
        if (sysname)
                snprintf(sysname, sysname_size, "%s", res.frames[res.n_frames - 1].system_name);
        return name;
}

/* Section bounds of a file, from its section headers. */
static bool section_of(const char *path, const char *want, uint64_t *ret_addr, uint64_t *ret_size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        Elf *elf;
        Elf_Scn *scn = NULL;
        size_t shstrndx;
        bool found = false;

        if (fd < 0)
                return false;
        elf_version(EV_CURRENT);
        elf = elf_begin(fd, ELF_C_READ, NULL);
        if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0)
                while ((scn = elf_nextscn(elf, scn))) {
                        GElf_Shdr sh;
                        const char *n;
                        if (gelf_getshdr(scn, &sh) && (n = elf_strptr(elf, shstrndx, sh.sh_name)) &&
                            strcmp(n, want) == 0) {
                                *ret_addr = sh.sh_addr;
                                *ret_size = sh.sh_size;
                                found = true;
                                break;
                        }
                }
        elf_end(elf);
        close(fd);
        return found;
}

/* Every "ADDR <func@plt>:" label objdump prints for the PLT sections (demangled with -C) must be
 * what profd names the entry's first and eighth byte (entries are 8 or 16 bytes). Returns the
 * number of entries compared, 0 if one differs. */
/* skip: "\nLABEL\n..." labels objdump gives what is no PLT entry (see test_aarch64_plt()) */
static unsigned compare_with_tool(Ctx *x, const char *objdump, const char *bin, uint64_t bias, bool demangle,
                                  const char *skip)
{
        char cmd[1024], line[4096];
        unsigned n = 0, bad = 0, skipped = 0;
        FILE *f;

        snprintf(cmd, sizeof(cmd), "%s -d %s -j .plt -j .plt.sec -j .plt.got '%s' 2>/dev/null", objdump,
                 demangle ? "-C" : "", bin);
        f = popen(cmd, "r");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f)) {
                unsigned long long vaddr;
                char *label, *end;
                size_t len;
                /* "0000000000001080 <abs@plt>:"; PLT0 reads "<abs@plt-0x10>" in some sections. C++
                 * labels hold '<' and '>' themselves. */
                line[strcspn(line, "\n")] = 0;
                len = strlen(line);
                vaddr = strtoull(line, &end, 16);
                if (end == line || strncmp(end, " <", 2) != 0 || len < 3 ||
                    strcmp(line + len - 2, ">:") != 0)
                        continue;
                label = end + 2;
                line[len - 2] = 0;
                if (!strstr(label, "@plt") || strstr(label, "@plt-") || strstr(label, "@plt+"))
                        continue;
                if (skip && strstr(skip, label)) {
                        skipped++;
                        continue;
                }
                for (unsigned off = 0; off < 8; off += 7) {
                        const char *got = name_at(x, bias + vaddr + off, NULL, 0);
                        size_t gl = strlen(got);
                        /* IRELATIVE slots: objdump has no symbol ("*ABS*+0xRESOLVER@plt"), profd
                         * names the IFUNC whose resolver it is */
                        if (strncmp(label, "*ABS*", 5) == 0 && gl > 4 && strcmp(got + gl - 4, "@plt") == 0 &&
                            strncmp(got, "*ABS*", 5) != 0)
                                continue;
                        if (strcmp(got, label) != 0) {
                                check(false, "%s: PLT entry %#llx+%u is '%s', objdump says '%s'", bin, vaddr,
                                      off, got, label);
                                bad++;
                        }
                }
                n++;
        }
        pclose(f);
        if (skip)
                printf("%s: %u objdump labels skipped (TLS descriptor trampoline)\n", bin, skipped);
        return bad ? 0 : n;
}

static unsigned compare_with_objdump(Ctx *x, const char *bin, uint64_t bias, bool demangle)
{
        return compare_with_tool(x, "objdump", bin, bias, demangle, NULL);
}

/* An aarch64 library (Debian's arm64 libc, libstdc++) mapped executable into this process, as a
 * process would map it: its PLT entries (adrp/ldr/add/br, no sh_entsize) named as binutils'
 * aarch64 objdump names them. */
static void test_aarch64_plt(const char *file)
{
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        const ProcMapping *m;
        static char skip[65536];
        struct stat st;
        unsigned n;
        void *a;
        Ctx x;
        int fd;

        fd = open(file, O_RDONLY | O_CLOEXEC);
        if (!check(fd >= 0 && fstat(fd, &st) == 0, "%s: opened", file))
                return;
        a = mmap(NULL, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
        close(fd);
        if (!check(a != MAP_FAILED, "%s: mapped", file))
                return;
        if (process_table_new(NSEC_PER_SEC, &procs) < 0 || symbolizer_new(&sym) < 0)
                goto out;
        x = (Ctx){.procs = procs, .sym = sym};
        if (!check(process_table_get(procs, getpid(), &x.p) == 0, "%s: this process read", file))
                goto out;
        m = process_find_mapping(x.p, (uint64_t)a);
        if (!check(m && m->bias_known, "%s: its mapping has a known load bias", file))
                goto out;
        /* objdump labels one 16-byte PLT slot per .rela.plt relocation, TLSDESC ones too, so the
         * TLS descriptor trampoline after the last entry gets their names: not compared. */
        {
                char cmd[1024], line[1024];
                size_t len = 1;
                FILE *r;

                skip[0] = '\n';
                skip[1] = 0;
                snprintf(cmd, sizeof(cmd),
                         "readelf -rWC '%s' | grep ' R_AARCH64_TLSDESC ' | "
                         "sed -E 's/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +//; s/ [+] [0-9a-f]+$//'",
                         file);
                r = popen(cmd, "r");
                while (r && fgets(line, sizeof(line), r)) {
                        line[strcspn(line, "@\n")] = 0;
                        len += snprintf(skip + len, sizeof(skip) - len, "%s@plt\n", line);
                        if (len >= sizeof(skip))
                                break;
                }
                if (r)
                        pclose(r);
        }
        n = compare_with_tool(&x, "aarch64-linux-gnu-objdump", file, m->load_bias, true, skip);
        check(n >= 10, "%s: %u aarch64 PLT entries named as aarch64-linux-gnu-objdump names them", file, n);
out:
        munmap(a, st.st_size);
}

static bool has_section(const char *bin, const char *name)
{
        uint64_t a, s;
        return section_of(bin, name, &a, &s);
}

static void test_variant(const char *dir, const char *variant, const char *flags, const char *lib)
{
        char src[256], bin[256], cmd[2048], sysname[512];
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        bool is_static = strstr(flags, "-static") != NULL;
        uint64_t plt, plt_size, init, init_size;
        Child c = {.pid = -1, .to = -1};
        Ctx x;

        snprintf(src, sizeof(src), "%s/prog.c", dir);
        snprintf(bin, sizeof(bin), "%s/prog-%s", dir, variant);
        snprintf(cmd, sizeof(cmd), "gcc -O1 -g -fno-builtin %s %s -o '%s' '%s' %s 2>&1", flags,
                 is_static ? "-DSTATIC" : "", bin, src, is_static ? "" : "-ldl");
        if (system(cmd) != 0) {
                printf("(gcc cannot build the %s variant here (%s): not checked)\n", variant, flags);
                return;
        }
        if (process_table_new(NSEC_PER_SEC, &procs) < 0 || symbolizer_new(&sym) < 0 ||
            !check(child_start(bin, lib, &c) == 0, "%s: started", variant))
                return;
        x = (Ctx){.procs = procs, .sym = sym};
        if (!check(process_table_get(procs, c.pid, &x.p) == 0, "%s: process read", variant))
                goto out;
        const ProcMapping *m = process_find_mapping(x.p, c.a[A_MAIN]);
        if (!check(m && m->bias_known, "%s: main's mapping has a known load bias", variant))
                goto out;
        uint64_t bias = m->load_bias;

        /* PLT entries, as objdump names them. */
        if (strcmp(variant, "ibt") == 0)
                check(has_section(bin, ".plt.sec"), "ibt: the linker made a .plt.sec");
        if (!is_static) {
                unsigned n = compare_with_objdump(&x, bin, bias, false);
                check(n >= 5,
                      "%s: %u PLT entries named as objdump names them (abs, strlen, clock_gettime, "
                      "__cxa_finalize in .plt.got, ...)",
                      variant, n);
        } else {
                /* A static binary's PLT (8-byte entries) jumps through IRELATIVE GOT slots, one
                 * per IFUNC the program calls (objdump has no names for them): each entry is named
                 * after the IFUNC whose resolver the relocation names; hot() calls strlen. */
                unsigned named = 0, total = 0;
                bool strlen_seen = false;
                if (section_of(bin, ".plt", &plt, &plt_size))
                        for (uint64_t off = 0; off + 8 <= plt_size; off += 8, total++) {
                                const char *nm = name_at(&x, bias + plt + off, NULL, 0);
                                size_t len = strlen(nm);
                                named += len > 4 && strcmp(nm + len - 4, "@plt") == 0;
                                strlen_seen |= strcmp(nm, "strlen@plt") == 0;
                        }
                check(total > 0 && named == total && strlen_seen,
                      "static: %u of %u IRELATIVE PLT entries named func@plt, strlen@plt among them", named,
                      total);
        }
        if (section_of(bin, ".plt", &plt, &plt_size) && !is_static) {
                /* PLT0 (the lazy resolver's trampoline) is no function's entry. */
                const char *nm = name_at(&x, bias + plt + 2, NULL, 0);
                check(strcmp(nm, "[plt]") == 0, "%s: PLT0 is '%s'", variant, nm);
                /* IBT's .plt holds only lazy-binding stubs ("endbr64; push INDEX; jmp PLT0"),
                 * unnamed by objdump: named after the .rela.plt entry they push. */
                if (strncmp(variant, "ibt", 3) == 0 && plt_size >= 48) {
                        bool all = true;
                        for (uint64_t off = 16; off + 16 <= plt_size; off += 16) {
                                nm = name_at(&x, bias + plt + off + 5, NULL, 0);
                                all &= strlen(nm) > 4 && strcmp(nm + strlen(nm) - 4, "@plt") == 0;
                        }
                        check(all, "%s: every lazy-binding stub in .plt is named func@plt (last: '%s')",
                              variant, nm);
                }
        }

        /* Gaps and sizeless symbols. */
        const char *nm = name_at(&x, c.a[A_SIZED] + 1, NULL, 0);
        check(strcmp(nm, "profd_sized") == 0, "%s: inside a sized function: '%s'", variant, nm);
        nm = name_at(&x, c.a[A_SIZED] + 2 + 10, NULL, 0);
        check(strncmp(nm, "[unknown] ", 10) == 0, "%s: past a sized function's end, in a gap: '%s'", variant,
              nm);
        nm = name_at(&x, c.a[A_NOSIZE] + 20, NULL, 0);
        check(strcmp(nm, "profd_nosize") == 0, "%s: after a sizeless symbol, before the next: '%s'", variant,
              nm);
        nm = name_at(&x, c.a[A_AFTER], NULL, 0);
        check(strcmp(nm, "profd_after") == 0, "%s: the next symbol: '%s'", variant, nm);
        if (section_of(bin, ".init", &init, &init_size) && c.a[A_INIT] == bias + init) {
                nm = name_at(&x, c.a[A_INIT] + 1, NULL, 0);
                check(strcmp(nm, "_init") == 0, "%s: sizeless _init inside .init: '%s'", variant, nm);
                nm = name_at(&x, c.a[A_INIT] + init_size, NULL, 0);
                check(strcmp(nm, "_init") != 0, "%s: sizeless _init stops at the end of .init: '%s'",
                      variant, nm);
        }

        /* Versioned names. */
        if (c.a[A_V1] && c.a[A_V2]) {
                nm = name_at(&x, c.a[A_V1], sysname, sizeof(sysname));
                check(strcmp(nm, "vfunc") == 0 && strcmp(sysname, "vfunc") == 0,
                      "%s: vfunc@V_1 named '%s' (system name '%s')", variant, nm, sysname);
                nm = name_at(&x, c.a[A_V2], sysname, sizeof(sysname));
                check(strcmp(nm, "vfunc") == 0 && strcmp(sysname, "vfunc") == 0,
                      "%s: vfunc@@V_2 named '%s' (system name '%s')", variant, nm, sysname);
        }
        if (c.a[A_LSM]) {
                nm = name_at(&x, c.a[A_LSM] + 8, sysname, sizeof(sysname));
                check(strcmp(nm, "__libc_start_main") == 0 && strcmp(sysname, "__libc_start_main") == 0,
                      "%s: glibc's __libc_start_main named '%s' (system name '%s')", variant, nm, sysname);
        }
out:
        child_stop(&c);
}

/* A C++ program's PLT: stubs of C++ functions are demangled, "std::...(char const*)@plt", as
 * objdump -C (and gdb, perf) show them; the system name keeps the mangled one. */
static const char cxx_program[] =
        "#include <cstdio>\n"
        "#include <string>\n"
        "#include <unistd.h>\n"
        "int main(int argc, char **argv)\n"
        "{\n"
        "        std::string s(argv[0]);\n"
        "        s.append(\"x\");\n"
        "        std::printf(\"%p 0 0 0 0 0 0 0 %zu\\n\", (void *)main, s.size());\n"
        "        std::fflush(stdout);\n"
        "        char c;\n"
        "        while (read(0, &c, 1) > 0)\n"
        "                ;\n"
        "}\n";

static void test_cxx(const char *dir)
{
        char src[256], bin[256], cmd[1024];
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        Child c = {.pid = -1, .to = -1};
        FILE *f;

        snprintf(src, sizeof(src), "%s/cxx.cc", dir);
        snprintf(bin, sizeof(bin), "%s/cxx", dir);
        f = fopen(src, "w");
        fputs(cxx_program, f);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "g++ -O1 -o '%s' '%s'", bin, src);
        if (!check(system(cmd) == 0, "c++: compiled") || process_table_new(NSEC_PER_SEC, &procs) < 0 ||
            symbolizer_new(&sym) < 0 || !check(child_start(bin, NULL, &c) == 0, "c++: started"))
                return;
        Ctx x = {.procs = procs, .sym = sym};
        const ProcMapping *m;
        if (check(process_table_get(procs, c.pid, &x.p) == 0, "c++: process read") &&
            (m = process_find_mapping(x.p, c.a[A_MAIN])) && m->bias_known) {
                unsigned n = compare_with_objdump(&x, bin, m->load_bias, true);
                check(n >= 5, "c++: %u PLT entries named as objdump -C names them", n);
        }
        child_stop(&c);
}

/* The value of the first metric line starting with prefix, or -1. */
static long long metric_value(Symbolizer *sym, const char *prefix)
{
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        long long v = -1;

        if (!f)
                return -1;
        symbolizer_write_metrics(sym, f);
        fclose(f);
        for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, prefix, strlen(prefix)) == 0 && l[strlen(prefix)] == ' ') {
                        v = strtoll(l + strlen(prefix) + 1, NULL, 10);
                        break;
                }
        free(buf);
        return v;
}

/* Line of the innermost frame at addr; 0 when none. */
static int line_at(Ctx *x, uint64_t addr)
{
        const ProcMapping *m = process_find_mapping(x->p, addr);
        SymResult res;

        if (!m || symbolizer_user(x->sym, x->p, m, addr, &res) < 0 || res.n_frames == 0)
                return 0;
        return res.frames[0].line;
}

/* Room made before a DWARF open (exe_cache_reserve()): with a peak limit every RSS passes, each
 * open of an executable's compressed DWARF closes the other open executables first, the one being
 * read keeps its DWARF, and a closed one is opened again when an address not resolved yet needs it;
 * nothing is closed without a limit. Two copies of the program with compressed DWARF (-gz), so
 * both go through the reserve. */
static void test_reserve(const char *dir)
{
        char bin[3][256], cmd[1024], path[256];
        Child c[3] = {{.pid = -1, .to = -1}, {.pid = -1, .to = -1}, {.pid = -1, .to = -1}};
        Process *p[3] = {};
        FILE *f;

        for (int i = 0; i < 2; i++) {
                snprintf(bin[i], sizeof(bin[i]), "%s/prog-gz%d", dir, i);
                snprintf(cmd, sizeof(cmd),
                         "gcc -O1 -g -gz=zlib -fcf-protection=none -o '%s' '%s/prog.c' -ldl 2>&1", bin[i],
                         dir);
                if (system(cmd) != 0) {
                        printf("(gcc cannot build with -gz=zlib here: the reserve is not checked)\n");
                        return;
                }
        }
        /* A third copy without DWARF whose symbol table passes SYMBOLIZER_RESERVE_MIN_BYTES (15,000
         * functions with long names: ~0.35 MiB of symbols, ~0.9 MiB of names): room is made
         * before it is read too. */
        snprintf(path, sizeof(path), "%s/many.c", dir);
        if (!(f = fopen(path, "w")))
                return;
        for (int i = 0; i < 15000; i++)
                fprintf(f, "void profd_reserve_test_function_with_a_long_name_number_%05d(void) {}\n", i);
        fclose(f);
        snprintf(bin[2], sizeof(bin[2]), "%s/prog-many", dir);
        snprintf(cmd, sizeof(cmd), "gcc -O0 -fcf-protection=none -o '%s' '%s/prog.c' '%s' -ldl 2>&1", bin[2],
                 dir, path);
        if (!check(system(cmd) == 0, "reserve: built a program with 15,000 functions"))
                return;
        for (int limited = 1; limited >= 0; limited--) {
                _cleanup_(process_table_freep) ProcessTable *procs = NULL;
                _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
                const char *what = limited ? "peak limit 1 byte" : "no peak limit";
                int lines[3];

                if (process_table_new(NSEC_PER_SEC, &procs) < 0 || symbolizer_new(&sym) < 0)
                        return;
                symbolizer_set_peak_limit(sym, limited ? 1 : 0);
                for (int i = 0; i < 3; i++)
                        if (!check(child_start(bin[i], NULL, &c[i]) == 0 &&
                                           process_table_get(procs, c[i].pid, &p[i]) == 0,
                                   "reserve: copy %d started and read", i))
                                goto out;
                Ctx x0 = {.procs = procs, .sym = sym, .p = p[0]},
                    x1 = {.procs = procs, .sym = sym, .p = p[1]};
                /* main's first line in copy 0, then copy 1 (which closes copy 0 first when limited),
                 * then another address of copy 0 (opened again). */
                lines[0] = line_at(&x0, c[0].a[A_MAIN]);
                lines[1] = line_at(&x1, c[1].a[A_MAIN]);
                lines[2] = line_at(&x0, c[0].a[A_MAIN] + 4);
                check(lines[0] > 0 && lines[0] == lines[1] && lines[2] > 0,
                      "reserve, %s: main's lines from DWARF in both copies, before and after a close (%d, "
                      "%d, %d)",
                      what, lines[0], lines[1], lines[2]);
                long long closed =
                        metric_value(sym, "profd_symbolizer_executables_closed_total{reason=\"reserve\"}");
                /* The large symbol table, read with the two copies open. */
                Ctx x2 = {.procs = procs, .sym = sym, .p = p[2]};
                const char *nm = name_at(&x2, c[2].a[A_MAIN], NULL, 0);
                long long closed_syms =
                        metric_value(sym, "profd_symbolizer_executables_closed_total{reason=\"reserve\"}") -
                        closed;
                check(strcmp(nm, "main") == 0 && closed_syms == (limited ? 1 : 0),
                      "reserve, %s: a 15,000-symbol table read (main named '%s') after closing %lld other "
                      "executable(s)",
                      what, nm, closed_syms);
                long long made = metric_value(sym, "profd_symbolizer_reserves_total{result=\"made\"}");
                long long shrt = metric_value(sym, "profd_symbolizer_reserves_total{result=\"short\"}");
                if (limited)
                        check(closed >= 2 && made + shrt >= 3 && shrt >= 1,
                              "reserve, %s: executables closed before DWARF opens (%lld closed, %lld opens "
                              "with room made, %lld short: nothing left to close)",
                              what, closed, made, shrt);
                else
                        check(closed == 0 && made == 0 && shrt == 0,
                              "reserve, %s: nothing closed (%lld, %lld, %lld)", what, closed, made, shrt);
        out:
                for (int i = 0; i < 3; i++)
                        if (c[i].pid > 0) {
                                child_stop(&c[i]);
                                c[i] = (Child){.pid = -1, .to = -1};
                        }
        }
}

int main(int argc, char **argv)
{
        char dir[] = "/tmp/profd-test-symelf-XXXXXX", path[256], lib[256], cmd[1024];
        FILE *f;

        setvbuf(stdout, NULL, _IOLBF, 0);
        if (argc > 1 && strcmp(argv[1], "--aarch64-plt") == 0) {
                /* test-symbolizer-elf --aarch64-plt FILE...: see test_aarch64_plt() */
                for (int i = 2; i < argc; i++)
                        test_aarch64_plt(argv[i]);
                printf("%s: %u failure(s)\n", failures ? "FAIL" : "PASS", failures);
                return failures ? 1 : 0;
        }
        if (!mkdtemp(dir))
                return 1;
        snprintf(path, sizeof(path), "%s/prog.c", dir);
        f = fopen(path, "w");
        fputs(program, f);
        fclose(f);
        snprintf(path, sizeof(path), "%s/libv.c", dir);
        f = fopen(path, "w");
        fputs(libv, f);
        fclose(f);
        snprintf(path, sizeof(path), "%s/libv.map", dir);
        f = fopen(path, "w");
        fputs(libv_map, f);
        fclose(f);
        snprintf(lib, sizeof(lib), "%s/libv.so", dir);
        snprintf(cmd, sizeof(cmd),
                 "gcc -shared -fPIC -O1 -o '%s' '%s/libv.c' -Wl,--version-script='%s/libv.map'", lib, dir,
                 dir);
        check(system(cmd) == 0, "built a library with versioned symbols (vfunc@V_1, vfunc@@V_2)");
        /* The library's .symtab spells the versions into the names: what is being tested. */
        snprintf(cmd, sizeof(cmd), "readelf -sW '%s' | grep -q ' vfunc@@V_2$'", lib);
        check(system(cmd) == 0, "its .symtab has 'vfunc@@V_2'");

        test_variant(dir, "lazy", "-fcf-protection=none -Wl,-z,lazy", lib);
        test_variant(dir, "now", "-fcf-protection=none -Wl,-z,now", lib);
        test_variant(dir, "ibt", "-fcf-protection=full -Wl,-z,ibtplt", lib);
        test_variant(dir, "ibt-now", "-fcf-protection=full -Wl,-z,ibtplt -Wl,-z,now", lib);
        test_variant(dir, "static", "-static -fcf-protection=none", NULL);
        test_cxx(dir);
        test_reserve(dir);

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        (void)system(cmd);
        printf("%s: %u failure(s)\n", failures ? "FAIL" : "PASS", failures);
        return failures ? 1 : 0;
}
