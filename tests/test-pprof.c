/* SPDX-License-Identifier: GPL-2.0-only */
/* End-to-end check of process table + symbolizer + pprof encoder without BPF: a C++ scenario
 * program (built here with -g, and in stripped / MiniDebugInfo / separate-debuginfo variants)
 * records real return addresses of a known call chain with an inlined function; the test feeds
 * them through the real aggregator as samples, lets the process exit (and deletes one binary),
 * encodes the window and checks the result twice: decoded with protobuf-c (dense ids, string
 * table, UTF-8, mappings) and read by the real `go tool pprof -raw` / `-traces`. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "aggregator/aggregator.h"
#include "output/pprof-encode.h"
#include "profile.pb-c.h"
#include "symbolizer/symbolizer.h"
#include "tracker/process-table.h"

#include "lib/test-child.h"
#include "lib/test-util.h"

static char dir[] = "/tmp/profd-test-pprof-XXXXXX";

static void die(const char *what)
{
        fprintf(stderr, "FATAL: %s: %s\n", what, strerror(errno));
        exit(1);
}

static int run(const char *fmt, ...)
{
        char cmd[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        printf("$ %s\n", cmd);
        fflush(stdout);
        int r = system(cmd);
        return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static char *capture(const char *fmt, ...)
{
        char cmd[4096];
        va_list ap;
        FILE *f;
        char *buf = NULL;
        size_t size = 0;
        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        printf("$ %s\n", cmd);
        fflush(stdout);
        f = popen(cmd, "r");
        if (!f)
                die("popen");
        FILE *m = open_memstream(&buf, &size);
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                fwrite(chunk, 1, n, m);
        fclose(m);
        int st = pclose(f);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                printf("(command exited with %d)\n%s\n", WEXITSTATUS(st), buf);
        return buf;
}

/* The call chain: main -> Widget::spin -> (inlined) profd_inlined -> profd_record. Markers in
 * comments give the expected line numbers. */
static const char scenario[] =
        "#include <stdio.h>\n"
        "#include <unistd.h>\n"
        "static void *addrs[4];\n"
        "extern \"C\" __attribute__((noinline)) void profd_record(void)\n"
        "{\n"
        "        addrs[0] = __builtin_return_address(0);\n"
        "        asm volatile(\"\" ::: \"memory\");\n"
        "}\n"
        "namespace profd_ns {\n"
        "struct Widget {\n"
        "        static void spin(int x);\n"
        "};\n"
        "}\n"
        "static inline __attribute__((always_inline)) void profd_inlined(void)\n"
        "{\n"
        "        profd_record(); // LINE_INLINE_CALL\n"
        "        asm volatile(\"\" ::: \"memory\");\n"
        "}\n"
        "__attribute__((noinline)) void profd_ns::Widget::spin(int x)\n"
        "{\n"
        "        profd_inlined(); // LINE_OUTER_CALL\n"
        "        addrs[1] = __builtin_return_address(0);\n"
        "        asm volatile(\"\" ::: \"memory\");\n"
        "}\n"
        "int main(void)\n"
        "{\n"
        "        char c;\n"
        "        profd_ns::Widget::spin(1); // LINE_MAIN_CALL\n"
        "        printf(\"%d %p %p %p\\n\", (int)getpid(), (void *)((char *)&profd_record + 1), addrs[0], "
        "addrs[1]);\n"
        "        fflush(stdout);\n"
        "        while (read(0, &c, 1) > 0)\n"
        "                ;\n"
        "        return 0;\n"
        "}\n"
        "volatile int profd_variant = VARIANT; /* a distinct build ID per variant */\n";

static int line_of(const char *marker)
{
        int line = 1;
        const char *p = strstr(scenario, marker);
        for (const char *q = scenario; q < p; q++)
                line += *q == '\n';
        return line;
}

typedef struct Child {
        pid_t pid;
        FILE *to; /* its stdin: closing it makes it exit */
        uint64_t leaf, ret_in_spin, ret_in_main;
} Child;

static void child_start(const char *path, Child *c)
{
        int to_fd = -1, from_fd = -1;
        c->pid = fork_piped(&to_fd, &from_fd);
        if (c->pid < 0) {
                errno = -c->pid;
                die("fork with pipes");
        }
        if (c->pid == 0) {
                execl(path, path, (char *)NULL);
                _exit(127);
        }
        c->to = fdopen(to_fd, "w");
        FILE *from = fdopen(from_fd, "r");
        int pid;
        void *a, *b, *d;
        if (fscanf(from, "%d %p %p %p", &pid, &a, &b, &d) != 4 || pid != c->pid) {
                fprintf(stderr, "FATAL: scenario %s printed nothing useful\n", path);
                exit(1);
        }
        fclose(from);
        c->leaf = (uint64_t)a;
        c->ret_in_spin = (uint64_t)b;
        c->ret_in_main = (uint64_t)d;
}

static void child_exit(Child *c)
{
        fclose(c->to);
        waitpid(c->pid, NULL, 0);
}

static uint64_t fnv(const void *p, size_t n)
{
        uint64_t h = 1469598103934665603ULL;
        for (size_t i = 0; i < n; i++)
                h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
        return h | 1;
}

static bool valid_utf8(const char *s)
{
        const unsigned char *p = (const unsigned char *)s;
        while (*p) {
                size_t n = *p < 0x80             ? 1
                           : (*p & 0xe0) == 0xc0 ? 2
                           : (*p & 0xf0) == 0xe0 ? 3
                           : (*p & 0xf8) == 0xf0 ? 4
                                                 : 0;
                if (n == 0)
                        return false;
                for (size_t k = 1; k < n; k++)
                        if ((p[k] & 0xc0) != 0x80)
                                return false;
                p += n;
        }
        return true;
}

static Perftools__Profiles__Profile *decode(const void *gz, size_t gz_size)
{
        size_t cap = 64 << 20;
        uint8_t *raw = malloc(cap);
        z_stream z = {
                .next_in = (Bytef *)gz, .avail_in = (uInt)gz_size, .next_out = raw, .avail_out = (uInt)cap};
        if (!raw || inflateInit2(&z, 15 + 16) != Z_OK)
                die("inflate init");
        int r = inflate(&z, Z_FINISH);
        check(r == Z_STREAM_END, "profile is a complete gzip stream (%d)", r);
        size_t n = cap - z.avail_out;
        inflateEnd(&z);
        Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, n, raw);
        free(raw);
        check(p != NULL, "profile decodes as perftools.profiles.Profile");
        if (!p)
                exit(1);
        return p;
}

static const char *S(const Perftools__Profiles__Profile *p, int64_t i)
{
        return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "<bad string index>";
}

static void check_structure(const Perftools__Profiles__Profile *p, unsigned hz)
{
        bool dense = true, strings_ok = true, refs_ok = true;

        check(p->n_string_table > 0 && p->string_table[0][0] == 0, "string_table[0] is \"\"");
        for (size_t i = 0; i < p->n_string_table; i++)
                if (!valid_utf8(p->string_table[i])) {
                        strings_ok = false;
                        printf("  invalid UTF-8: string %zu\n", i);
                }
        check(strings_ok, "every string is valid UTF-8");
        for (size_t i = 0; i < p->n_mapping; i++)
                dense &= p->mapping[i]->id == i + 1;
        for (size_t i = 0; i < p->n_location; i++) {
                dense &= p->location[i]->id == i + 1;
                refs_ok &= p->location[i]->mapping_id <= p->n_mapping;
                for (size_t k = 0; k < p->location[i]->n_line; k++)
                        refs_ok &= p->location[i]->line[k]->function_id >= 1 &&
                                   p->location[i]->line[k]->function_id <= p->n_function;
        }
        for (size_t i = 0; i < p->n_function; i++)
                dense &= p->function[i]->id == i + 1;
        for (size_t i = 0; i < p->n_sample; i++)
                for (size_t k = 0; k < p->sample[i]->n_location_id; k++)
                        refs_ok &= p->sample[i]->location_id[k] >= 1 &&
                                   p->sample[i]->location_id[k] <= p->n_location;
        check(dense, "mapping, location and function ids are dense 1..N in table order");
        check(refs_ok, "every id reference points into its table");
        check(p->n_sample_type == 2 && strcmp(S(p, p->sample_type[0]->type), "samples") == 0 &&
                      strcmp(S(p, p->sample_type[0]->unit), "count") == 0 &&
                      strcmp(S(p, p->sample_type[1]->type), "cpu") == 0 &&
                      strcmp(S(p, p->sample_type[1]->unit), "nanoseconds") == 0,
              "sample_type is [samples/count, cpu/nanoseconds]");
        check(p->period_type && strcmp(S(p, p->period_type->type), "cpu") == 0 &&
                      strcmp(S(p, p->period_type->unit), "nanoseconds") == 0 && p->period == 1000000000 / hz,
              "period_type cpu/nanoseconds, period %" PRId64 " = 1e9/%u", p->period, hz);
        /* A mapping has_functions unless a location in it has no lines (a frame profd left for
         * pprof or a collector to name): such a location has its address, in a file known by
         * its build ID. */
        for (size_t i = 0; i < p->n_mapping; i++) {
                bool all_named = true;
                for (size_t k = 0; k < p->n_location; k++)
                        all_named &= p->location[k]->mapping_id != p->mapping[i]->id ||
                                     p->location[k]->n_line > 0;
                check(p->mapping[i]->has_functions == all_named,
                      "mapping %s: has_functions %d <=> all named %d", S(p, p->mapping[i]->filename),
                      p->mapping[i]->has_functions, all_named);
        }
        for (size_t k = 0; k < p->n_location; k++) {
                const Perftools__Profiles__Location *l = p->location[k];
                const Perftools__Profiles__Mapping *m = l->mapping_id ? p->mapping[l->mapping_id - 1] : NULL;
                if (l->n_line == 0 && !check(m && l->address && S(p, m->build_id)[0],
                                             "location %zu without a function: address 0x%" PRIx64
                                             ", in a mapping with a build ID (%s)",
                                             k + 1, l->address, m ? S(p, m->build_id) : "no mapping"))
                        break;
        }
}

static const Perftools__Profiles__Mapping *mapping_named(const Perftools__Profiles__Profile *p,
                                                         const char *suffix)
{
        for (size_t i = 0; i < p->n_mapping; i++) {
                const char *f = S(p, p->mapping[i]->filename);
                size_t a = strlen(f), b = strlen(suffix);
                if (a >= b && strcmp(f + a - b, suffix) == 0)
                        return p->mapping[i];
        }
        return NULL;
}

static char *build_id_hex(const char *path)
{
        char *out = capture("readelf -n '%s' | sed -n 's/.*Build ID: *\\([0-9a-f]*\\).*/\\1/p'", path);
        out[strcspn(out, "\n")] = 0;
        return out;
}

/* go tool pprof OPTIONS PROFILE with HOME, caches and temporary files in dir; local binaries are
 * looked for nowhere but at their mappings' paths. */
static char *pprof(const char *profile, const char *options)
{
        return capture(
                "HOME=${HOME:-/root} GOCACHE=%s/gocache PPROF_TMPDIR=%s PPROF_BINARY_PATH=/nonexistent "
                "go tool pprof %s '%s' 2>&1",
                dir, dir, options, profile);
}

/* The -traces block of the sample whose comm label is comm (malloc'd), NULL if none. */
static char *trace_of(const char *traces, const char *comm)
{
        char key[64];
        snprintf(key, sizeof(key), "comm:  %s\n", comm);
        const char *t = strstr(traces, key);
        if (!t)
                return NULL;
        const char *end = strstr(t, "-----------+");
        return strndup(t, end ? (size_t)(end - t) : strlen(t));
}

typedef struct Variant {
        const char *name;
        bool names, lines, inlines; /* expected from this variant's symbol information */
        Child child;
        char path[512];
        char build_id[128];
} Variant;

int main(void)
{
        char src[600], kallsyms[600], kallsyms_hidden[600], profile_path[600], debugdir[600];
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        _cleanup_(aggregator_freep) Aggregator *agg = NULL;
        ProfileWindow *w = NULL;
        const unsigned hz = 97;
        int r;

        if (!mkdtemp(dir))
                die("mkdtemp");
        if (run("command -v go >/dev/null && command -v g++ >/dev/null && command -v clang++ >/dev/null && "
                "command -v xz >/dev/null") != 0) {
                printf("======================================================================\n"
                       "SKIP: needs go (golang-go), g++, clang++ and xz\n"
                       "======================================================================\n");
                return 77;
        }

        snprintf(src, sizeof(src), "%s/scenario.cc", dir);
        FILE *f = fopen(src, "w");
        if (!f)
                die("fopen");
        fputs(scenario, f);
        fclose(f);

        Variant v[] = {
                {.name = "full", .names = true, .lines = true, .inlines = true},
                {.name = "deleted", .names = true, .lines = true, .inlines = true},
                {.name = "debuglink-buildid", .names = true, .lines = true, .inlines = true},
                {.name = "minidebuginfo", .names = true},
                {.name = "stripped"},
                /* clang 14: DWARF 5 and no .debug_aranges, so CUs are found by their ranges. */
                {.name = "clang", .names = true, .lines = true, .inlines = true},
        };
        const size_t n_v = sizeof(v) / sizeof(v[0]);
        snprintf(debugdir, sizeof(debugdir), "%s/debug", dir);
        for (size_t i = 0; i < n_v; i++) {
                /* Distinct build IDs: one byte of the source differs per variant. */
                snprintf(v[i].path, sizeof(v[i].path), "%s/%s prog", dir,
                         v[i].name); /* a space in the path */
                if (run("%s -g -O2 -fno-omit-frame-pointer -DVARIANT=%zu -o '%s' '%s'",
                        strcmp(v[i].name, "clang") == 0 ? "clang++" : "g++", i, v[i].path, src) != 0)
                        die("compiler");
                char *bid_hex = build_id_hex(v[i].path);
                snprintf(v[i].build_id, sizeof(v[i].build_id), "%s", bid_hex);
                free(bid_hex);
        }
        {
                bool distinct = true;
                for (size_t i = 0; i < n_v; i++)
                        for (size_t k = i + 1; k < n_v; k++)
                                distinct &= strcmp(v[i].build_id, v[k].build_id) != 0;
                check(distinct && strlen(v[0].build_id) == 40, "variants have distinct build IDs");
        }
        /* Separate debuginfo found by build ID under a debug directory, binary stripped. */
        {
                const char *bid = v[2].build_id;
                run("mkdir -p '%s/.build-id/%.2s'", debugdir, bid);
                if (run("objcopy --only-keep-debug '%s' '%s/.build-id/%.2s/%s.debug' && strip --strip-all "
                        "'%s'",
                        v[2].path, debugdir, bid, bid + 2, v[2].path) != 0)
                        die("objcopy");
        }
        /* MiniDebugInfo (Fedora style): an xz-compressed symtab in .gnu_debugdata, no DWARF. */
        if (run("cd '%s' && objcopy --only-keep-debug '%s' mini.debug && "
                "nm --format=posix --defined-only mini.debug | awk '$2 ~ /^[Tt]$/ {print $1}' > mini.keep "
                "&& "
                "objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=mini.keep "
                "mini.debug mini.syms && "
                "xz -f mini.syms && strip --strip-all '%s' && "
                "objcopy --add-section .gnu_debugdata=mini.syms.xz '%s'",
                dir, v[3].path, v[3].path, v[3].path) != 0)
                die("minidebuginfo");
        /* An unstripped copy (same build ID): what a developer has for the stripped binary. */
        if (run("cp '%s' '%s.full' && strip --strip-all '%s'", v[4].path, v[4].path, v[4].path) != 0)
                die("strip");

        /* A kallsyms-format file: kernel symbols are deterministic, one in a module. */
        snprintf(kallsyms, sizeof(kallsyms), "%s/kallsyms", dir);
        f = fopen(kallsyms, "w");
        fputs("ffffffff81000000 T _stext\n"
              "ffffffff81100000 T do_syscall_64\n"
              "ffffffff81100400 t entry_SYSCALL_64_after_hwframe\n"
              "ffffffff81200000 D some_data\n"
              "ffffffff81300000 T __x64_sys_read\n"
              "ffffffffc0100000 t nft_do_chain\t[nf_tables]\n",
              f);
        fclose(f);
        snprintf(kallsyms_hidden, sizeof(kallsyms_hidden), "%s/kallsyms-hidden", dir);
        f = fopen(kallsyms_hidden, "w");
        fputs("0000000000000000 T _stext\n0000000000000000 T do_syscall_64\n", f);
        fclose(f);

        if (process_table_new(60 * NSEC_PER_SEC, &procs) < 0 || symbolizer_new(&sym) < 0 ||
            aggregator_new(600 * NSEC_PER_SEC, hz, &agg) < 0)
                die("new");
        r = symbolizer_set_debuginfo_path(sym, debugdir);
        check(r == 0, "debuginfo path set");
        r = symbolizer_load_kallsyms(sym, kallsyms);
        check(r == 0, "kallsyms file loaded (%d)", r);

        /* Run every variant; snapshot it while it lives (as the daemon does when its samples
         * arrive), then let it exit: the profile is built afterwards. */
        SampleRecord recs[32];
        uint64_t ustacks[32][4], kstack[3] = {0xffffffff81300010, 0xffffffff81100020, 0xffffffffc0100040};
        size_t n_recs = 0;
        for (size_t i = 0; i < n_v; i++) {
                Process *p;
                child_start(v[i].path, &v[i].child);
                r = process_table_get(procs, v[i].child.pid, &p);
                check(r == 0, "%s: process %d read from /proc (%d)", v[i].name, v[i].child.pid, r);
                ustacks[i][0] = v[i].child.leaf;
                ustacks[i][1] = v[i].child.ret_in_spin;
                ustacks[i][2] = v[i].child.ret_in_main;
                recs[n_recs] = (SampleRecord){
                        .pid = (uint32_t)v[i].child.pid,
                        .tid = (uint32_t)v[i].child.pid + 1000,
                        .user_hash = fnv(ustacks[i], 3 * 8),
                        .user_frames = ustacks[i],
                        .n_user = 3,
                        .user_flags = 0,
                        /* The first variant also carries kernel frames (a syscall). */
                        .kernel_hash = i == 0 ? fnv(kstack, sizeof(kstack)) : 0,
                        .kernel_frames = i == 0 ? kstack : NULL,
                        .n_kernel = i == 0 ? 3 : 0,
                        .count = 10 + i,
                };
                snprintf(recs[n_recs].comm, sizeof(recs[n_recs].comm), "v%zu-%s", i, v[i].name);
                snprintf(recs[n_recs].thread_comm, sizeof(recs[n_recs].thread_comm), "worker-%zu", i);
                n_recs++;
        }
        /* A comm that is not UTF-8 and a truncated stack whose last frame was not recorded. */
        recs[n_recs] = recs[0];
        snprintf(recs[n_recs].comm, sizeof(recs[n_recs].comm),
                 "bad\xff\xfe"
                 "comm");
        recs[n_recs].user_flags = PROFD_STACK_TRUNCATED | PROFD_STOP_DEPTH;
        recs[n_recs].n_user = 2;
        recs[n_recs].user_hash = fnv(ustacks[0], 2 * 8);
        recs[n_recs].count = 3;
        n_recs++;
        /* A stack that stopped early for another reason. */
        recs[n_recs] = recs[1];
        recs[n_recs].user_flags = PROFD_STOP_BAD_READ;
        recs[n_recs].n_user = 1;
        recs[n_recs].user_hash = fnv(ustacks[1], 1 * 8);
        recs[n_recs].count = 2;
        n_recs++;

        /* The "deleted" variant's file disappears while it runs. */
        check(unlink(v[1].path) == 0, "deleted the running binary %s", v[1].path);
        {
                Process *p;
                r = process_table_refresh(procs, v[1].child.pid, &p);
                check(r == 0 && p->n_mappings > 0 && process_find_mapping(p, v[1].child.leaf) &&
                              process_find_mapping(p, v[1].child.leaf)->deleted,
                      "deleted: refreshed mapping says (deleted)");
        }

        uint64_t t0 = 1700000000ULL * NSEC_PER_SEC;
        aggregator_add_interval(agg, t0, t0 + NSEC_PER_SEC, recs, n_recs);
        for (size_t i = 0; i < n_v; i++)
                child_exit(&v[i].child);
        /* The table notices the exits (gc's liveness check) but keeps the mappings. */
        process_table_gc(procs, (uint64_t)time(NULL) * NSEC_PER_SEC + 10 * NSEC_PER_SEC);
        for (size_t i = 0; i < n_v; i++) {
                Process *p;
                r = process_table_get(procs, v[i].child.pid, &p);
                check(r == 0 && p->exited_ns != 0, "%s: exited process still in the table", v[i].name);
        }

        r = aggregator_window(agg, t0, t0 + NSEC_PER_SEC, &w);
        check(r == 0 && w, "aggregator window (%d)", r);
        if (!w)
                return 1;
        PprofOptions o = {};
        o.labels.enabled[LABEL_COMM] = o.labels.enabled[LABEL_PID] = o.labels.enabled[LABEL_THREAD_ID] =
                o.labels.enabled[LABEL_THREAD_NAME] = o.labels.enabled[LABEL_UNIT] = true;
        void *data = NULL;
        size_t size = 0;
        r = pprof_encode_window(w, sym, procs, &o, &data, &size);
        check(r == 0 && size > 0, "encoded %zu bytes (%d)", size, r);
        if (r < 0)
                return 1;
        snprintf(profile_path, sizeof(profile_path), "%s/cpu.pb.gz", dir);
        f = fopen(profile_path, "w");
        fwrite(data, 1, size, f);
        fclose(f);

        Perftools__Profiles__Profile *p = decode(data, size);
        free(data);
        check_structure(p, hz);
        check(p->time_nanos == (int64_t)t0 && p->duration_nanos == (int64_t)NSEC_PER_SEC,
              "time_nanos/duration_nanos are the window's");
        /* pid and tid are numeric labels (num + num_unit, as perf_to_profile's keys), the others
         * strings. Every sample's tid is its pid + 1000 here. */
        {
                bool numeric = true, strings = true, values = true;
                size_t n_pid = 0;
                for (size_t i = 0; i < p->n_sample; i++) {
                        int64_t pid = -1, tid = -1;
                        for (size_t k = 0; k < p->sample[i]->n_label; k++) {
                                const Perftools__Profiles__Label *l = p->sample[i]->label[k];
                                const char *key = S(p, l->key);
                                if (strcmp(key, "pid") == 0 || strcmp(key, "tid") == 0) {
                                        numeric &= l->str == 0 && l->num > 0 &&
                                                   strcmp(S(p, l->num_unit), key) == 0;
                                        *(key[0] == 'p' ? &pid : &tid) = l->num;
                                } else
                                        strings &= l->str > 0 && l->num == 0 && l->num_unit == 0;
                        }
                        bool known = false;
                        for (size_t k = 0; k < n_v; k++)
                                known |= pid == v[k].child.pid;
                        values &= known && tid == pid + 1000;
                        n_pid += pid > 0;
                }
                check(numeric && n_pid == p->n_sample,
                      "pid and tid: numeric labels with num_unit pid/tid (%zu samples)", n_pid);
                check(strings, "comm, thread_name, unit: string labels");
                check(values, "every sample's pid is its process', its tid that thread's");
        }
        for (size_t i = 0; i < n_v; i++) {
                const Perftools__Profiles__Mapping *m = mapping_named(p, v[i].path + strlen(dir));
                if (check(m != NULL, "%s: mapping for %s", v[i].name, v[i].path))
                        check(strcmp(S(p, m->build_id), v[i].build_id) == 0, "%s: mapping build ID %s == %s",
                              v[i].name, S(p, m->build_id), v[i].build_id);
                if (m && v[i].lines)
                        check(m->has_line_numbers && m->has_filenames, "%s: has_filenames/has_line_numbers",
                              v[i].name);
                if (m && v[i].inlines)
                        check(m->has_inline_frames, "%s: has_inline_frames", v[i].name);
                if (!m)
                        continue;
                /* Named: every location has lines. Not named (stripped): no location has any, and
                 * the mapping says where the file was mapped (start, offset) for whoever names
                 * them from a debug file found by the build ID. */
                size_t n_locs = 0, n_unnamed = 0;
                for (size_t k = 0; k < p->n_location; k++)
                        if (p->location[k]->mapping_id == m->id) {
                                n_locs++;
                                n_unnamed += p->location[k]->n_line == 0;
                        }
                Process *proc = NULL;
                const ProcMapping *pm = process_table_get(procs, v[i].child.pid, &proc) == 0
                                                ? process_find_mapping(proc, v[i].child.leaf)
                                                : NULL;
                check(pm && m->memory_start == pm->start && m->memory_limit == pm->end &&
                              m->file_offset == pm->offset,
                      "%s: mapping 0x%" PRIx64 "-0x%" PRIx64 " offset 0x%" PRIx64 " as in /proc/PID/maps",
                      v[i].name, m->memory_start, m->memory_limit, m->file_offset);
                if (v[i].names)
                        check(m->has_functions && n_unnamed == 0, "%s: all %zu locations named", v[i].name,
                              n_locs);
                else
                        check(!m->has_functions && n_locs >= 3 && n_unnamed == n_locs,
                              "%s: its %zu locations have no function (%zu), has_functions is false",
                              v[i].name, n_locs, n_unnamed);
        }
        const Perftools__Profiles__Mapping *km = mapping_named(p, "[kernel.kallsyms]");
        check(km != NULL, "[kernel.kallsyms] mapping present");
        if (km && access("/sys/kernel/notes", R_OK) == 0) {
                /* perf reads the same notes; its answer is the reference when it is installed. */
                char *want = capture("perf buildid-list --kernel 2>/dev/null");
                want[strcspn(want, "\n")] = 0;
                if (want[0])
                        check(strcmp(S(p, km->build_id), want) == 0,
                              "kernel mapping build ID %s == perf's %s", S(p, km->build_id), want);
                else
                        check(strlen(S(p, km->build_id)) >= 40, "kernel mapping has a build ID (%s)",
                              S(p, km->build_id));
                free(want);
        }
        /* Kernel addresses are not served by default (KASLR): named frames, zero addresses. */
        if (km) {
                size_t n_kernel = 0, n_nonzero = 0;
                for (size_t i = 0; i < p->n_location; i++)
                        if (p->location[i]->mapping_id == km->id) {
                                n_kernel++;
                                n_nonzero += p->location[i]->address != 0;
                        }
                check(n_kernel >= 3 && n_nonzero == 0 && km->memory_start == 0 && km->memory_limit == 0 &&
                              km->file_offset == 0,
                      "default: %zu kernel locations, %zu with an address; kernel mapping 0x%" PRIx64
                      "-0x%" PRIx64,
                      n_kernel, n_nonzero, km->memory_start, km->memory_limit);
        }
        for (size_t i = 0; i < p->n_location; i++)
                if (p->location[i]->mapping_id && p->location[i]->address) {
                        const Perftools__Profiles__Mapping *m = p->mapping[p->location[i]->mapping_id - 1];
                        if (!check(p->location[i]->address >= m->memory_start &&
                                           p->location[i]->address < m->memory_limit,
                                   "location %zu address 0x%" PRIx64 " inside its mapping", i + 1,
                                   p->location[i]->address))
                                break;
                }
        perftools__profiles__profile__free_unpacked(p, NULL);

        /* --kernel-addresses: the same window with the real kernel addresses, inside the mapping. */
        {
                ProfileWindow *w2 = NULL;
                void *data2 = NULL;
                size_t size2 = 0;
                symbolizer_set_kernel_addresses(sym, true);
                check(symbolizer_kernel_addresses_shown(sym),
                      "kernel addresses shown with kallsyms readable");
                r = aggregator_window(agg, t0, t0 + NSEC_PER_SEC, &w2);
                if (r == 0)
                        r = pprof_encode_window(w2, sym, procs, &o, &data2, &size2);
                check(r == 0, "encoded with kernel addresses (%d)", r);
                Perftools__Profiles__Profile *p2 = r == 0 ? decode(data2, size2) : NULL;
                const Perftools__Profiles__Mapping *km2 = p2 ? mapping_named(p2, "[kernel.kallsyms]") : NULL;
                size_t n_found = 0;
                if (km2)
                        for (size_t i = 0; i < p2->n_location; i++) {
                                const Perftools__Profiles__Location *l = p2->location[i];
                                if (l->mapping_id != km2->id)
                                        continue;
                                for (size_t k = 0; k < 3; k++)
                                        n_found += l->address == kstack[k];
                                check(l->address >= km2->memory_start && l->address < km2->memory_limit,
                                      "kernel location 0x%" PRIx64 " inside the kernel mapping", l->address);
                        }
                check(km2 && n_found == 3 && km2->memory_start == kstack[1] &&
                              km2->memory_limit == kstack[2] + 1,
                      "--kernel-addresses: the 3 kernel frames at their addresses, mapping 0x%" PRIx64
                      "-0x%" PRIx64,
                      km2 ? km2->memory_start : 0, km2 ? km2->memory_limit : 0);
                if (p2)
                        perftools__profiles__profile__free_unpacked(p2, NULL);
                free(data2);
                symbolizer_set_kernel_addresses(sym, false);
        }

        /* What go tool pprof makes of it: first as profd wrote it (-symbolize=none). */
        char *raw = pprof(profile_path, "-symbolize=none -raw");
        printf("---- go tool pprof -raw ----\n%s----\n", raw);
        char *traces = pprof(profile_path, "-symbolize=none -traces");
        printf("---- go tool pprof -traces ----\n%s----\n", traces);
        check(strstr(raw, "PeriodType: cpu nanoseconds") != NULL, "pprof: period type cpu nanoseconds");
        check(strstr(raw, "samples/count cpu/nanoseconds") != NULL, "pprof: sample types");

        char want[1024];
        snprintf(want, sizeof(want), "scenario.cc:%d", line_of("LINE_INLINE_CALL"));
        check(strstr(raw, want) != NULL, "pprof -raw: inlined frame at %s", want);
        snprintf(want, sizeof(want), "scenario.cc:%d", line_of("LINE_OUTER_CALL"));
        check(strstr(raw, want) != NULL, "pprof -raw: caller of the inlined frame at %s", want);
        snprintf(want, sizeof(want), "scenario.cc:%d", line_of("LINE_MAIN_CALL"));
        check(strstr(raw, want) != NULL, "pprof -raw: main's call at %s", want);
        check(strstr(traces, "profd_ns::Widget::spin(int)") != NULL, "pprof: C++ name demangled");
        check(strstr(traces, "profd_inlined") != NULL, "pprof: inlined function appears as a frame");
        check(strstr(traces, "__x64_sys_read") && strstr(traces, "do_syscall_64") &&
                      strstr(traces, "nft_do_chain"),
              "pprof: kernel frames named from kallsyms (incl. a module symbol)");
        check(strstr(traces, "[truncated: 2+ frames]") != NULL, "pprof: truncated stack marked");
        check(strstr(traces, "[unwind stopped: stack read failed]") != NULL, "pprof: early stop marked");
        check(strstr(traces, "bad\\xff\\xfecomm") != NULL, "pprof: non-UTF-8 comm escaped");
        check(strstr(traces, "thread_name:") && strstr(traces, "tid:") && strstr(traces, "pid:") &&
                      strstr(traces, "comm:"),
              "pprof: labels comm, pid, tid, thread_name");
        check(strstr(traces, "unit:") == NULL, "pprof: no unit label without a cgroup resolver");

        /* Stack order per variant, leaf first: kernel, then user frames. */
        for (size_t i = 0; i < n_v; i++) {
                char *block = trace_of(traces, recs[i].comm);
                if (!check(block != NULL, "%s: trace with its comm label", v[i].name))
                        continue;
                if (v[i].names) {
                        const char *a = strstr(block, "profd_record"),
                                   *b = strstr(block, "profd_ns::Widget::spin"), *c = strstr(block, "main");
                        check(a && b && c && a < b && b < c,
                              "%s: profd_record, Widget::spin, main leaf first", v[i].name);
                        if (v[i].inlines) {
                                const char *in = strstr(block, "profd_inlined");
                                check(in && a < in && in < b, "%s: inline frame between leaf and its caller",
                                      v[i].name);
                        } else
                                check(strstr(block, "profd_inlined") == NULL,
                                      "%s: no inline frames without DWARF", v[i].name);
                } else
                        check(strstr(block, "[stripped prog]") && !strstr(block, "[unknown]") &&
                                      !strstr(block, "profd_record"),
                              "%s: frames profd cannot name are addresses in [stripped prog], no made-up "
                              "name",
                              v[i].name);
                if (i == 0) {
                        const char *k = strstr(block, "__x64_sys_read"), *u = strstr(block, "profd_record");
                        check(k && u && k < u, "full: kernel frames before user frames");
                }
                free(block);
        }
        free(raw);
        free(traces);

        /* go tool pprof symbolizes mappings without has_functions itself, from the file at the
         * mapping's path: the stripped binary there names nothing (and changes nothing else)... */
        traces = pprof(profile_path, "-traces");
        char *block = trace_of(traces, recs[4].comm), *full = trace_of(traces, recs[0].comm);
        check(block && strstr(block, "[stripped prog]") && !strstr(block, "profd_record") && full &&
                      strstr(full, "profd_ns::Widget::spin(int)") && strstr(full, "profd_inlined"),
              "pprof symbolizing: nothing to find in the stripped binary, profd's names kept elsewhere");
        free(block);
        free(full);
        free(traces);
        /* ...the unstripped build in its place (same build ID) names its frames: the leaf at least
         * (go tool pprof reads only DW_AT_name from DWARF, which C++ member functions defined
         * out of their class do not have). */
        check(run("cp '%s.full' '%s'", v[4].path, v[4].path) == 0, "unstripped copy put in place");
        traces = pprof(profile_path, "-traces");
        block = trace_of(traces, recs[4].comm);
        printf("---- go tool pprof -traces, stripped variant, unstripped binary in place ----\n%s----\n",
               block ?: traces);
        check(block && strstr(block, "profd_record") && !strstr(block, "[unknown]"),
              "pprof symbolizing: the unstripped binary at the path names profd_record");
        free(block);
        free(traces);

        /* kptr_restrict: every kallsyms address is zero -> a frame that says so. */
        {
                _cleanup_(symbolizer_freep) Symbolizer *s2 = NULL;
                SymResult res;
                symbolizer_new(&s2);
                symbolizer_load_kallsyms(s2, kallsyms_hidden);
                r = symbolizer_kernel(s2, 0xffffffff81100020, &res);
                check(r == 0 && !res.symbolized && strstr(res.frames[0].name, "kptr_restrict") &&
                              !strstr(res.frames[0].name, "0x"),
                      "kallsyms hidden: '%s', no address", r == 0 ? res.frames[0].name : "");
                /* The kernel hides its addresses from profd: --kernel-addresses does not reveal them. */
                symbolizer_set_kernel_addresses(s2, true);
                check(!symbolizer_kernel_addresses_shown(s2), "kallsyms hidden: --kernel-addresses serves none");
                r = symbolizer_kernel(s2, 0xffffffff81100020, &res);
                check(r == 0 && !strstr(res.frames[0].name, "0x"), "kallsyms hidden + --kernel-addresses: '%s'",
                      r == 0 ? res.frames[0].name : "");
        }
        /* Kernel symbol lookup edges. */
        {
                SymResult res;
                r = symbolizer_kernel(sym, 0xffffffff81100400 + 5, &res);
                check(r == 0 && strcmp(res.frames[0].name, "entry_SYSCALL_64_after_hwframe") == 0,
                      "kallsyms: local text symbol");
                r = symbolizer_kernel(sym, 0xffffffff80000000, &res);
                check(r == 0 && !res.symbolized && !strstr(res.frames[0].name, "0x"),
                      "kallsyms: address below every symbol is unknown, without its address: '%s'",
                      r == 0 ? res.frames[0].name : "");
                symbolizer_set_kernel_addresses(sym, true);
                r = symbolizer_kernel(sym, 0xffffffff80000000, &res);
                check(r == 0 && strstr(res.frames[0].name, "0xffffffff80000000"),
                      "--kernel-addresses: the unknown kernel frame names its address: '%s'",
                      r == 0 ? res.frames[0].name : "");
                symbolizer_set_kernel_addresses(sym, false);
                r = symbolizer_kernel(sym, 0xffffffffc0100001, &res);
                check(r == 0 && res.frames[0].file && strcmp(res.frames[0].file, "[nf_tables]") == 0,
                      "kallsyms: module name kept");
        }

        run("rm -rf '%s'", dir);
        printf("%s: %u failure(s)\n", failures ? "FAIL" : "PASS", failures);
        return failures ? 1 : 0;
}
