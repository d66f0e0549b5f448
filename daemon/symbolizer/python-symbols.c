/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/python-stack.h"
#include "symbolizer/python-symbols.h"

struct PythonSymbols {
        PythonProcs *procs;
        PythonFrameIds *ids;
        PythonCodeCache *code;
        char name[2 * PYTHON_CODE_MAX_NAME + 8];
        uint64_t noted, read_errors, no_process;
};

int python_symbols_new(PythonProcs *procs, PythonFrameIds *ids, PythonSymbols **ret)
{
        PythonSymbols *ps = calloc(1, sizeof(*ps));
        int r;

        if (!ps)
                return -ENOMEM;
        r = python_code_cache_new(0, 0, &ps->code);
        if (r < 0) {
                free(ps);
                return r;
        }
        ps->procs = procs;
        ps->ids = ids;
        *ret = ps;
        return 0;
}

PythonSymbols *python_symbols_free(PythonSymbols *ps)
{
        if (!ps)
                return NULL;
        python_code_cache_free(ps->code);
        free(ps);
        return NULL;
}

/* Reads the code object of one frame into the cache unless it is there. false once the process
 * is gone (its other frames need not be tried). */
static bool note_frame(PythonSymbols *ps, const PythonProcess *pp, uint64_t code, uint32_t fp,
                       uint32_t instr)
{
        int e;

        ps->noted++;
        e = python_code_resolve(ps->code, pp->pid, pp->start_time, &pp->offsets, pp->code_type, pp->str_type,
                                code, fp, instr, NULL);
        if (e == -ESRCH)
                return false;
        if (e < 0)
                ps->read_errors++;
        return true;
}

void python_symbols_note(PythonSymbols *ps, const SampleRecord *records, size_t n)
{
        if (!ps)
                return;
        for (size_t i = 0; i < n; i++) {
                const SampleRecord *r = &records[i];
                const PythonProcess *pp = NULL;
                bool looked = false;

                for (uint32_t k = 0; k < r->n_user; k++) {
                        uint64_t f = r->user_frames[k], code;
                        uint32_t fp;

                        if (!python_frame_is(f) || !python_frame_has_id(f) ||
                            python_frame_ids_get(ps->ids, python_frame_id(f), &code, &fp) < 0)
                                continue;
                        if (!looked) {
                                pp = python_procs_get(ps->procs, (pid_t)r->pid);
                                looked = true;
                                if (!pp)
                                        ps->no_process++;
                        }
                        if (!pp)
                                break; /* gone already: named from the cache if it was read before */
                        if (!note_frame(ps, pp, code, fp, python_frame_instr(f)))
                                break;
                }
        }
}

void python_symbols_note_stack(void *userdata, uint32_t pid, const uint64_t *frames, size_t n)
{
        PythonSymbols *ps = userdata;
        const PythonProcess *pp = python_procs_get(ps->procs, (pid_t)pid);

        if (!pp)
                return;
        /* As BPF wrote them: (code and instruction, fingerprint) per Python frame. */
        for (size_t k = 0; k + 1 < n; k++) {
                uint64_t f = frames[k], g = frames[k + 1];

                if (!python_frame_is(f) || (f & PROFD_FRAME_PY_FP) || !python_frame_is(g) ||
                    !(g & PROFD_FRAME_PY_FP))
                        continue;
                k++;
                if ((uint32_t)g &&
                    !note_frame(ps, pp, python_frame_code(f), (uint32_t)g, python_frame_instr(f)))
                        return;
        }
}

void python_module_name(const char *file, char *buf, size_t size)
{
        static const char *const roots[] = {"/site-packages/", "/dist-packages/"};
        const char *start = NULL, *end;
        size_t n;

        if (size == 0)
                return;
        buf[0] = 0;
        if (!file || !file[0])
                return;
        if (strncmp(file, "<frozen ", 8) == 0) {
                start = file + 8;
                end = strchr(start, '>');
                if (!end)
                        return;
        } else {
                if (file[0] == '<')
                        return; /* <string>, <stdin>: no module */
                for (size_t i = 0; i < ELEMENTSOF(roots) && !start; i++) {
                        const char *p = strstr(file, roots[i]), *q;

                        for (q = p; q; q = strstr(q + 1, roots[i]))
                                p = q;
                        if (p)
                                start = p + strlen(roots[i]);
                }
                /* The standard library: .../lib/python3.X/MODULE */
                if (!start) {
                        const char *p = strstr(file, "/lib/python3");

                        if (p && (p = strchr(p + 1 + strlen("lib/"), '/')))
                                start = p + 1;
                }
                if (!start) {
                        start = strrchr(file, '/');
                        start = start ? start + 1 : file;
                }
                end = start + strlen(start);
                if (end - start > 3 && strcmp(end - 3, ".py") == 0)
                        end -= 3;
        }
        n = (size_t)(end - start);
        if (n >= size)
                n = size - 1;
        memcpy(buf, start, n);
        buf[n] = 0;
        for (char *c = buf; *c; c++)
                if (*c == '/')
                        *c = '.';
        n = strlen(buf);
        if (n >= 9 && strcmp(buf + n - 9, ".__init__") == 0)
                buf[n - 9] = 0;
}

/* "[python] 0xCODE": Python code ran here, which one is not known for sure. */
static int placeholder(PythonSymbols *ps, uint64_t code, SymFrame *ret, int r)
{
        if (code)
                snprintf(ps->name, sizeof(ps->name), "[python] 0x%" PRIx64, code);
        else
                snprintf(ps->name, sizeof(ps->name), "[python] (id forgotten)");
        *ret = (SymFrame){.name = ps->name, .system_name = ps->name};
        return r;
}

int python_symbols_name(void *userdata, const Process *p, uint64_t frame, SymFrame *ret)
{
        PythonSymbols *ps = userdata;
        const PythonProcess *pp;
        PythonFrameInfo info;
        char module[PYTHON_CODE_MAX_NAME];
        uint64_t code;
        uint32_t fp;
        int r;

        /* Named only as the code object whose fingerprint BPF took: never another that took its
         * memory since. Otherwise a placeholder keeps the address. */
        if (!python_frame_has_id(frame))
                return placeholder(ps, python_frame_code(frame), ret, -ENODATA);
        r = python_frame_ids_get(ps->ids, python_frame_id(frame), &code, &fp);
        if (r < 0)
                return placeholder(ps, 0, ret, r);
        r = python_code_lookup(ps->code, p->pid, p->start_time, code, fp, python_frame_instr(frame), &info);
        if (r == -ENOENT && !p->exited_ns && (pp = python_procs_get(ps->procs, p->pid)) &&
            pp->start_time == p->start_time)
                r = python_code_resolve(ps->code, pp->pid, pp->start_time, &pp->offsets, pp->code_type,
                                        pp->str_type, code, fp, python_frame_instr(frame), &info);
        if (r < 0)
                return placeholder(ps, code, ret, r);
        python_module_name(info.file, module, sizeof(module));
        if (module[0])
                snprintf(ps->name, sizeof(ps->name), "%s.%s", module, info.name);
        else
                snprintf(ps->name, sizeof(ps->name), "%s", info.name);
        *ret = (SymFrame){
                .name = ps->name,
                .system_name = ps->name,
                .file = info.file,
                .line = (int)info.line,
                .start_line = (int)info.first_line,
        };
        return 0;
}

void python_symbols_write_metrics(const PythonSymbols *ps, FILE *f)
{
        if (!ps)
                return;
        python_code_cache_write_metrics(ps->code, f);
}

size_t python_symbols_memory(const PythonSymbols *ps)
{
        return ps ? python_code_cache_bytes(ps->code) : 0;
}

size_t python_symbols_set_code_limit(PythonSymbols *ps, size_t max_bytes)
{
        return ps ? python_code_cache_set_max_bytes(ps->code, max_bytes) : 0;
}
