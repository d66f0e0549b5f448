/* SPDX-License-Identifier: GPL-2.0-only */
/* Pure parts of attribution: the flame graph page built from synthetic folded stacks (data
 * embedded, names escaped, kernel suffix turned into a kind), filter parsing, the per-request
 * window cut and the BPF filter config. The page in a browser: tests/test-flamegraph.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregator/window-filter.h"
#include "output/flamegraph.h"
#include "sampler/sample-filter.h"

#include "lib/test-util.h"

static void test_render(void)
{
        FoldedStack stacks[] = {
                {(char *)"prog;_start;main;work;leaf", 5},
                {(char *)"prog;_start;main;work;write;entry_SYSCALL_64_[k];do_syscall_64_[k]", 3},
                {(char *)"prog;_start;main;evil</script><b>\"q\\", 1},
                {(char *)"other;[unknown]", 2},
        };
        FlamegraphInfo info = {.title = "t<itle>", .subtitle = "sub"};
        char *html = NULL;
        size_t size = 0;

        int r = flamegraph_render(stacks, 4, &info, &html, &size);
        CHECK(r == 0 && html && size == strlen(html), "render: %d", r);
        if (!html)
                return;
        CHECK(!strstr(html, "/*@PROFD_DATA@*/"), "data marker replaced");
        const char *data = strstr(html, "const PROFD = {");
        CHECK(data, "data embedded");
        if (data) {
                const char *end = strstr(data, "};\n");
                CHECK(end, "data ends");
                /* nothing inside the JSON can close the script element */
                CHECK(end && !memchr(data, '<', (size_t)(end - data)), "no raw '<' in the data");
                CHECK(strstr(data, "\"total\":11"), "total 11");
                CHECK(strstr(data, "\"entry_SYSCALL_64\""), "kernel suffix stripped from the name");
                CHECK(!strstr(data, "_[k]"), "no _[k] left in the names");
                CHECK(strstr(data, "evil\\u003c/script\\u003e\\u003cb\\u003e\\\"q\\\\\""),
                      "name escaped: %.300s", strstr(data, "evil") ?: "(none)");
                CHECK(strstr(data, "\"title\":\"t\\u003citle\\u003e\""), "title escaped");
                /* names: all, prog, _start, main, work, leaf, write, entry.., do_syscall_64, evil, other,
                 * [unknown] */
                CHECK(strstr(data, "\"kinds\":[4,2,0,0,0,0,0,1,1,0,2,3]"), "kinds: %.200s",
                      strstr(data, "\"kinds\"") ?: "(none)");
                /* preorder: all(11) -> prog(9) -> _start(9) -> main(9) -> work(8) -> leaf(5), write(3) ...
                 */
                CHECK(strstr(data, "\"nodes\":[0,11,2,1,9,1,2,9,1,3,9,2,4,8,2,5,5,0,6,3,1,7,3,1,8,3,0,9,1,0,"
                                   "10,2,1,11,2,0]"),
                      "nodes: %.200s", strstr(data, "\"nodes\"") ?: "(none)");
        }
        free(html);

        r = flamegraph_render(NULL, 0, NULL, &html, &size);
        CHECK(r == 0 && strstr(html, "\"total\":0"), "empty profile renders");
        free(html);
}

static void test_filter_parse(void)
{
        SampleFilter f = {};
        char err[200], desc[300];

        CHECK(sample_filter_is_empty(&f), "empty");
        CHECK(sample_filter_add(&f, "pid", "42", err, sizeof(err)) == 0, "pid 42");
        CHECK(sample_filter_add(&f, "pid", "0", err, sizeof(err)) < 0, "pid 0 rejected");
        CHECK(sample_filter_add(&f, "pid", "-1", err, sizeof(err)) < 0, "pid -1 rejected");
        CHECK(sample_filter_add(&f, "pid", "12x", err, sizeof(err)) < 0 && strstr(err, "12x"), "pid 12x: %s",
              err);
        CHECK(sample_filter_add(&f, "pid", "99999999999", err, sizeof(err)) < 0, "huge pid rejected");
        CHECK(sample_filter_add(&f, "comm", "averyveryverylongname", err, sizeof(err)) == 0, "long comm");
        CHECK(strcmp(f.comms[0], "averyveryverylo") == 0, "comm cut to 15: %s", f.comms[0]);
        CHECK(sample_filter_add(&f, "unit", "nginx.service", err, sizeof(err)) == 0, "unit");
        CHECK(sample_filter_add(&f, "unit", "", err, sizeof(err)) < 0, "empty unit rejected");
        CHECK(sample_filter_add(&f, "unit", "a\nb", err, sizeof(err)) < 0, "control char rejected");
        CHECK(sample_filter_add(&f, "bogus", "1", err, sizeof(err)) < 0, "unknown kind");
        for (int i = 0; i < SAMPLE_FILTER_MAX - 1; i++)
                CHECK(sample_filter_add(&f, "pid", "7", err, sizeof(err)) == 0, "pid %d", i);
        CHECK(sample_filter_add(&f, "pid", "7", err, sizeof(err)) == -E2BIG, "too many pids");
        sample_filter_describe(&f, desc, sizeof(desc));
        CHECK(strncmp(desc, "pid=42,7,7", 10) == 0 &&
                      strstr(desc, " comm=averyveryverylo unit=nginx.service"),
              "describe: %s", desc);

        struct profd_filter_config c;
        sample_filter_to_bpf(&f, &c);
        CHECK(c.n_pids == SAMPLE_FILTER_MAX && c.pids[0] == 42 && c.n_comms == 1 && c.cgroups == 1,
              "bpf config");
        SampleFilter e = {};
        sample_filter_to_bpf(&e, &c);
        CHECK(c.n_pids == 0 && c.n_comms == 0 && c.cgroups == 0, "empty bpf config");
}

static void test_window_filter(void)
{
        ProfileWindow *w = calloc(1, sizeof(*w));
        SampleFilter f = {};
        char err[100];

        w->n_samples = 4;
        w->samples = calloc(4, sizeof(AggSample));
        const struct {
                uint32_t pid;
                const char *comm, *thread;
                uint64_t count;
        } s[] = {{1, "nginx", "nginx", 3},
                 {2, "postgres", "walwriter", 5},
                 {3, "nginx", "worker", 7},
                 {4, "x", "y", 1}};
        for (int i = 0; i < 4; i++) {
                w->samples[i].pid = s[i].pid;
                strcpy(w->samples[i].comm, s[i].comm);
                strcpy(w->samples[i].thread_comm, s[i].thread);
                w->samples[i].count = s[i].count;
                w->total += s[i].count;
        }
        CHECK(profile_window_filter(w, &f, NULL, 0) == 0 && w->n_samples == 4, "empty filter keeps all");
        sample_filter_add(&f, "comm", "nginx", err, sizeof(err));
        sample_filter_add(&f, "comm", "walwriter", err, sizeof(err));
        CHECK(profile_window_filter(w, &f, NULL, 0) == 0 && w->n_samples == 3 && w->total == 15,
              "comm: process or thread name (%zu, %lu)", w->n_samples, (unsigned long)w->total);
        sample_filter_add(&f, "pid", "3", err, sizeof(err));
        CHECK(profile_window_filter(w, &f, NULL, 0) == 0 && w->n_samples == 1 && w->samples[0].pid == 3 &&
                      w->total == 7,
              "kinds combine with AND");
        SampleFilter u = {};
        sample_filter_add(&u, "unit", "a.service", err, sizeof(err));
        CHECK(profile_window_filter(w, &u, NULL, 0) == 0 && w->n_samples == 0 && w->total == 0,
              "unit without a resolvable cgroup matches nothing");
        profile_window_free(w);
}

int main(void)
{
        test_render();
        test_filter_parse();
        test_window_filter();
        if (failures) {
                printf("%u failure(s)\n", failures);
                return 1;
        }
        printf("all passed\n");
        return 0;
}
