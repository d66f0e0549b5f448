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
 *     reached through the saved rbp (PROFD_CFA_GO_SWITCH; arm64's morestack: from the goroutine's
 *     g.sched, PROFD_CFA_GO_MORESTACK);
 *   - the signal restorer (sigreturn__sigaction, sigreturn before Go 1.20): a signal frame.
 *
 * arm64: a call leaves the return address in x30, not on the stack, so CFA = sp + delta (sp at
 * entry). A function with a frame stores x30 at the new sp and the caller's x29 just below it
 * (small frames: MOVD.W R30, -size(RSP); MOVD R29, -8(RSP); large ones: SUB $size, RSP, R20;
 * STP (R29, R30), -8(R20); MOVD R20, RSP): the return address is at CFA - delta, x29 at
 * CFA - delta - 8. Frameless functions (delta 0, leaves) keep it in x30. Between the small
 * frame's MOVD.W and its MOVD R29 (one instruction) the x29 slot is not written yet.
 * See docs/unwinder.md "Go". */
#include "go-table.h"

#include <errno.h>
#include <gelf.h>
#include <string.h>

static const char *const go_outermost[] = {"runtime.goexit", "runtime.mstart", "runtime.rt0_go",
                                           "runtime.mcall"};
static const char *const go_switch[] = {"runtime.systemstack", "runtime.morestack", "runtime.asmcgocall",
                                        /* vDSO calls on the g0 stack; they keep their own rbp frame */
                                        "runtime.nanotime1", "runtime.walltime", "runtime.walltime1",
                                        "time.now"};
/* time.now is assembly that calls the vDSO itself on linux/amd64 only; elsewhere it is Go code
 * calling runtime.walltime and runtime.nanotime1, an ordinary frame (runtime/timestub.go) */
#define GO_SWITCH_ARM64_N (sizeof(go_switch) / sizeof(go_switch[0]) - 1)
static const char *const go_signal[] = {"runtime.sigreturn__sigaction", "runtime.sigreturn"};

static bool name_in(const char *name, const char *const *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(name, list[i]) == 0)
                        return true;
        return false;
}

#define NAME_IN(name, list) name_in(name, list, sizeof(list) / sizeof(list[0]))

/* Go arm64's runtime.asyncPreempt (runtime/preempt_arm64.s, written by mkpreempt.go) is a call a
 * signal handler injected (runtime/signal_arm64.go pushCall: sp -= 16, the interrupted lr stored at
 * the new sp, lr = the interrupted pc). Its prologue stores lr, the interrupted pc, at its new sp
 * (frame size D: MOVD R30, -D(RSP); SUB $D, RSP), then the interrupted x29 just below it
 * (MOVD R29, -8(RSP); SUB $8, RSP, R29); its epilogue reloads them and ends ADD $D+16, RSP;
 * JMP (R27). From the instruction after that store of x29 up to the ADD, sp is the body's and
 * the interrupted frame is: sp + D + 16 its sp, at sp its exact pc, at sp - 8 its x29, at sp + D
 * its lr (PROFD_CFA_GO_PREEMPT). Before its SUB (Go 1.19: ldr x27, =-D; str x30, [sp, x27];
 * sub sp, sp, #D), the interrupted pc is still in lr, x29 untouched, the interrupted lr at sp, its
 * sp at sp + 16 (PROFD_CFA_GO_PREEMPT with the pc in lr: trusted only where the sample or a signal
 * interrupted it, as every "in lr" row). Those instructions are checked in the code; the rest of
 * the function (the store of x29, the JMP) gets no row a walk could follow wrongly. A function of
 * another shape keeps the ordinary rows. */
#define A64_STUR_X29_SP_M8 0xf81f83fdu /* stur x29, [sp, #-8] */
#define A64_SUB_X29_SP_8 0xd10023fdu   /* sub x29, sp, #8 */
#define A64_ADD_SP_SP 0x910003ffu      /* add sp, sp, #imm12 (imm12 << 10) */
#define A64_BR_X27 0xd61f0360u         /* br x27 */
#define A64_LDR_LIT_X27_MASK 0xff00001fu
#define A64_LDR_LIT_X27 0x5800001bu    /* ldr x27, =literal (the frame size, negated) */
#define A64_STR_X30_SP_X27 0xf83b6bfeu /* str x30, [sp, x27] */
#define A64_SUB_SP_SP 0xd10003ffu      /* sub sp, sp, #imm12 (imm12 << 10) */
#define GO_PUSHCALL_SLOT 16

/* The instruction at vaddr in an executable section, or 0 (no instruction profd checks for). */
static uint32_t code_word(Elf *elf, uint64_t vaddr)
{
        Elf_Scn *scn = NULL;

        while (elf && (scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                Elf_Data *d;
                uint32_t w;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
                    !(sh.sh_flags & SHF_EXECINSTR) || vaddr < sh.sh_addr ||
                    vaddr + 4 > sh.sh_addr + sh.sh_size)
                        continue;
                d = elf_rawdata(scn, NULL);
                if (!d || !d->d_buf || vaddr - sh.sh_addr + 4 > d->d_size)
                        return 0;
                memcpy(&w, (const uint8_t *)d->d_buf + (vaddr - sh.sh_addr), 4);
                return w; /* aarch64 code is little-endian, as the hosts profd runs on */
        }
        return 0;
}

/* asyncPreempt's body [ret_start, ret_end) where PROFD_CFA_GO_PREEMPT holds, and its frame size;
 * false unless the code has the shape described above. */
static bool go_preempt_body(const GoPclntab *t, Elf *elf, const GoFunc *f, uint64_t *ret_start,
                            uint64_t *ret_end, int32_t *ret_delta)
{
        uint64_t pos = f->pcsp, pc = f->entry, start;
        int32_t delta = -1;

        while (gopclntab_pcvalue_next(t, f, &pos, &pc, &delta, &start)) {
                if (start >= f->end)
                        break;
                if (delta <= 0)
                        continue;
                /* the one range with a frame: [start, pc), the ADD its last instruction */
                if (delta + GO_PUSHCALL_SLOT >= 4096 || (delta & 15) || pc - start < 16 || pc + 4 > f->end ||
                    code_word(elf, start) != A64_STUR_X29_SP_M8 ||
                    code_word(elf, start + 4) != A64_SUB_X29_SP_8 ||
                    code_word(elf, pc - 4) != (A64_ADD_SP_SP | (uint32_t)(delta + GO_PUSHCALL_SLOT) << 10) ||
                    code_word(elf, pc) != A64_BR_X27)
                        return false;
                *ret_start = start + 4; /* x29 is in its slot once the STUR ran */
                *ret_end = pc;
                *ret_delta = delta;
                return true;
        }
        return false;
}

/* A Go stack-pointer delta above this is not a real frame (Go's largest frames are a few MiB). */
#define GO_MAX_FRAME (1 << 30)

/* The row of an ordinary Go frame whose stack-pointer delta is delta (checked: >= 0, 8-aligned,
 * at most GO_MAX_FRAME). Returns UNSUP_NONE, or UNSUP_RA when the return address's slot is beyond
 * the 16-bit offset the rule can hold (the walk ends there). */
static int go_rule(int32_t delta, bool aarch64, struct profd_unwind_rule *rule)
{
        if (!aarch64) {
                *rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_RSP, .cfa_offset = delta + 8};
                if (delta >= 16) {
                        rule->rbp_kind = PROFD_RBP_CFA_OFFSET;
                        rule->rbp_offset = -16;
                }
                return UNSUP_NONE;
        }
        *rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_RSP, .cfa_offset = delta};
        if (delta == 0)
                return UNSUP_NONE; /* return address in x30, x29 untouched */
        if (delta + 8 > -INT16_MIN) {
                rule->rbx_kind = PROFD_RBX_UNKNOWN;
                return UNSUP_RA;
        }
        rule->rbx_kind = PROFD_RBP_CFA_OFFSET;
        rule->rbx_offset = (int16_t)-delta;
        rule->rbp_kind = PROFD_RBP_CFA_OFFSET;
        rule->rbp_offset = (int16_t)(-delta - 8);
        return UNSUP_NONE;
}

int go_table_rows(const GoPclntab *t, Elf *elf, const TextRanges *text, bool aarch64, TableBuilder *b,
                  CfiError *err)
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
                bool is_switch =
                        aarch64 ? name_in(f.name, go_switch, GO_SWITCH_ARM64_N) : NAME_IN(f.name, go_switch);
                if (NAME_IN(f.name, go_outermost) || is_switch || NAME_IN(f.name, go_signal)) {
                        rule.cfa_kind = NAME_IN(f.name, go_outermost) ? PROFD_CFA_UNDEF
                                        : is_switch                   ? PROFD_CFA_GO_SWITCH
                                                                      : PROFD_CFA_SIGNAL;
                        /* arm64 keeps g in x28: the goroutine's g.sched is found from the sample */
                        if (aarch64 && strcmp(f.name, "runtime.morestack") == 0)
                                rule.cfa_kind = PROFD_CFA_GO_MORESTACK;
                        uint64_t start = NAME_IN(f.name, go_signal) && f.entry > 0 ? f.entry - 1 : f.entry;
                        r = builder_interval(b, start, end, &rule, UNSUP_NONE);
                        if (r < 0)
                                return r;
                        emitted++;
                        continue;
                }

                uint64_t pre_start, pre_end;
                int32_t pre_delta;
                if (aarch64 && strcmp(f.name, "runtime.asyncPreempt") == 0 &&
                    go_preempt_body(t, elf, &f, &pre_start, &pre_end, &pre_delta)) {
                        uint64_t body = pre_start - 4; /* the range with the frame: after the SUB */
                        if (body == f.entry + 12 &&
                            (code_word(elf, f.entry) & A64_LDR_LIT_X27_MASK) == A64_LDR_LIT_X27 &&
                            code_word(elf, f.entry + 4) == A64_STR_X30_SP_X27 &&
                            code_word(elf, f.entry + 8) == (A64_SUB_SP_SP | (uint32_t)pre_delta << 10)) {
                                rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_GO_PREEMPT,
                                                                  .cfa_offset = GO_PUSHCALL_SLOT};
                                r = builder_interval(b, f.entry, body, &rule, UNSUP_NONE);
                        } else {
                                rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
                                r = builder_interval(b, f.entry, body, &rule, UNSUP_CFA);
                        }
                        if (r >= 0) {
                                rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
                                r = builder_interval(b, body, pre_start, &rule, UNSUP_CFA);
                        }
                        if (r >= 0) {
                                int32_t cfa = pre_delta + GO_PUSHCALL_SLOT;
                                rule = (struct profd_unwind_rule){
                                        .cfa_kind = PROFD_CFA_GO_PREEMPT,
                                        .cfa_offset = cfa,
                                        .rbp_kind = PROFD_RBP_CFA_OFFSET,
                                        .rbp_offset = (int16_t)(-cfa - 8),
                                        .rbx_kind = PROFD_RBP_CFA_OFFSET,
                                        .rbx_offset = (int16_t)-cfa,
                                };
                                r = builder_interval(b, pre_start, pre_end, &rule, UNSUP_NONE);
                        }
                        if (r >= 0) {
                                rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
                                r = builder_interval(b, pre_end, end, &rule, UNSUP_CFA);
                        }
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
                                int unsup = go_rule(delta, aarch64, &rule);
                                r = builder_interval(b, start, pc < end ? pc : end, &rule, unsup);
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
