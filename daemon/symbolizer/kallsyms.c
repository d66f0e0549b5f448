/* SPDX-License-Identifier: GPL-2.0-only */
/* Kernel names: the text symbols of /proc/kallsyms with their modules, stored as offsets into one
 * string block, reread when modules come and go; the kernel's GNU build ID. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer/kallsyms.h"
#include "util/array.h"
#include "util/hash.h"
#include "util/macro.h"
#include "util/time-util.h"

/* kallsyms changes when modules load (checked through /proc/modules every
 * MODULES_CHECK_NS) and, for BPF programs and trampolines, without a trace there: reread it
 * then, and at least every KALLSYMS_MAX_AGE_NS. A reread costs ~50-100 ms (the kernel formats
 * ~100k lines), so not more often. */
#define KALLSYMS_MAX_AGE_NS (300 * NSEC_PER_SEC)
#define MODULES_CHECK_NS (10 * NSEC_PER_SEC)

static int ksym_cmp(const void *a, const void *b)
{
        const KSym *x = a, *y = b;
        return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int knames_add(Kallsyms *k, const char *str, size_t len, size_t *cap, uint32_t *ret)
{
        if (k->knames_size + len + 1 > UINT32_MAX)
                return -E2BIG;
        if (ARRAY_GROW(k->knames, *cap, k->knames_size + len + 1, 1 << 20) < 0)
                return -ENOMEM;
        memcpy(k->knames + k->knames_size, str, len);
        k->knames[k->knames_size + len] = 0;
        *ret = (uint32_t)k->knames_size;
        k->knames_size += len + 1;
        return 0;
}

/* Text symbols of /proc/kallsyms, sorted. With kptr_restrict every address reads as 0: then the
 * table stays empty and frames say why. */
int kallsyms_load(Kallsyms *k, const char *path)
{
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t size = 0, cap = 0, kcap = 0, nonzero = 0, total = 0;
        uint32_t last_mod = 0;
        char last_mod_name[64] = "";
        ssize_t len;
        int r;

        free(k->ksyms);
        free(k->knames);
        k->ksyms = NULL;
        k->knames = NULL;
        k->n_ksyms = k->knames_size = 0;
        k->kallsyms_loaded_ns = now_ns(CLOCK_MONOTONIC);
        k->n_kallsyms_loads++;

        f = fopen(path, "re");
        if (!f)
                return (k->kallsyms_error = -errno);
        r = knames_add(k, "", 0, &cap, &last_mod);
        if (r < 0)
                return (k->kallsyms_error = r);

        while ((len = getline(&line, &size, f)) > 0) {
                char *p = line, *end, *name, *mod;
                uint64_t addr;
                char type;
                uint32_t name_off, mod_off = 0;

                if (line[len - 1] == '\n')
                        line[--len] = 0;
                errno = 0;
                addr = strtoull(p, &end, 16);
                if (errno || end == p || end[0] != ' ' || !end[1] || end[2] != ' ')
                        continue;
                type = end[1];
                name = end + 3;
                total++;
                if (addr != 0)
                        nonzero++;
                if (type != 't' && type != 'T' && type != 'w' && type != 'W')
                        continue;
                mod = strchr(name, '\t');
                if (mod) {
                        *mod++ = 0;
                        if (*mod == '[') {
                                mod++;
                                mod[strcspn(mod, "]")] = 0;
                        }
                        /* Consecutive symbols share a module: store its name once per run. */
                        if (strcmp(mod, last_mod_name) != 0) {
                                r = knames_add(k, mod, strlen(mod), &cap, &last_mod);
                                if (r < 0)
                                        return (k->kallsyms_error = r);
                                snprintf(last_mod_name, sizeof(last_mod_name), "%s", mod);
                        }
                        mod_off = last_mod;
                }
                if (addr == 0)
                        continue;
                r = knames_add(k, name, strlen(name), &cap, &name_off);
                if (r < 0)
                        return (k->kallsyms_error = r);
                if (ARRAY_GROW(k->ksyms, kcap, k->n_ksyms + 1, 65536) < 0)
                        return (k->kallsyms_error = -ENOMEM);
                k->ksyms[k->n_ksyms++] = (KSym){.addr = addr, .name = name_off, .module = mod_off};
        }
        qsort_safe(k->ksyms, k->n_ksyms, sizeof(*k->ksyms), ksym_cmp);
        k->kallsyms_hidden = total > 0 && nonzero == 0;
        k->kallsyms_error = total == 0 ? -ENODATA : 0;
        return k->kallsyms_error;
}

/* A fingerprint of /proc/modules (names, sizes, load addresses): 0 if there is none. */
static uint64_t modules_fingerprint(void)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/modules", "re");
        char buf[4096];
        uint64_t h = HASH_FNV1A_INIT;
        size_t n;

        if (!f)
                return 0;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                h = hash_fnv1a(h, buf, n);
        return h;
}

bool kallsyms_stale(Kallsyms *k)
{
        uint64_t now = now_ns(CLOCK_MONOTONIC);

        if (k->kallsyms_pinned)
                return false;
        if (k->kallsyms_loaded_ns == 0 || now - k->kallsyms_loaded_ns > KALLSYMS_MAX_AGE_NS)
                return true;
        if (now - k->modules_checked_ns > MODULES_CHECK_NS) {
                uint64_t h = modules_fingerprint();
                k->modules_checked_ns = now;
                if (h != k->modules_hash) {
                        k->modules_hash = h;
                        return true;
                }
        }
        return false;
}

void kallsyms_refresh(Kallsyms *k)
{
        k->modules_hash = modules_fingerprint();
        k->modules_checked_ns = now_ns(CLOCK_MONOTONIC);
        (void)kallsyms_load(k, "/proc/kallsyms");
}

/* The running kernel's GNU build ID from /sys/kernel/notes (raw ELF notes of vmlinux). */
void kallsyms_read_kernel_build_id(Kallsyms *k)
{
        _cleanup_close_ int fd = -1;
        uint8_t buf[4096];
        ssize_t n;
        size_t off = 0;

        k->kernel_build_id_read = true;
        fd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        n = read(fd, buf, sizeof(buf));
        if (n <= 0)
                return;
        while (off + 12 <= (size_t)n) {
                uint32_t namesz, descsz, type;
                memcpy(&namesz, buf + off, 4);
                memcpy(&descsz, buf + off + 4, 4);
                memcpy(&type, buf + off + 8, 4);
                size_t name_off = off + 12, desc_off = name_off + ((namesz + 3) & ~3u);
                size_t next = desc_off + ((descsz + 3) & ~3u);
                if (namesz > 4096 || descsz > 4096 || next > (size_t)n)
                        return;
                if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(buf + name_off, "GNU", 4) == 0 &&
                    descsz > 0 && descsz <= sizeof(k->kernel_build_id)) {
                        memcpy(k->kernel_build_id, buf + desc_off, descsz);
                        k->kernel_build_id_size = descsz;
                        return;
                }
                off = next;
        }
}
