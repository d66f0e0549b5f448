/* SPDX-License-Identifier: GPL-2.0-only */
/* /proc/PID/maps parsing, the process table and the symbolizer on odd processes: paths with
 * spaces and a newline, a program run from a memfd, the vDSO, exit and the grace period, the
 * real /proc/kallsyms; the table with thousands of exited processes (grace period, reused pids,
 * eviction oldest first). No BPF. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer/symbolizer.h"
#include "tracker/proc-maps.h"
#include "tracker/process-table.h"

#include "lib/test-child.h"
#include "lib/test-util.h"

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static int count_line(const ProcMapsLine *l, void *userdata)
{
        (*(unsigned *)userdata)++;
        return 0;
}

static void test_parse(void)
{
        static const struct {
                const char *line;
                int ok;
                const char *path;
                bool x, deleted;
        } cases[] = {
                {"55d0c8a00000-55d0c8a02000 r-xp 00002000 fd:01 1234567                    /usr/bin/cat\n",
                 1, "/usr/bin/cat", true, false},
                {"7f0000000000-7f0000001000 r-xp 00000000 00:00 0 \n", 1, "", true, false},
                {"7f0000000000-7f0000001000 rw-p 00000000 00:00 0\n", 1, "", false, false},
                {"7ffd1c5f0000-7ffd1c5f2000 r-xp 00000000 00:00 0                          [vdso]\n", 1,
                 "[vdso]", true, false},
                {"7f1000000000-7f1000010000 r-xp 00000000 00:01 99                 /memfd:jit code "
                 "(deleted)\n",
                 1, "/memfd:jit code", true, true},
                {"400000-401000 r-xp 00000000 08:02 42 /opt/my app/bin/my prog\n", 1,
                 "/opt/my app/bin/my prog", true, false},
                {"400000-401000 r-xp 00000000 08:02 42 /tmp/a\\012b (deleted)\n", 1, "/tmp/a\\012b", true,
                 true},
                {"400000-401000 r-xs 00000000 08:02 42 /dev/shm/x\n", 1, "/dev/shm/x", true, false},
                {"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n", 1,
                 "[vsyscall]", true, false},
                {"400000-401000 r-xp 00000000 fd:01 42 /file (deleted) (deleted)\n", 1, "/file (deleted)",
                 true, true},
                /* malformed */
                {"", 0},
                {"\n", 0},
                {"garbage\n", 0},
                {"400000 r-xp 00000000 08:02 42 /x\n", 0},
                {"401000-400000 r-xp 00000000 08:02 42 /x\n", 0},
                {"400000-401000 rxp 00000000 08:02 42 /x\n", 0},
                {"400000-401000 r-xq 00000000 08:02 42 /x\n", 0},
                {"400000-401000 r-xp zz 08:02 42 /x\n", 0},
                {"400000-401000 r-xp 00000000 0802 42 /x\n", 0},
                {"400000-401000 r-xp 00000000 08:02 x42 /x\n", 0},
                {"400000-401000 r-xp 00000000 08:02\n", 0},
                {"10000000000000000-10000000000000001 r-xp 00000000 08:02 42 /x\n", 0},
                {"400000-401000 r-xp 00000000 08:02 123456789012345678901234 /x\n", 0},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *copy = strdup(cases[i].line);
                ProcMapsLine l;
                int r = proc_maps_parse_line(copy, &l);
                if (cases[i].ok)
                        check(r == 0 && strcmp(l.path, cases[i].path) == 0 && l.executable == cases[i].x &&
                                      l.deleted == cases[i].deleted,
                              "parse %zu: '%s' -> path '%s'%s", i, cases[i].path,
                              r == 0 ? l.path : "(error)", cases[i].deleted ? " (deleted)" : "");
                else
                        check(r == -EBADMSG, "parse %zu: malformed line rejected (%d)", i, r);
                free(copy);
        }
        {
                char line[] = "55d0c8a00000-55d0c8a02000 r-xp 00002000 fd:01 1234567 /usr/bin/cat";
                ProcMapsLine l;
                check(proc_maps_parse_line(line, &l) == 0 && l.start == 0x55d0c8a00000 &&
                              l.end == 0x55d0c8a02000 && l.offset == 0x2000 && l.dev_major == 0xfd &&
                              l.dev_minor == 1 && l.inode == 1234567 && l.readable && !l.writable &&
                              !l.shared,
                      "parse: every field of a full line");
        }

        /* Hostile input: mutated lines never crash and either parse or say -EBADMSG. */
        uint64_t seed = 42;
        unsigned bad = 0, good = 0;
        for (unsigned i = 0; i < 200000; i++) {
                char line[160] =
                        "7f1000000000-7f1000010000 r-xp 00001000 fd:01 12345   /usr/lib/lib with space.so\n";
                size_t len = strlen(line);
                for (int k = 0; k < 1 + (int)(i % 4); k++) {
                        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                        line[(seed >> 33) % len] = (char)(seed >> 17);
                }
                line[len] = 0;
                ProcMapsLine l;
                int r = proc_maps_parse_line(line, &l);
                if (r == 0) {
                        good++;
                        if (l.end < l.start || strlen(l.path) > len) {
                                check(false, "mutated line gave inconsistent fields");
                                break;
                        }
                } else if (r == -EBADMSG)
                        bad++;
        }
        check(good + bad == 200000, "200000 mutated lines: %u parsed, %u rejected, no crash", good, bad);

        /* A whole file with a NUL byte and malformed lines: counted, the rest read. */
        char text[] =
                "400000-401000 r-xp 00000000 08:02 42 /a\nnonsense\n500000-501000 r-xp 00000000 08:02 43 "
                "/b\n"
                "600000-601000 r-xp 00000000 08:02 44 /c\0d\n700000-701000 r-xp 00000000 08:02 45 /e\n";
        FILE *f = fmemopen(text, sizeof(text) - 1, "r");
        unsigned n = 0, nbad = 0;
        int r = proc_maps_read(f, count_line, &n, &nbad);
        fclose(f);
        check(r == 0 && n == 3 && nbad == 2,
              "file with a NUL and a malformed line: 3 read, 2 counted bad (%u/%u)", n, nbad);
}

static const char program[] =
        "#include <stdio.h>\n"
        "#include <unistd.h>\n"
        "#include <time.h>\n"
        "__attribute__((noinline)) int odd_leaf(int x) { return x * 3 + 1; }\n"
        "__attribute__((noinline)) int odd_caller(int x) { return odd_leaf(x) + 2; }\n"
        /* Rust legacy mangling, spelled through asm labels. */
        "__attribute__((noinline)) void rs_write(void) "
        "__asm__(\"_ZN4core3fmt5write17h0123456789abcdefE\");\n"
        "void rs_write(void) { __asm__ volatile(\"\"); }\n"
        "__attribute__((noinline)) void rs_drop(void)\n"
        "        __asm__(\"_ZN27_$LT$Foo$u20$as$u20$Bar$GT$4drop17h0123456789abcdefE\");\n"
        "void rs_drop(void) { __asm__ volatile(\"\"); }\n"
        "#include <fcntl.h>\n"
        "#include <sys/mman.h>\n"
        "int main(int argc, char **argv)\n"
        "{\n"
        "        char c;\n"
        "        void *x = NULL;\n"
        "        struct timespec ts;\n"
        "        clock_gettime(CLOCK_MONOTONIC, &ts);\n"
        "        /* With an argument: map that file executable, as a loader or JIT might. */\n"
        "        if (argc > 1)\n"
        "                x = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE, open(argv[1], O_RDONLY), "
        "0);\n"
        "        printf(\"%d %p %p %p %p %p\\n\", odd_caller(1), (void *)odd_leaf, (void *)odd_caller,\n"
        "               (void *)rs_write, (void *)rs_drop, x);\n"
        "        fflush(stdout);\n"
        "        while (read(0, &c, 1) > 0)\n"
        "                ;\n"
        "        return 0;\n"
        "}\n";

typedef struct Child {
        pid_t pid;
        int to;
        uint64_t leaf, caller, rs_write, rs_drop, mapped;
} Child;

/* Runs path (or, with memfd >= 0, the memfd via fexecve) and reads the addresses it prints. */
static int child_start(const char *path, int memfd, const char *arg, Child *c)
{
        int from = -1;
        char buf[256];
        ssize_t n;
        int dummy;
        void *a, *b, *rw, *rd, *x;

        c->pid = fork_piped(&c->to, &from);
        if (c->pid < 0)
                return c->pid;
        if (c->pid == 0) {
                char *argv[] = {(char *)"odd", (char *)arg, NULL}, *envp[] = {NULL};
                if (memfd >= 0)
                        fexecve(memfd, argv, envp);
                else
                        execve(path, argv, envp);
                _exit(127);
        }
        n = read(from, buf, sizeof(buf) - 1);
        close(from);
        if (n <= 0)
                return -EIO;
        buf[n] = 0;
        if (sscanf(buf, "%d %p %p %p %p %p", &dummy, &a, &b, &rw, &rd, &x) != 6)
                return -EIO;
        c->mapped = (uint64_t)x;
        c->leaf = (uint64_t)a;
        c->caller = (uint64_t)b;
        c->rs_write = (uint64_t)rw;
        c->rs_drop = (uint64_t)rd;
        return 0;
}

static void child_stop(Child *c)
{
        close(c->to);
        waitpid(c->pid, NULL, 0);
}

static const char *name_at(Symbolizer *sym, ProcessTable *procs, pid_t pid, uint64_t addr,
                           const ProcMapping **ret_m)
{
        static char name[512];
        Process *p;
        const ProcMapping *m;
        SymResult res;

        if (process_table_get(procs, pid, &p) < 0)
                return "(no process)";
        m = process_find_mapping(p, addr);
        if (ret_m)
                *ret_m = m;
        if (!m)
                return "(no mapping)";
        if (symbolizer_user(sym, p, m, addr, &res) < 0)
                return "(error)";
        snprintf(name, sizeof(name), "%s", res.frames[0].name);
        return name;
}

static void test_odd_processes(void)
{
        char dir[] = "/tmp/profd-test-sym-XXXXXX", src[256], bin[256], odd[512], cmd[4096];
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        const ProcMapping *m;
        Child c;
        int r;

        if (!mkdtemp(dir) || process_table_new(5 * NSEC_PER_SEC, &procs) < 0 || symbolizer_new(&sym) < 0) {
                check(false, "setup");
                return;
        }
        snprintf(src, sizeof(src), "%s/odd.c", dir);
        snprintf(bin, sizeof(bin), "%s/odd", dir);
        FILE *f = fopen(src, "w");
        fputs(program, f);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "gcc -g -O1 -o '%s' '%s'", bin, src);
        if (!check(system(cmd) == 0, "compiled %s", bin))
                return;

        /* A path with spaces and a newline: /proc/PID/maps escapes it, map_files still opens it. */
        snprintf(odd, sizeof(odd), "%s/dir with space/new\nline prog", dir);
        snprintf(cmd, sizeof(cmd), "%s/dir with space", dir);
        mkdir(cmd, 0755);
        snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", bin, odd);
        check(system(cmd) == 0, "copied to a path with a space and a newline");
        r = child_start(odd, -1, NULL, &c);
        if (check(r == 0, "started the oddly named program (%d)", r)) {
                const char *n = name_at(sym, procs, c.pid, c.leaf, &m);
                check(strcmp(n, "odd_leaf") == 0, "oddly named program: leaf named '%s'", n);
                check(m && strstr(m->path, "new\\012line prog") != NULL,
                      "maps path keeps the kernel's escape: '%s'", m ? m->path : "");
                check(m && m->build_id_size == 20, "build ID read through map_files");
                n = name_at(sym, procs, c.pid, c.rs_write, NULL);
                check(strcmp(n, "core::fmt::write") == 0, "Rust legacy name demangled: '%s'", n);
                n = name_at(sym, procs, c.pid, c.rs_drop, NULL);
                check(strcmp(n, "<Foo as Bar>::drop") == 0, "Rust escapes decoded: '%s'", n);
                child_stop(&c);
        }

        /* A program run from a memfd: "/memfd:NAME (deleted)", only reachable through the fd. */
        int memfd = memfd_create("profd odd", MFD_CLOEXEC);
        int fd = open(bin, O_RDONLY | O_CLOEXEC);
        char buf[65536];
        ssize_t n;
        while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
                if (write(memfd, buf, (size_t)n) != n)
                        break;
        close(fd);
        r = child_start(NULL, memfd, NULL, &c);
        close(memfd);
        if (check(r == 0, "started a program from a memfd (%d)", r)) {
                Process *p;
                process_table_get(procs, c.pid, &p);
                child_stop(&c);
                /* Exit is noticed on refresh; the snapshot and the file stay usable. */
                r = process_table_refresh(procs, c.pid, &p);
                check(r == 0 && p->exited_ns != 0, "memfd program: exit noticed, snapshot kept");
                const char *nm = name_at(sym, procs, c.pid, c.caller + 1, &m);
                check(strcmp(nm, "odd_caller") == 0, "memfd program symbolized after exit: '%s'", nm);
                check(m && strncmp(m->path, "/memfd:profd odd", 16) == 0 && m->deleted,
                      "memfd mapping path '%s'%s", m ? m->path : "", m && m->deleted ? " (deleted)" : "");

                /* After the grace period the process is forgotten. */
                process_table_gc(procs, now_ns() + 6 * NSEC_PER_SEC);
                r = process_table_get(procs, c.pid, &p);
                check(r == -ESRCH, "forgotten after the grace period (%d)", r);
        }

        /* The vDSO: a copy of the kernel's image stands in for the file. */
        r = child_start(bin, -1, NULL, &c);
        if (check(r == 0, "started the program again")) {
                Process *p;
                const ProcMapping *vdso = NULL;
                if (process_table_get(procs, c.pid, &p) == 0)
                        for (size_t i = 0; i < p->n_mappings; i++)
                                if (strcmp(p->mappings[i].path, "[vdso]") == 0)
                                        vdso = &p->mappings[i];
                if (check(vdso != NULL, "process has a [vdso] mapping")) {
                        /* Every text address of the small vDSO belongs to some __vdso_/__kernel_ function
                         * or is padding; find at least one named. */
                        bool named = false;
                        SymResult res;
                        for (uint64_t a = vdso->start; a < vdso->end && !named; a += 16)
                                if (symbolizer_user(sym, p, vdso, a, &res) == 0 && res.symbolized &&
                                    strstr(res.frames[0].name, "vdso"))
                                        named = true;
                        check(named, "vDSO addresses are named (%s)", named ? res.frames[0].name : "none");
                        check(vdso->build_id_size > 0, "vDSO has a build ID");
                }
                child_stop(&c);
        }

        /* A zombie (exited, not reaped) has an empty /proc/PID/maps: a refresh then must not
         * replace the snapshot with nothing. */
        r = child_start(bin, -1, NULL, &c);
        if (check(r == 0, "started a child to become a zombie")) {
                Process *p;
                char statpath[64], st[512] = "";
                size_t before = 0;
                if (process_table_get(procs, c.pid, &p) == 0)
                        before = p->n_mappings;
                close(c.to);
                snprintf(statpath, sizeof(statpath), "/proc/%d/stat", (int)c.pid);
                for (int i = 0; i < 500; i++) {
                        FILE *sf = fopen(statpath, "re");
                        if (sf) {
                                if (!fgets(st, sizeof(st), sf))
                                        st[0] = 0;
                                fclose(sf);
                        }
                        char *cp = strrchr(st, ')');
                        if (cp && cp[1] == ' ' && cp[2] == 'Z')
                                break;
                        usleep(10000);
                }
                char *cp = strrchr(st, ')');
                check(cp && cp[2] == 'Z', "child is a zombie");
                r = process_table_refresh(procs, c.pid, &p);
                check(r == 0 && p->exited_ns != 0 && p->n_mappings == before && before > 0,
                      "zombie: refresh marks it exited and keeps its %zu mappings (has %zu)", before,
                      r == 0 ? p->n_mappings : 0);
                const char *nm = name_at(sym, procs, c.pid, c.leaf, NULL);
                check(strcmp(nm, "odd_leaf") == 0, "zombie still symbolized: '%s'", nm);
                waitpid(c.pid, NULL, 0);
        }

        /* Hostile files mapped executable: garbage, a truncated ELF, an ELF whose program and
         * section headers point past the end. Frames say [unknown]; nothing crashes. */
        {
                static const char *const kinds[] = {"garbage", "truncated-elf", "bad-headers-elf"};
                for (size_t k = 0; k < 3; k++) {
                        char hostile[300];
                        snprintf(hostile, sizeof(hostile), "%s/%s", dir, kinds[k]);
                        if (k == 0)
                                snprintf(cmd, sizeof(cmd), "head -c 8192 /dev/urandom > '%s'", hostile);
                        else if (k == 1)
                                snprintf(cmd, sizeof(cmd), "head -c 8192 '%s' > '%s'", bin, hostile);
                        else
                                /* e_phoff (0x20) and e_shoff (0x28) far beyond the file. */
                                snprintf(cmd, sizeof(cmd),
                                         "head -c 8192 '%s' > '%s' && printf "
                                         "'\\377\\377\\377\\377\\377\\377\\377\\177' | "
                                         "dd of='%s' bs=1 seek=32 conv=notrunc status=none && "
                                         "printf '\\377\\377\\377\\377\\377\\377\\377\\177' | "
                                         "dd of='%s' bs=1 seek=40 conv=notrunc status=none",
                                         bin, hostile, hostile, hostile);
                        if (!check(system(cmd) == 0, "made %s", kinds[k]))
                                continue;
                        r = child_start(bin, -1, hostile, &c);
                        if (!check(r == 0 && c.mapped != 0 && c.mapped != UINT64_MAX, "%s mapped executable",
                                   kinds[k]))
                                continue;
                        const char *nm = name_at(sym, procs, c.pid, c.mapped + 0x10, &m);
                        check(strncmp(nm, "[unknown] ", 10) == 0 && strstr(nm, kinds[k]), "%s: frame '%s'",
                              kinds[k], nm);
                        child_stop(&c);
                }
        }

        /* Unknown pid. */
        {
                Process *p;
                r = process_table_get(procs, 0x3ffffff0, &p);
                check(r == -ESRCH, "nonexistent pid: -ESRCH (%d)", r);
        }

        char *text = NULL;
        size_t size = 0;
        f = open_memstream(&text, &size);
        process_table_write_metrics(procs, f);
        symbolizer_write_metrics(sym, f);
        fclose(f);
        check(strstr(text, "profd_process_table_processes ") &&
                      strstr(text, "profd_symbolizer_lookups_total{") &&
                      strstr(text, "profd_process_table_events_total{event=\"exited\"} ") &&
                      strstr(text, "profd_process_table_events_total{event=\"forgotten\"} 1"),
              "metrics written");
        free(text);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        (void)system(cmd);
}

/* A Go program built with -ldflags=-s (no .symtab): names come from .gopclntab; Go's own
 * runtime.FuncForPC is the reference. Non-PIE and PIE. */
static const char go_program[] =
        "package main\n"
        "\n"
        "import (\n"
        "\t\"bufio\"\n"
        "\t\"fmt\"\n"
        "\t\"os\"\n"
        "\t\"reflect\"\n"
        "\t\"runtime\"\n"
        ")\n"
        "\n"
        "//go:noinline\n"
        "func profdGoWork(n int) int {\n"
        "\ts := 0\n"
        "\tfor i := 0; i < n; i++ {\n"
        "\t\ts += i * 7\n"
        "\t}\n"
        "\treturn s\n"
        "}\n"
        "\n"
        "type T struct{}\n"
        "\n"
        "//go:noinline\n"
        "func (t *T) Method(n int) int { return profdGoWork(n) + 1 }\n"
        "\n"
        "func main() {\n"
        "\ta := reflect.ValueOf(profdGoWork).Pointer() + 4\n"
        "\tb := reflect.ValueOf((*T).Method).Pointer() + 4\n"
        "\tfmt.Printf(\"%d %#x %s %#x %s\\n\", os.Getpid(), a, runtime.FuncForPC(a).Name(), b,\n"
        "\t\truntime.FuncForPC(b).Name())\n"
        "\tbufio.NewReader(os.Stdin).ReadString('\\n')\n"
        "}\n";

static void test_go(void)
{
        char dir[] = "/tmp/profd-test-go-XXXXXX", path[256], cmd[2048];
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;

        if (system("command -v go >/dev/null") != 0) {
                printf("(go is not installed: Go symbolization not checked)\n");
                return;
        }
        if (!mkdtemp(dir) || process_table_new(NSEC_PER_SEC, &procs) < 0 || symbolizer_new(&sym) < 0)
                return;
        snprintf(path, sizeof(path), "%s/main.go", dir);
        FILE *f = fopen(path, "w");
        fputs(go_program, f);
        fclose(f);
        snprintf(path, sizeof(path), "%s/go.mod", dir);
        f = fopen(path, "w");
        fputs("module profdgo\n\ngo 1.16\n", f);
        fclose(f);

        for (int pie = 0; pie < 2; pie++) {
                snprintf(cmd, sizeof(cmd),
                         "cd '%s' && HOME=${HOME:-/root} GOCACHE=%s/gocache "
                         "GOFLAGS=-mod=mod "
                         "go build %s -ldflags='-s -w' -o prog . && readelf -S prog | grep -q ' .symtab' ; "
                         "test $? = 1",
                         dir, dir, pie ? "-buildmode=pie" : "");
                if (!check(system(cmd) == 0, "built a stripped Go program%s (no .symtab)",
                           pie ? " (PIE)" : ""))
                        continue;
                int in[2], out[2];
                if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
                        return;
                pid_t pid = fork();
                if (pid == 0) {
                        dup2(in[0], 0);
                        dup2(out[1], 1);
                        snprintf(path, sizeof(path), "%s/prog", dir);
                        execl(path, path, (char *)NULL);
                        _exit(127);
                }
                close(in[0]);
                close(out[1]);
                char buf[1024] = "", want_a[256], want_b[256];
                ssize_t n = read(out[0], buf, sizeof(buf) - 1);
                close(out[0]);
                buf[n > 0 ? n : 0] = 0;
                unsigned long long a, b;
                int gpid;
                if (check(sscanf(buf, "%d %llx %255s %llx %255s", &gpid, &a, want_a, &b, want_b) == 5,
                          "Go program printed its addresses")) {
                        const char *na = name_at(sym, procs, pid, a, NULL);
                        check(strcmp(na, want_a) == 0, "Go%s: %s (runtime says %s)", pie ? " PIE" : "", na,
                              want_a);
                        const char *nb = name_at(sym, procs, pid, b, NULL);
                        check(strcmp(nb, want_b) == 0, "Go%s: %s (runtime says %s)", pie ? " PIE" : "", nb,
                              want_b);
                }
                close(in[1]);
                waitpid(pid, NULL, 0);
        }
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        (void)system(cmd);
}

static void test_real_kallsyms(void)
{
        FILE *f = fopen("/proc/kallsyms", "re");
        char line[512], name[256] = "";
        uint64_t addr = 0;
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        SymResult res;

        if (!f) {
                printf("(no /proc/kallsyms: skipping the real kallsyms check)\n");
                return;
        }
        while (fgets(line, sizeof(line), f)) {
                char t;
                if (sscanf(line, "%" SCNx64 " %c %255s", &addr, &t, name) == 3 && t == 'T' &&
                    strcmp(name, "schedule") == 0)
                        break;
                addr = 0;
        }
        fclose(f);
        symbolizer_new(&sym);
        if (addr == 0) {
                /* kptr_restrict hides addresses from us: the frame must say so. */
                int r = symbolizer_kernel(sym, 0xffffffff81000000, &res);
                check(r == 0 && !res.symbolized, "real kallsyms hidden: '%s'",
                      r == 0 ? res.frames[0].name : "");
                return;
        }
        int r = symbolizer_kernel(sym, addr + 4, &res);
        check(r == 0 && res.symbolized && strcmp(res.frames[0].name, "schedule") == 0,
              "real /proc/kallsyms: schedule+4 -> '%s'", r == 0 ? res.frames[0].name : "");
}

/* JIT code reported after the read lands in the snapshot, stays there after the process exits,
 * and never takes over part of a file mapping. */
static void test_add_anon(void)
{
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        pid_t pid = getpid();
        Process *p;
        const ProcMapping *m, *file = NULL;
        size_t before;
        /* Far below anything the loader maps. */
        uint64_t a = 0x10000000, b = 0x10004000;

        if (process_table_new(5 * NSEC_PER_SEC, &procs) < 0 || process_table_get(procs, pid, &p) < 0) {
                check(false, "add_anon: table and own process");
                return;
        }
        before = p->n_mappings;
        check(process_find_mapping(p, a) == NULL, "add_anon: nothing at 0x%" PRIx64 " before", a);
        check(process_table_add_anon(procs, pid, a, b) == 1, "add_anon: a new range is added");
        m = process_find_mapping(p, a + 0x100);
        check(m && m->start == a && m->end == b && !m->file && m->path && !m->path[0],
              "add_anon: the range is an anonymous mapping of the snapshot");
        check(process_table_add_anon(procs, pid, a + 0x1000, a + 0x2000) == 0,
              "add_anon: a known range is known");
        check(process_table_add_anon(procs, pid, b - 0x1000, b + 0x1000) == 1 && p->n_mappings == before + 1,
              "add_anon: an overlapping range merges (%zu mappings, %zu before)", p->n_mappings, before);
        for (size_t i = 0; i < p->n_mappings && !file; i++)
                if (p->mappings[i].file)
                        file = &p->mappings[i];
        if (check(file != NULL, "add_anon: own process has a file mapping"))
                check(process_table_add_anon(procs, pid, file->start, file->start + 0x1000) == -EEXIST,
                      "add_anon: never over a file mapping");
        check(process_table_add_anon(procs, 1 << 22, a, b) == -ENOENT, "add_anon: unknown pid refused");
        process_table_mark_exited(procs, pid, now_ns());
        check(process_table_add_anon(procs, pid, 0x20000000, 0x20001000) == -ESRCH,
              "add_anon: exited refused");
        check(process_find_mapping(p, a) != NULL, "add_anon: the range outlives the process");
}

static bool maps_name(const Process *p, const char *base)
{
        for (size_t i = 0; i < p->n_mappings; i++) {
                const char *b = strrchr(p->mappings[i].path, '/');
                if (b && strcmp(b + 1, base) == 0)
                        return true;
        }
        return false;
}

/* A process read again within 100 ms of its last read is read through the maps descriptor that read
 * kept. When it exec'd in between and the exec was not told to the table (the event still in the
 * ring), that descriptor shows the old image's memory, now gone: the re-read must find the new
 * image, not the old one and not an exit. */
static void test_reread_after_exec(void)
{
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        int go[2];
        Process *p;
        pid_t pid;
        int r;

        if (process_table_new(5 * NSEC_PER_SEC, &procs) < 0 || pipe2(go, O_CLOEXEC) < 0) {
                check(false, "setup");
                return;
        }
        pid = fork();
        if (pid == 0) {
                char b;
                close(go[1]);
                /* Waits for the parent's read, then becomes another program. */
                if (read(go[0], &b, 1) == 1)
                        execl("/bin/sleep", "sleep", "5", (char *)NULL);
                _exit(127);
        }
        close(go[0]);
        r = process_table_get(procs, pid, &p);
        check(r == 0 && !maps_name(p, "sleep"), "read before the exec (%d)", r);
        uint64_t t0 = now_ns();
        check(write(go[1], "x", 1) == 1, "told the child to exec");
        char exe[64], target[256] = "";
        snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
        for (int i = 0; i < 500; i++) {
                ssize_t n = readlink(exe, target, sizeof(target) - 1);
                target[n > 0 ? n : 0] = 0;
                if (strstr(target, "sleep"))
                        break;
                usleep(100);
        }
        /* Give the new image time to map its libraries, well within the 100 ms. */
        usleep(20000);
        r = process_table_refresh(procs, pid, &p);
        uint64_t ms = (now_ns() - t0) / 1000000;
        check(r == 0 && !p->exited_ns && maps_name(p, "sleep"),
              "re-read %" PRIu64 " ms after the read (exe %s): the new image, alive (%d)", ms, target, r);
        if (ms >= 100)
                printf("note: the re-read came after 100 ms (a loaded machine): the whole read was made\n");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(go[1]);
}

/* Thousands of fork copies of this process under pids no process can have (above the kernel's
 * PID_MAX_LIMIT), exited in a known order: the grace period ends for the oldest first, a reused
 * pid replaces its exited entry, and over the memory budget the oldest exits go first. */
#define MANY 3000
#define MANY_PID0 4200000
static void test_many_exited(void)
{
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        const uint64_t grace = 100 * NSEC_PER_SEC, t0 = now_ns();
        unsigned wrong = 0, gone = 0, first_kept = MANY;
        const Process *c;
        Process *self, *p;

        if (process_table_new(grace, &procs) < 0 || process_table_get(procs, getpid(), &self) < 0) {
                check(false, "many exited: process table");
                return;
        }
        for (unsigned k = 0; k < MANY; k++)
                wrong += process_table_fork(procs, getpid(), MANY_PID0 + k) != 0;
        for (unsigned k = 0; k < MANY; k++)
                wrong += !(c = process_table_find(procs, MANY_PID0 + k)) || c->pid != MANY_PID0 + (int)k;
        check(wrong == 0, "many exited: %u fork copies, each found by its pid (%u wrong)", MANY, wrong);
        /* Exits noticed in the order 0, 2, 4, ..., 1, 3, 5, ...: the exited list follows that order. */
        for (unsigned k = 0; k < MANY; k += 2)
                process_table_mark_exited(procs, MANY_PID0 + k, t0 + k);
        for (unsigned k = 1; k < MANY; k += 2)
                process_table_mark_exited(procs, MANY_PID0 + k, t0 + MANY + k);
        /* The even ones' grace period is over, not the odd ones'. */
        process_table_gc(procs, t0 + MANY + grace);
        wrong = 0;
        for (unsigned k = 0; k < MANY; k++) {
                c = process_table_find(procs, MANY_PID0 + k);
                wrong += (k % 2 == 0) != (c == NULL) ||
                         (c && (c->pid != MANY_PID0 + (int)k || !c->exited_ns));
        }
        check(wrong == 0 && process_table_find(procs, getpid()) == self,
              "many exited: gc forgot the %u whose grace period ended, kept the rest (%u wrong)", MANY / 2,
              wrong);
        /* A new process with the pid of an exited one replaces it. */
        check(process_table_fork(procs, getpid(), MANY_PID0 + 1) == 0 &&
                      (c = process_table_find(procs, MANY_PID0 + 1)) && !c->exited_ns && c->inherited,
              "many exited: a reused pid replaces the exited entry");
        /* Over the budget: exited ones go, oldest exit first (3, 5, 7, ...), live ones stay. */
        process_table_set_memory_budget(procs, process_table_memory(procs) - 64 * 1024);
        /* A read of a process not known yet makes room first (our parent: alive while we run). */
        check(process_table_get(procs, getppid(), &p) == 0, "many exited: a read over the budget");
        wrong = 0;
        for (unsigned k = 3; k < MANY; k += 2) {
                c = process_table_find(procs, MANY_PID0 + k);
                if (!c) {
                        gone++;
                        wrong += first_kept != MANY; /* a gap after a kept one: not oldest first */
                } else if (first_kept == MANY)
                        first_kept = k;
        }
        check(gone > 0 && wrong == 0 && process_table_find(procs, getpid()) == self &&
                      process_table_find(procs, MANY_PID0 + 1) && process_table_find(procs, getppid()),
              "many exited: over the budget the %u oldest exits went first, live ones stayed (%u out of "
              "order)",
              gone, wrong);
        check(process_table_find(procs, MANY_PID0 + MANY - 1) != NULL,
              "many exited: the newest exit is kept");
}

int main(void)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        test_parse();
        test_odd_processes();
        test_go();
        test_real_kallsyms();
        test_add_anon();
        test_reread_after_exec();
        test_many_exited();
        printf("%s: %u failure(s)\n", failures ? "FAIL" : "PASS", failures);
        return failures ? 1 : 0;
}
