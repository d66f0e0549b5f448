/* SPDX-License-Identifier: GPL-2.0-only */
/* Unwind rows from a Go binary's .gopclntab, for Go binaries without DWARF CFI (-ldflags=-s -w,
 * Debian's go tools) and with it alike: the pc -> stack-pointer-delta table ("pcsp") of each
 * function is what Go's own tracebacks use, and Go's .debug_frame is generated from it.
 *
 * Rows: CFA = rsp + delta + 8. Go keeps frame pointers on amd64: a function with a frame saves
 * the caller's rbp just below its return address (CFA - 16), so rbp is restored from there, which
 * the stack switches below need. A few runtime functions get rows of their own:
 *   - the outermost frames of a goroutine or thread (goexit, mstart, rt0_go) and mcall, whose
 *     callee runs on the thread's g0 stack and never returns: the stack ends there, as in Go's
 *     own tracebacks;
 *   - systemstack, morestack and asmcgocall, which call their callee on the g0 stack, and the
 *     vDSO clock calls, which move to it themselves: the callers are on the goroutine's stack,
 *     reached through the saved rbp (PROFD_CFA_GO_SWITCH);
 *   - the signal restorer (sigreturn__sigaction, sigreturn before Go 1.20): a signal frame.
 * See docs/unwinder.md "Go". */
#include "go-table.h"

#include <errno.h>
#include <string.h>

static const char *const go_outermost[] = {"runtime.goexit", "runtime.mstart", "runtime.rt0_go",
                                           "runtime.mcall"};
static const char *const go_switch[] = {"runtime.systemstack", "runtime.morestack", "runtime.asmcgocall",
                                        /* vDSO calls on the g0 stack; they keep their own rbp frame */
                                        "runtime.nanotime1", "runtime.walltime", "runtime.walltime1",
                                        "time.now"};
static const char *const go_signal[] = {"runtime.sigreturn__sigaction", "runtime.sigreturn"};

static bool name_in(const char *name, const char *const *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(name, list[i]) == 0)
                        return true;
        return false;
}

#define NAME_IN(name, list) name_in(name, list, sizeof(list) / sizeof(list[0]))

/* A Go stack-pointer delta above this is not a real frame (Go's largest frames are a few MiB). */
#define GO_MAX_FRAME (1 << 30)

int go_table_rows(const GoPclntab *t, const TextRanges *text, TableBuilder *b, CfiError *err)
{
        uint64_t emitted = 0;
        int r;

        for (uint64_t i = 0; i < t->nfunc; i++) {
                GoFunc f, next;
                if (!gopclntab_func(t, i, &f) || !text_ranges_contain(text, f.entry, f.end))
                        continue;
                /* A return address equal to the restorer's entry is looked up at entry - 1 (the
                 * last padding byte of the function before it): give that byte to the restorer. */
                uint64_t end = f.end;
                if (i + 1 < t->nfunc && gopclntab_func(t, i + 1, &next) && next.entry == f.end &&
                    NAME_IN(next.name, go_signal) && end > f.entry + 1)
                        end--;

                struct profd_unwind_rule rule = {};
                if (NAME_IN(f.name, go_outermost) || NAME_IN(f.name, go_switch) ||
                    NAME_IN(f.name, go_signal)) {
                        rule.cfa_kind = NAME_IN(f.name, go_outermost) ? PROFD_CFA_UNDEF
                                        : NAME_IN(f.name, go_switch)  ? PROFD_CFA_GO_SWITCH
                                                                      : PROFD_CFA_SIGNAL;
                        uint64_t start = NAME_IN(f.name, go_signal) && f.entry > 0 ? f.entry - 1 : f.entry;
                        r = builder_interval(b, start, end, &rule, UNSUP_NONE);
                        if (r < 0)
                                return r;
                        emitted++;
                        continue;
                }

                uint64_t pos = f.pcsp, pc = f.entry, start;
                int32_t delta = -1;
                while (gopclntab_pcvalue_next(t, &f, &pos, &pc, &delta, &start)) {
                        if (start >= end)
                                break;
                        if (delta < 0 || delta > GO_MAX_FRAME || (delta & 7)) {
                                rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
                                r = builder_interval(b, start, pc < end ? pc : end, &rule, UNSUP_CFA);
                        } else {
                                rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_RSP,
                                                                  .cfa_offset = delta + 8};
                                if (delta >= 16) {
                                        rule.rbp_kind = PROFD_RBP_CFA_OFFSET;
                                        rule.rbp_offset = -16;
                                }
                                r = builder_interval(b, start, pc < end ? pc : end, &rule, UNSUP_NONE);
                        }
                        if (r < 0)
                                return r;
                        emitted++;
                }
        }
        if (emitted == 0)
                return cfi_fail(err, -ENODATA, ".gopclntab has no usable functions");
        return 0;
}
