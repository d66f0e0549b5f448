/* SPDX-License-Identifier: GPL-2.0-only */
/* cgroup path -> unit / container id on synthetic paths of every runtime's layout, and id -> path
 * resolution on real cgroups this test creates (when run as root with a writable cgroup2 mount). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracker/cgroup-resolver.h"

#include "lib/test-util.h"

static bool streq_null(const char *a, const char *b)
{
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const struct {
        const char *path, *unit, *container;
} cases[] = {
        {"/", NULL, NULL},
        {"", NULL, NULL},
        {"/init.scope", "init.scope", NULL},
        {"/system.slice", NULL, NULL},
        {"/system.slice/nginx.service", "nginx.service", NULL},
        {"/system.slice/demo.service/worker", "demo.service", NULL},
        {"/system.slice/system-getty.slice/getty@tty1.service", "getty@tty1.service", NULL},
        {"/system.slice/_cpu.service", "cpu.service", NULL},
        {"/user.slice/user-1000.slice/session-3.scope", "session-3.scope", NULL},
        {"/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service", "user@1000.service", NULL},
        /* docker, systemd cgroup driver and cgroupfs driver */
        {"/system.slice/docker-" ID ".scope", "docker-" ID ".scope", ID},
        {"/docker/" ID, NULL, ID},
        {"/docker/" ID "/", NULL, ID},
        /* containerd under kubernetes, systemd and cgroupfs drivers */
        {"/kubepods.slice/kubepods-burstable.slice/"
         "kubepods-burstable-pod1f2e3d4c_5b6a_7980_a1b2_c3d4e5f60718.slice/"
         "cri-containerd-" ID ".scope",
         "cri-containerd-" ID ".scope", ID},
        {"/kubepods/burstable/pod1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718/" ID, NULL, ID},
        /* cri-o; its conmon scope is not the container */
        {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podab.slice/crio-" ID ".scope",
         "crio-" ID ".scope", ID},
        {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podab.slice/crio-conmon-" ID
         ".scope",
         "crio-conmon-" ID ".scope", NULL},
        /* podman rootful, cgroupfs manager, rootless with the nested "container" cgroup */
        {"/machine.slice/libpod-" ID ".scope", "libpod-" ID ".scope", ID},
        {"/machine.slice/libpod-conmon-" ID ".scope", "libpod-conmon-" ID ".scope", NULL},
        {"/libpod_parent/libpod-" ID, NULL, ID},
        {"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID ".scope/container",
         "user@1000.service", ID},
        {"/system.slice/containerd.service/default/" ID, "containerd.service", ID},
        {"/system.slice/nerdctl-" ID ".scope", "nerdctl-" ID ".scope", ID},
        /* not ids: wrong length, upper case, not hex */
        {"/docker/0123456789ab", NULL, NULL},
        {"/docker/0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", NULL, NULL},
        {"/docker/g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", NULL, NULL},
        /* odd names are not units */
        {"/system.slice/foo", NULL, NULL},
        {"/system.slice/foo.bar", NULL, NULL},
        {"/system.slice/.service", NULL, NULL},
        {"/system.slice/a b.service", NULL, NULL},
        {"//system.slice//x.socket//", "x.socket", NULL},
};

static void test_parse(void)
{
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *u = NULL, *c = NULL;
                CHECK(cgroup_path_get_unit(cases[i].path, &u) == 0, "unit of %s", cases[i].path);
                CHECK(streq_null(u, cases[i].unit), "unit of %s: got %s want %s", cases[i].path,
                      u ?: "(null)", cases[i].unit ?: "(null)");
                CHECK(cgroup_path_get_container_id(cases[i].path, &c) == 0, "container of %s",
                      cases[i].path);
                CHECK(streq_null(c, cases[i].container), "container of %s: got %s want %s", cases[i].path,
                      c ?: "(null)", cases[i].container ?: "(null)");
                free(u);
                free(c);
        }
        CHECK(cgroup_path_level("/") == 0, "level /");
        CHECK(cgroup_path_level("/a") == 1, "level /a");
        CHECK(cgroup_path_level("/a/b/") == 2, "level /a/b/");
}

static void test_cache_bounds(void)
{
        CgroupResolver *r = NULL;
        /* An empty directory of its own as the root: where file handles are not inode numbers
         * (a bind-mounted /, as in a fresh container root), each unresolved id walks the whole
         * tree under the root, and / can be millions of directories. */
        char root[] = "/tmp/profd-cgroup-test.XXXXXX";
        if (!mkdtemp(root)) {
                CHECK(false, "mkdtemp: %m");
                return;
        }
        int k = cgroup_resolver_new(root, 4, 10, &r);
        CHECK(k == 0, "resolver on %s (%d)", root, k);
        if (k < 0) {
                rmdir(root);
                return;
        }
        /* Ids that are no directory's inode: unresolved entries, and the cache stays at 4. */
        for (uint64_t id = 1000000001; id < 1000000100; id++) {
                const CgroupInfo *i = cgroup_resolver_get(r, id, id);
                CHECK(i && i->id == id && !i->path, "bogus id %lu unresolved", (unsigned long)id);
        }
        char *buf = NULL;
        size_t sz = 0;
        FILE *f = open_memstream(&buf, &sz);
        cgroup_resolver_write_metrics(r, f);
        fclose(f);
        CHECK(strstr(buf, "profd_cgroup_cache_entries 4\n") != NULL, "cache bounded to 4:\n%s", buf);
        CHECK(strstr(buf, "profd_cgroup_cache_evictions_total 95\n") != NULL, "95 evictions:\n%s", buf);
        free(buf);
        cgroup_resolver_gc(r, 2000000000);
        buf = NULL;
        f = open_memstream(&buf, &sz);
        cgroup_resolver_write_metrics(r, f);
        fclose(f);
        CHECK(strstr(buf, "profd_cgroup_cache_entries 0\n") != NULL, "gc empties:\n%s", buf);
        free(buf);
        cgroup_resolver_free(r);
        CHECK(rmdir(root) == 0, "rmdir %s: %m", root);
}

static void test_real(void)
{
        CgroupResolver *r = NULL;
        char dir[4096], sub[4200];
        struct stat st;
        int k;

        k = cgroup_resolver_new(NULL, 64, 1000, &r);
        if (k < 0) {
                printf("SKIP real cgroups: no cgroup2 mount (%s)\n", strerror(-k));
                return;
        }
        snprintf(dir, sizeof(dir), "%s/profd-test-%d.slice", cgroup_resolver_root(r), getpid());
        snprintf(sub, sizeof(sub), "%s/demo-%d.service", dir, getpid());
        if (mkdir(dir, 0755) < 0 || mkdir(sub, 0755) < 0) {
                printf("SKIP real cgroups: cannot create %s: %m\n", sub);
                rmdir(dir);
                cgroup_resolver_free(r);
                return;
        }
        CHECK(stat(sub, &st) == 0, "stat %s", sub);

        char want_path[256], want_unit[64];
        snprintf(want_path, sizeof(want_path), "/profd-test-%d.slice/demo-%d.service", getpid(), getpid());
        snprintf(want_unit, sizeof(want_unit), "demo-%d.service", getpid());

        const CgroupInfo *i = cgroup_resolver_get(r, st.st_ino, 1);
        CHECK(i->path && strcmp(i->path, want_path) == 0, "id %lu -> %s (want %s)", (unsigned long)st.st_ino,
              i->path ?: "(null)", want_path);
        CHECK(i->unit && strcmp(i->unit, want_unit) == 0, "unit %s", i->unit ?: "(null)");

        CgroupMatch m[4];
        k = cgroup_resolver_find_unit(r, want_unit, m, 4);
        CHECK(k == 1 && m[0].id == st.st_ino && m[0].level == 2, "find_unit: %d", k);
        k = cgroup_resolver_find_path(r, want_path, &m[0]);
        CHECK(k == 0 && m[0].id == st.st_ino && m[0].level == 2, "find_path rel: %d", k);
        k = cgroup_resolver_find_path(r, sub, &m[0]);
        CHECK(k == 0 && m[0].id == st.st_ino && m[0].level == 2, "find_path abs: %d", k);
        CHECK(cgroup_resolver_find_path(r, "/no/such/cgroup", &m[0]) == -ENOENT, "find_path missing");

        /* Removed: the cached answer stays until gc after keep_ns. */
        CHECK(rmdir(sub) == 0 && rmdir(dir) == 0, "rmdir");
        i = cgroup_resolver_get(r, st.st_ino, 500);
        CHECK(i->path && strcmp(i->path, want_path) == 0, "cached after removal: %s", i->path ?: "(null)");
        cgroup_resolver_gc(r, 1400);
        i = cgroup_resolver_get(r, st.st_ino, 1400);
        CHECK(i->path && strcmp(i->path, want_path) == 0, "still cached within keep: %s",
              i->path ?: "(null)");
        cgroup_resolver_gc(r, 3000);
        i = cgroup_resolver_get(r, st.st_ino, 3000);
        CHECK(!i->path, "gone after keep_ns and removal");
        cgroup_resolver_free(r);
}

int main(void)
{
        test_parse();
        test_cache_bounds();
        test_real();
        if (failures) {
                printf("%u failure(s)\n", failures);
                return 1;
        }
        printf("all passed\n");
        return 0;
}
