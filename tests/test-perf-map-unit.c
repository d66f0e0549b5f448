/* SPDX-License-Identifier: GPL-2.0-only */
/* Perf map reading on this very process's /tmp/perf-PID.map: later entries win, overlapping
 * entries, appended lines read incrementally, an incomplete last line waits, a rewritten file is
 * read again from the start, the per-process cap drops and counts, forgotten processes are freed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/test-util.h"
#include "runtimes/perf-map.h"

static char path[64];

static void write_map(const char *mode, const char *text)
{
        FILE *f = fopen(path, mode);
        if (!f) {
                perror(path);
                exit(1);
        }
        fputs(text, f);
        fclose(f);
}

static bool eq(const char *a, const char *b)
{
        return a == b || (a && b && strcmp(a, b) == 0);
}

static unsigned long long metric(PerfMaps *pm, const char *name)
{
        char *buf = NULL, *p;
        size_t size = 0;
        unsigned long long v = 0;
        FILE *f = open_memstream(&buf, &size);

        perf_maps_write_metrics(pm, f);
        fclose(f);
        p = strstr(buf, name);
        while (p && p > buf && p[-1] != '\n')
                p = strstr(p + 1, name);
        if (p)
                v = strtoull(p + strlen(name) + 1, NULL, 10);
        free(buf);
        return v;
}

/* Field 22 of /proc/self/stat: the 20th token after the command's closing parenthesis. */
static uint64_t own_start_time(void)
{
        char buf[1024], *p, *tok, *save = NULL;
        FILE *f = fopen("/proc/self/stat", "re");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        unsigned i = 0;

        if (f)
                fclose(f);
        buf[n] = 0;
        p = strrchr(buf, ')');
        for (tok = p ? strtok_r(p + 1, " ", &save) : NULL; tok; tok = strtok_r(NULL, " ", &save))
                if (++i == 20)
                        return strtoull(tok, NULL, 10);
        return 0;
}

static const Process *find_none(pid_t pid, void *userdata)
{
        return NULL;
}

int main(void)
{
        _cleanup_(perf_maps_freep) PerfMaps *pm = NULL;
        ProcMapping anon = {.start = 0x1000, .end = 0x100000, .path = "", .executable = true};
        Process p = {.pid = getpid(), .start_time = 1, .mappings = &anon, .n_mappings = 1};
        const char *file = NULL;
        char want_file[64];

        snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
        snprintf(want_file, sizeof(want_file), "/tmp/perf-%d.map", (int)getpid());
        (void)unlink(path);
        if (perf_maps_new(&pm) < 0)
                return 1;

        check(!perf_maps_lookup(pm, &p, 0x1000, NULL), "no perf map: nothing named");
        write_map("w", "1000 100 a\n0x2000 0x10 b\n1000 100 a2\n1050 10 inner\nnonsense\n");
        check(!perf_maps_lookup(pm, &p, 0x1005, NULL), "another process under this pid: its map not read");
        p.start_time = own_start_time();
        sleep(1);
        usleep(100000);
        check(eq(perf_maps_lookup(pm, &p, 0x1005, &file), "a2"), "same start: the later entry wins");
        check(eq(file, want_file), "named from %s", want_file);
        check(eq(perf_maps_lookup(pm, &p, 0x1055, NULL), "inner"), "overlapping: the later entry wins");
        check(eq(perf_maps_lookup(pm, &p, 0x1070, NULL), "a2"), "after the inner entry: the outer");
        check(eq(perf_maps_lookup(pm, &p, 0x200f, NULL), "b"), "0x prefixes accepted");
        check(!perf_maps_lookup(pm, &p, 0x2010, NULL), "end is exclusive");
        check(!perf_maps_lookup(pm, &p, 0xfff, NULL), "before every entry: nothing");
        check(metric(pm, "profd_perf_map_lines_malformed_total") == 1, "malformed line counted");

        write_map("a", "3000 10 c\n4000 10 d");
        sleep(1);
        usleep(100000);
        check(eq(perf_maps_lookup(pm, &p, 0x3000, NULL), "c"), "appended line read");
        check(metric(pm, "profd_perf_map_reads_total{kind=\"incremental\"}") == 1, "read incrementally");
        check(!perf_maps_lookup(pm, &p, 0x4000, NULL), "an incomplete last line waits for its newline");
        write_map("a", "\n");
        sleep(1);
        usleep(100000);
        check(eq(perf_maps_lookup(pm, &p, 0x4000, NULL), "d"), "completed line read");
        check(eq(perf_maps_lookup(pm, &p, 0x1005, NULL), "a2"), "earlier entries kept");

        /* Rewritten, longer than before: the bytes before the last offset differ. */
        write_map("w", "1000 100 rewritten_________________________________________\n5000 10 e\n"
                       "6000 10 f\n7000 10 g\n");
        sleep(1);
        usleep(100000);
        check(eq(perf_maps_lookup(pm, &p, 0x5000, NULL), "e"), "rewritten file read");
        check(eq(perf_maps_lookup(pm, &p, 0x1005, NULL),
                 "rewritten_________________________________________"),
              "rewritten file read from the start");
        check(!perf_maps_lookup(pm, &p, 0x3000, NULL), "entries of the old content gone");
        check(metric(pm, "profd_perf_map_reads_total{kind=\"full\"}") == 2, "two full reads");

        /* Over the per-process cap: 40 MiB of 4000-byte names. */
        {
                FILE *f = fopen(path, "w");
                char *name = malloc(4001);
                memset(name, 'n', 4000);
                name[4000] = 0;
                for (unsigned i = 0; i < 10240; i++)
                        fprintf(f, "%x 10 %s\n", 0x10000 + i * 0x10, name);
                fclose(f);
                free(name);
        }
        sleep(1);
        usleep(100000);
        for (unsigned i = 0; i < 100; i++)
                (void)perf_maps_lookup(pm, &p, 0x1, NULL);
        check(metric(pm, "profd_perf_map_entries_dropped_total{reason=\"process_cap\"}") > 0,
              "entries over the per-process cap dropped and counted (%llu)",
              metric(pm, "profd_perf_map_entries_dropped_total{reason=\"process_cap\"}"));
        check(metric(pm, "profd_perf_map_bytes") <= PERF_MAP_MAX_BYTES_PER_PROCESS, "memory within the cap");
        check(eq(perf_maps_lookup(pm, &p, 0x10005, NULL) ? "y" : "n", "y"), "entries under the cap named");

        check(metric(pm, "profd_perf_map_skipped_bytes_total") > 0,
              "the rest past the cap skipped, counted");

        /* A sparse 4 GiB file: one step read, the rest skipped; a line appended later is read. */
        {
                FILE *f = fopen(path, "w");
                if (!f || ftruncate(fileno(f), 4ull << 30) < 0)
                        return 1;
                fclose(f);
        }
        sleep(1);
        usleep(100000);
        {
                unsigned long long before = metric(pm, "profd_perf_map_read_bytes_total");
                for (unsigned i = 0; i < 20; i++)
                        (void)perf_maps_lookup(pm, &p, 0x1, NULL);
                check(metric(pm, "profd_perf_map_read_bytes_total") - before <= PERF_MAP_READ_STEP + 4096,
                      "sparse 4 GiB file: one step read (%llu bytes)",
                      metric(pm, "profd_perf_map_read_bytes_total") - before);
                check(metric(pm, "profd_perf_map_skipped_bytes_total") >= (4ull << 30) - PERF_MAP_READ_STEP,
                      "sparse 4 GiB file: the rest skipped");
        }
        write_map("a", "\n8000 10 after_sparse\n");
        sleep(1);
        usleep(100000);
        check(eq(perf_maps_lookup(pm, &p, 0x8000, NULL), "after_sparse"),
              "a line appended after it is read");

        p.exited_ns = 1;
        check(eq(perf_maps_lookup(pm, &p, 0x8000, NULL), "after_sparse"), "exited process: still named");
        perf_maps_tick(pm, find_none, NULL);
        check(metric(pm, "profd_perf_map_processes") == 0 && metric(pm, "profd_perf_map_bytes") == 0,
              "forgotten process: its map freed");

        (void)unlink(path);
        printf("%u failure(s)\n", failures);
        return failures ? 1 : 0;
}
