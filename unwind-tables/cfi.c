/* SPDX-License-Identifier: GPL-2.0-only */
/* One pass over .eh_frame/.debug_frame bytes: CIE/FDE headers are decoded in place and each FDE's
 * CFA program is interpreted straight into table rows, without building per-FDE row lists. Only the
 * registers the BPF unwinder needs are tracked (x86-64: CFA, rbp, rbx, return address; aarch64:
 * CFA, x29, x30 = the return address, and the pointer-authentication state of the return
 * address); every other register's instructions are decoded (so malformed input is still caught)
 * and ignored. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfi.h"

#define DW_EH_PE_omit 0xff
#define DW_EH_PE_absptr 0x00
#define DW_EH_PE_uleb128 0x01
#define DW_EH_PE_udata2 0x02
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_udata8 0x04
#define DW_EH_PE_sleb128 0x09
#define DW_EH_PE_sdata2 0x0a
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_sdata8 0x0c
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_indirect 0x80

#define REG_RBX 3
#define REG_RBP 6
#define REG_RSP 7
/* aarch64 (DWARF for the Arm 64-bit Architecture): x29 the frame pointer, x30 the link register
 * (every CIE GCC and LLVM write names it the return-address column), 31 sp */
#define REG_A64_X29 29
#define REG_A64_SP 31

/* GCC nests remember_state at most a few levels deep; 64 bounds the interpreter's stack use. */
#define REMEMBER_STACK_MAX 64
/* CIEs per binary are few (usually 1-10); a direct-mapped cache avoids re-running their initial
 * instructions for every FDE. */
#define CIE_CACHE_SIZE 64

enum {
        RULE_UNSET = 0, /* no rule: for rbp the ABI's "same value" */
        RULE_UNDEF,
        RULE_SAME,
        RULE_OFFSET,
        RULE_VAL_OFFSET,
        RULE_REGISTER,
        RULE_EXPR,
        RULE_VAL_EXPR,
};

typedef struct RegRule {
        uint8_t kind;
        int64_t value;
} RegRule;

typedef struct CfaState {
        uint64_t cfa_reg;
        int64_t cfa_off;
        const uint8_t *cfa_expr; /* non-NULL: CFA is this DWARF expression */
        uint64_t cfa_expr_len;
        /* x86-64: rbp and rbx; aarch64: rbp is x29, rbx is unused */
        RegRule rbp, rbx, ra;
        /* aarch64: the return address is signed (DW_CFA_AARCH64_negate_ra_state toggled an odd
         * number of times); remembered and restored with the rest */
        bool ra_signed;
} CfaState;

typedef struct Cie {
        uint64_t code_align;
        int64_t data_align;
        uint64_t ra_reg;
        uint8_t fde_enc;
        uint8_t addr_size;
        bool has_z;
        bool signal;
        uint8_t machine; /* CfiMachine */
        const uint8_t *insns, *insns_end;
        CfaState initial;
} Cie;

typedef struct CieCacheEntry {
        bool valid;
        uint32_t section;
        uint64_t offset;
        Cie cie;
} CieCacheEntry;

typedef struct Cursor {
        const uint8_t *p, *end;
        bool overrun;
} Cursor;

static inline bool cur_need(Cursor *c, size_t n)
{
        if ((size_t)(c->end - c->p) < n) {
                c->overrun = true;
                c->p = c->end;
                return false;
        }
        return true;
}

static inline uint8_t rd_u8(Cursor *c)
{
        if (!cur_need(c, 1))
                return 0;
        return *c->p++;
}

static inline uint16_t rd_u16(Cursor *c)
{
        uint16_t v;
        if (!cur_need(c, 2))
                return 0;
        memcpy(&v, c->p, 2);
        c->p += 2;
        return v;
}

static inline uint32_t rd_u32(Cursor *c)
{
        uint32_t v;
        if (!cur_need(c, 4))
                return 0;
        memcpy(&v, c->p, 4);
        c->p += 4;
        return v;
}

static inline uint64_t rd_u64(Cursor *c)
{
        uint64_t v;
        if (!cur_need(c, 8))
                return 0;
        memcpy(&v, c->p, 8);
        c->p += 8;
        return v;
}

static inline uint64_t rd_uleb(Cursor *c)
{
        uint64_t v = 0;
        unsigned shift = 0;
        for (;;) {
                if (c->p >= c->end) {
                        c->overrun = true;
                        return 0;
                }
                uint8_t b = *c->p++;
                if (shift < 64)
                        v |= (uint64_t)(b & 0x7f) << shift;
                shift += 7;
                if (!(b & 0x80))
                        return v;
        }
}

static inline int64_t rd_sleb(Cursor *c)
{
        uint64_t v = 0;
        unsigned shift = 0;
        uint8_t b;
        do {
                if (c->p >= c->end) {
                        c->overrun = true;
                        return 0;
                }
                b = *c->p++;
                if (shift < 64)
                        v |= (uint64_t)(b & 0x7f) << shift;
                shift += 7;
        } while (b & 0x80);
        if (shift < 64 && (b & 0x40))
                v |= ~(uint64_t)0 << shift;
        return (int64_t)v;
}

/* Reads a pointer in DW_EH_PE encoding enc; field_vaddr is the field's own address (pcrel). */
static int rd_encoded(Cursor *c, uint8_t enc, uint8_t addr_size, uint64_t field_vaddr, uint64_t *ret)
{
        uint64_t v;

        if (enc == DW_EH_PE_omit)
                return -EINVAL;
        switch (enc & 0x0f) {
        case DW_EH_PE_absptr:
                v = addr_size == 4 ? rd_u32(c) : rd_u64(c);
                break;
        case DW_EH_PE_uleb128:
                v = rd_uleb(c);
                break;
        case DW_EH_PE_udata2:
                v = rd_u16(c);
                break;
        case DW_EH_PE_udata4:
                v = rd_u32(c);
                break;
        case DW_EH_PE_udata8:
        case DW_EH_PE_sdata8:
                v = rd_u64(c);
                break;
        case DW_EH_PE_sleb128:
                v = (uint64_t)rd_sleb(c);
                break;
        case DW_EH_PE_sdata2:
                v = (uint64_t)(int64_t)(int16_t)rd_u16(c);
                break;
        case DW_EH_PE_sdata4:
                v = (uint64_t)(int64_t)(int32_t)rd_u32(c);
                break;
        default:
                return -EINVAL;
        }
        switch (enc & 0x70) {
        case 0:
                break;
        case DW_EH_PE_pcrel:
                v += field_vaddr;
                break;
        default: /* textrel/datarel/funcrel/aligned never appear in x86-64 FDE headers */
                return -EOPNOTSUPP;
        }
        if (enc & DW_EH_PE_indirect)
                return -EOPNOTSUPP;
        *ret = v;
        return 0;
}

static inline uint64_t vaddr_of(const CfiSection *s, const uint8_t *p)
{
        return s->vaddr + (uint64_t)(p - s->data);
}

typedef struct Record {
        const uint8_t *body, *end; /* body starts after the CIE id / CIE pointer */
        bool is_cie;
        uint64_t cie_offset; /* FDE: section offset of its CIE */
        size_t next;         /* offset of the next record */
        bool terminator;
} Record;

static int read_record(CfiParser *p, const CfiSection *s, size_t off, Record *rec)
{
        Cursor c = {s->data + off, s->data + s->size, false};
        uint64_t len, id;
        unsigned id_size = 4;

        *rec = (Record){};
        len = rd_u32(&c);
        if (c.overrun)
                return cfi_fail(p->err, -EBADMSG, "%s+%#zx: truncated record length", s->name, off);
        if (len == 0) {
                rec->terminator = s->is_eh;
                rec->next = off + 4;
                return 0;
        }
        if (len == 0xffffffffu) {
                len = rd_u64(&c);
                id_size = 8;
                if (c.overrun)
                        return cfi_fail(p->err, -EBADMSG, "%s+%#zx: truncated 64-bit record length", s->name,
                                        off);
        }
        if (len > (uint64_t)(c.end - c.p) || len < id_size)
                return cfi_fail(p->err, -EBADMSG, "%s+%#zx: record length %#llx past end of section",
                                s->name, off, (unsigned long long)len);
        rec->end = c.p + len;
        rec->next = (size_t)(rec->end - s->data);
        const uint8_t *id_pos = c.p;
        id = id_size == 8 ? rd_u64(&c) : rd_u32(&c);
        rec->body = c.p;
        if (s->is_eh) {
                rec->is_cie = id == 0;
                if (!rec->is_cie) {
                        uint64_t pos = (uint64_t)(id_pos - s->data);
                        if (id > pos)
                                return cfi_fail(p->err, -EBADMSG, "%s+%#zx: CIE pointer out of range",
                                                s->name, off);
                        rec->cie_offset = pos - id;
                }
        } else {
                rec->is_cie = id_size == 8 ? id == UINT64_MAX : id == 0xffffffffu;
                if (!rec->is_cie) {
                        if (id >= s->size)
                                return cfi_fail(p->err, -EBADMSG, "%s+%#zx: CIE pointer out of range",
                                                s->name, off);
                        rec->cie_offset = id;
                }
        }
        return 0;
}

static int execute(CfiParser *p, const CfiSection *s, const Cie *cie, const uint8_t *ip, const uint8_t *end,
                   CfaState *st, const CfaState *init, uint64_t *loc, uint64_t pc_end, TableBuilder *b);

static int parse_cie(CfiParser *p, uint32_t si, uint64_t offset, Cie *cie)
{
        const CfiSection *s = &p->sections[si];
        Record rec;
        int r;

        if (offset >= s->size)
                return cfi_fail(p->err, -EBADMSG, "%s+%#llx: CIE offset past end of section", s->name,
                                (unsigned long long)offset);
        r = read_record(p, s, offset, &rec);
        if (r < 0)
                return r;
        if (rec.terminator || !rec.end || !rec.is_cie)
                return cfi_fail(p->err, -EBADMSG, "%s+%#llx: FDE's CIE pointer does not point at a CIE",
                                s->name, (unsigned long long)offset);

        Cursor c = {rec.body, rec.end, false};
        *cie = (Cie){.fde_enc = DW_EH_PE_absptr, .addr_size = 8, .machine = p->machine};
        uint8_t version = rd_u8(&c);
        if (version != 1 && version != 3 && version != 4)
                return cfi_fail(p->err, -EOPNOTSUPP, "%s+%#llx: unsupported CIE version %u", s->name,
                                (unsigned long long)offset, version);
        const uint8_t *aug = c.p;
        const uint8_t *nul = memchr(c.p, 0, (size_t)(c.end - c.p));
        if (!nul)
                return cfi_fail(p->err, -EBADMSG, "%s+%#llx: unterminated CIE augmentation", s->name,
                                (unsigned long long)offset);
        c.p = nul + 1;
        if (version == 4) {
                cie->addr_size = rd_u8(&c);
                uint8_t seg_size = rd_u8(&c);
                if ((cie->addr_size != 4 && cie->addr_size != 8) || seg_size != 0)
                        return cfi_fail(p->err, -EOPNOTSUPP, "%s+%#llx: unsupported CIE address size %u",
                                        s->name, (unsigned long long)offset, cie->addr_size);
        }
        cie->code_align = rd_uleb(&c);
        cie->data_align = rd_sleb(&c);
        cie->ra_reg = version == 1 ? rd_u8(&c) : rd_uleb(&c);

        if (aug[0] == 'z') {
                cie->has_z = true;
                uint64_t aug_len = rd_uleb(&c);
                if (c.overrun || aug_len > (uint64_t)(c.end - c.p))
                        return cfi_fail(p->err, -EBADMSG, "%s+%#llx: CIE augmentation data past end",
                                        s->name, (unsigned long long)offset);
                Cursor a = {c.p, c.p + aug_len, false};
                c.p += aug_len;
                for (const uint8_t *q = aug + 1; *q; q++) {
                        switch (*q) {
                        case 'R':
                                cie->fde_enc = rd_u8(&a);
                                break;
                        case 'L':
                                rd_u8(&a);
                                break;
                        case 'P': {
                                uint8_t enc = rd_u8(&a);
                                uint64_t dummy;
                                /* The personality pointer may be indirect/aligned: only its size
                                 * matters here. */
                                if (rd_encoded(&a, enc & 0x0f, cie->addr_size, 0, &dummy) < 0)
                                        return cfi_fail(p->err, -EBADMSG,
                                                        "%s+%#llx: bad personality encoding %#x", s->name,
                                                        (unsigned long long)offset, enc);
                                break;
                        }
                        case 'S':
                                cie->signal = true;
                                break;
                        case 'B': /* aarch64: return addresses signed with the B key (PAC
                                   * stripping does not depend on the key) */
                        case 'G': /* aarch64: MTE-tagged stack frames */
                                break;
                        default:
                                return cfi_fail(p->err, -EOPNOTSUPP,
                                                "%s+%#llx: unknown CIE augmentation '%s'", s->name,
                                                (unsigned long long)offset, (const char *)aug);
                        }
                }
                if (a.overrun)
                        return cfi_fail(p->err, -EBADMSG, "%s+%#llx: truncated CIE augmentation data",
                                        s->name, (unsigned long long)offset);
        } else {
                /* Without 'z' only flags without data can be skipped safely (.debug_frame "S"). */
                for (const uint8_t *q = aug; *q; q++) {
                        if (*q != 'S')
                                return cfi_fail(p->err, -EOPNOTSUPP,
                                                "%s+%#llx: unsupported CIE augmentation '%s'", s->name,
                                                (unsigned long long)offset, (const char *)aug);
                        cie->signal = true;
                }
        }
        if (c.overrun)
                return cfi_fail(p->err, -EBADMSG, "%s+%#llx: truncated CIE", s->name,
                                (unsigned long long)offset);
        if ((cie->fde_enc & 0x0f) == DW_EH_PE_uleb128 || (cie->fde_enc & 0x0f) == DW_EH_PE_sleb128 ||
            (cie->fde_enc & 0x70) > DW_EH_PE_pcrel || (cie->fde_enc & DW_EH_PE_indirect))
                return cfi_fail(p->err, -EOPNOTSUPP, "%s+%#llx: unsupported FDE pointer encoding %#x",
                                s->name, (unsigned long long)offset, cie->fde_enc);
        cie->insns = c.p;
        cie->insns_end = rec.end;
        p->work += (uint64_t)(cie->insns_end - cie->insns);
        if (p->work > p->work_limit)
                return cfi_fail(p->err, -E2BIG, "%s: CFI too costly to interpret (re-run CIEs)", s->name);

        cie->initial = (CfaState){};
        uint64_t loc = 0;
        return execute(p, s, cie, cie->insns, cie->insns_end, &cie->initial, NULL, &loc, 0, NULL);
}

struct CieCacheEntry *cfi_cie_cache_new(void)
{
        return calloc(CIE_CACHE_SIZE, sizeof(CieCacheEntry));
}

static int get_cie(CfiParser *p, uint32_t si, uint64_t offset, const Cie **ret)
{
        CieCacheEntry *e = &p->cie_cache[(offset ^ si) % CIE_CACHE_SIZE];
        int r;

        if (!(e->valid && e->section == si && e->offset == offset)) {
                e->valid = false;
                r = parse_cie(p, si, offset, &e->cie);
                if (r < 0)
                        return r;
                e->valid = true;
                e->section = si;
                e->offset = offset;
        }
        *ret = &e->cie;
        return 0;
}

typedef struct FdeHeader {
        bool is_cie;
        const Cie *cie;
        uint64_t start, end;
        const uint8_t *insns, *insns_end;
} FdeHeader;

/* Returns 1 and fills h for an FDE, 0 for a CIE/padding (h->cie NULL), with *next set either way. */
static int read_fde(CfiParser *p, uint32_t si, size_t off, FdeHeader *h, size_t *next)
{
        const CfiSection *s = &p->sections[si];
        Record rec;
        int r;

        *h = (FdeHeader){};
        r = read_record(p, s, off, &rec);
        if (r < 0)
                return r;
        *next = rec.terminator ? s->size : rec.next;
        h->is_cie = rec.is_cie;
        if (rec.terminator || !rec.end || rec.is_cie)
                return 0;
        r = get_cie(p, si, rec.cie_offset, &h->cie);
        if (r < 0)
                return r;

        Cursor c = {rec.body, rec.end, false};
        uint64_t start, range;
        const uint8_t *field = c.p;
        r = rd_encoded(&c, h->cie->fde_enc, h->cie->addr_size, vaddr_of(s, field), &start);
        if (r >= 0)
                r = rd_encoded(&c, h->cie->fde_enc & 0x0f, h->cie->addr_size, 0, &range);
        if (r < 0 || c.overrun)
                return cfi_fail(p->err, -EBADMSG, "%s+%#zx: bad FDE address range", s->name, off);
        if (h->cie->has_z) {
                uint64_t aug_len = rd_uleb(&c);
                if (c.overrun || aug_len > (uint64_t)(c.end - c.p))
                        return cfi_fail(p->err, -EBADMSG, "%s+%#zx: FDE augmentation data past end", s->name,
                                        off);
                c.p += aug_len;
        }
        h->start = start;
        h->end = start + range < start ? UINT64_MAX : start + range;
        h->insns = c.p;
        h->insns_end = rec.end;
        return 1;
}

static uint64_t text_end_for(const TextRanges *t, uint64_t pc)
{
        for (size_t i = 0; i < t->n; i++)
                if (pc >= t->start[i] && pc < t->end[i])
                        return t->end[i];
        return 0;
}

int cfi_collect_fdes(CfiParser *p, uint32_t si, FdeRef **fdes, size_t *n, size_t *cap)
{
        const CfiSection *s = &p->sections[si];
        size_t off = 0;
        int r;

        if (s->size > UINT32_MAX)
                return cfi_fail(p->err, -EFBIG, "%s: section larger than 4 GiB", s->name);
        while (off < s->size) {
                FdeHeader h;
                size_t next;

                r = read_fde(p, si, off, &h, &next);
                if (r < 0)
                        return r;
                if (r == 0)
                        p->stats->cies += h.is_cie;
                else if (h.end > h.start) {
                        if (text_end_for(p->text, h.start) == 0)
                                p->stats->fdes_outside_text++;
                        else {
                                if (*n == *cap) {
                                        size_t nc = *cap ? *cap * 2 : 1024;
                                        FdeRef *nf = realloc(*fdes, nc * sizeof(FdeRef));
                                        if (!nf)
                                                return cfi_fail(p->err, -ENOMEM, "out of memory");
                                        *fdes = nf;
                                        *cap = nc;
                                }
                                (*fdes)[(*n)++] = (FdeRef){h.start, (uint32_t)off, si};
                                p->stats->fdes++;
                        }
                }
                off = next;
        }
        return 0;
}

static const uint8_t plt_expr[2][11] = {
        /* breg7 (rsp) 8; breg16 (rip) 0; lit15; and; lit11; ge; lit3; shl; plus */
        {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22},
        /* the same with lit10: .plt.sec entries (IBT) */
        {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3a, 0x2a, 0x33, 0x24, 0x22},
};

/* aarch64 (the encoding of bpf/profd-unwind-table.h): CFA from sp or x29; rbp_* describe x29;
 * rbx_* describe the return address (x30): still in x30, saved at CFA + N, or lost; flags say
 * whether it is signed. */
static int state_to_rule_aarch64(const CfaState *st, const Cie *cie, struct profd_unwind_rule *rule)
{
        *rule = (struct profd_unwind_rule){};
        if (cie->signal) {
                rule->cfa_kind = PROFD_CFA_SIGNAL;
                return UNSUP_NONE;
        }
        if (st->ra.kind == RULE_UNDEF) {
                rule->cfa_kind = PROFD_CFA_UNDEF;
                return UNSUP_NONE;
        }
        if (st->cfa_expr || (st->cfa_reg != REG_A64_SP && st->cfa_reg != REG_A64_X29) ||
            st->cfa_off < INT32_MIN || st->cfa_off > INT32_MAX)
                goto unsupported_cfa;
        rule->cfa_kind = st->cfa_reg == REG_A64_SP ? PROFD_CFA_RSP : PROFD_CFA_RBP;
        rule->cfa_offset = (int32_t)st->cfa_off;
        if (st->rbp.kind == RULE_OFFSET && st->rbp.value >= INT16_MIN && st->rbp.value <= INT16_MAX) {
                rule->rbp_kind = PROFD_RBP_CFA_OFFSET;
                rule->rbp_offset = (int16_t)st->rbp.value;
        } else if (st->rbp.kind != RULE_UNSET && st->rbp.kind != RULE_SAME)
                goto unsupported_rbp;
        if (st->ra_signed)
                rule->flags |= PROFD_RULE_RA_SIGNED;
        /* No rule for x30 (leaf functions, prologues before the store, epilogues after the
         * reload): the return address is still in the link register. */
        if (st->ra.kind == RULE_OFFSET && st->ra.value >= INT16_MIN && st->ra.value <= INT16_MAX) {
                rule->rbx_kind = PROFD_RBP_CFA_OFFSET;
                rule->rbx_offset = (int16_t)st->ra.value;
        } else if (st->ra.kind != RULE_UNSET && st->ra.kind != RULE_SAME) {
                /* in another register or behind an expression: the walk ends at this frame */
                rule->rbx_kind = PROFD_RBX_UNKNOWN;
                return UNSUP_RA;
        }
        return UNSUP_NONE;

unsupported_cfa:
        *rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
        return UNSUP_CFA;
unsupported_rbp:
        *rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
        return UNSUP_RBP;
}

static int state_to_rule(const CfaState *st, const Cie *cie, struct profd_unwind_rule *rule)
{
        if (cie->machine == CFI_AARCH64)
                return state_to_rule_aarch64(st, cie, rule);
        *rule = (struct profd_unwind_rule){};
        if (cie->signal) {
                rule->cfa_kind = PROFD_CFA_SIGNAL;
                return UNSUP_NONE;
        }
        if (st->ra.kind == RULE_UNDEF) {
                rule->cfa_kind = PROFD_CFA_UNDEF;
                return UNSUP_NONE;
        }
        if (st->cfa_expr) {
                if (st->cfa_expr_len == sizeof(plt_expr[0]) && memcmp(st->cfa_expr, plt_expr[0], 11) == 0)
                        rule->cfa_kind = PROFD_CFA_PLT1;
                else if (st->cfa_expr_len == sizeof(plt_expr[1]) &&
                         memcmp(st->cfa_expr, plt_expr[1], 11) == 0)
                        rule->cfa_kind = PROFD_CFA_PLT2;
        } else if ((st->cfa_reg == REG_RSP || st->cfa_reg == REG_RBP || st->cfa_reg == REG_RBX) &&
                   st->cfa_off >= INT32_MIN && st->cfa_off <= INT32_MAX) {
                rule->cfa_kind = st->cfa_reg == REG_RSP   ? PROFD_CFA_RSP
                                 : st->cfa_reg == REG_RBP ? PROFD_CFA_RBP
                                                          : PROFD_CFA_RBX;
                rule->cfa_offset = (int32_t)st->cfa_off;
        }
        if (rule->cfa_kind == PROFD_CFA_END)
                goto unsupported_cfa;
        if (st->ra.kind != RULE_OFFSET || st->ra.value != -8)
                goto unsupported_ra;
        if (st->rbp.kind == RULE_OFFSET && st->rbp.value >= INT16_MIN && st->rbp.value <= INT16_MAX) {
                rule->rbp_kind = PROFD_RBP_CFA_OFFSET;
                rule->rbp_offset = (int16_t)st->rbp.value;
        } else if (st->rbp.kind != RULE_UNSET && st->rbp.kind != RULE_SAME)
                goto unsupported_rbp;
        /* rbx matters only to a CFA based on it: a rule for it BPF cannot follow makes rbx
         * unknown from that frame on, not the row unsupported. */
        if (st->rbx.kind == RULE_OFFSET && st->rbx.value >= INT16_MIN && st->rbx.value <= INT16_MAX) {
                rule->rbx_kind = PROFD_RBP_CFA_OFFSET;
                rule->rbx_offset = (int16_t)st->rbx.value;
        } else if (st->rbx.kind != RULE_UNSET && st->rbx.kind != RULE_SAME)
                rule->rbx_kind = PROFD_RBX_UNKNOWN;
        return UNSUP_NONE;

unsupported_cfa:
        *rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
        return UNSUP_CFA;
unsupported_ra:
        *rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
        return UNSUP_RA;
unsupported_rbp:
        *rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
        return UNSUP_RBP;
}

static inline RegRule *reg_slot(CfaState *st, const Cie *cie, uint64_t reg)
{
        if (reg == cie->ra_reg)
                return &st->ra;
        if (cie->machine == CFI_AARCH64)
                return reg == REG_A64_X29 ? &st->rbp : NULL;
        if (reg == REG_RBP)
                return &st->rbp;
        if (reg == REG_RBX)
                return &st->rbx;
        return NULL;
}

static inline void set_reg(CfaState *st, const Cie *cie, uint64_t reg, uint8_t kind, int64_t value)
{
        RegRule *rr = reg_slot(st, cie, reg);
        if (rr) {
                rr->kind = kind;
                rr->value = value;
        }
        /* rbp/rbx as the return address column is nonsense, but keep both views consistent */
        if (cie->machine == CFI_X86_64 && reg == REG_RBP && reg == cie->ra_reg)
                st->rbp = st->ra;
        if (cie->machine == CFI_X86_64 && reg == REG_RBX && reg == cie->ra_reg)
                st->rbx = st->ra;
}

/* Emits [*loc, new_loc) with the current state, then moves to new_loc. Returns 1 when the FDE's
 * range is exhausted and interpretation can stop. */
static int advance(CfiParser *p, const CfiSection *s, const Cie *cie, const CfaState *st, uint64_t *loc,
                   uint64_t new_loc, uint64_t pc_end, TableBuilder *b, const uint8_t *ip)
{
        struct profd_unwind_rule rule;
        int unsup, r;

        if (!b)
                return cfi_fail(p->err, -EBADMSG, "%s+%#zx: location advance in CIE", s->name,
                                (size_t)(ip - s->data));
        if (new_loc < *loc)
                return cfi_fail(p->err, -EBADMSG, "%s+%#zx: location moves backwards", s->name,
                                (size_t)(ip - s->data));
        if (new_loc > pc_end)
                new_loc = pc_end;
        if (new_loc > *loc) {
                unsup = state_to_rule(st, cie, &rule);
                r = builder_interval(b, *loc, new_loc, &rule, unsup);
                if (r < 0)
                        return r;
        }
        *loc = new_loc;
        return new_loc >= pc_end;
}

static int execute(CfiParser *p, const CfiSection *s, const Cie *cie, const uint8_t *ip, const uint8_t *end,
                   CfaState *st, const CfaState *init, uint64_t *loc, uint64_t pc_end, TableBuilder *b)
{
        CfaState stack[REMEMBER_STACK_MAX];
        unsigned depth = 0;
        Cursor c = {ip, end, false};
        int r;

        while (c.p < c.end) {
                const uint8_t *op_pos = c.p;
                uint8_t op = rd_u8(&c);
                uint64_t reg, u, new_loc;
                int64_t sv;

                switch (op >> 6) {
                case 1: /* DW_CFA_advance_loc */
                        r = advance(p, s, cie, st, loc, *loc + (op & 0x3f) * cie->code_align, pc_end, b,
                                    op_pos);
                        if (r != 0)
                                return r < 0 ? r : 0;
                        continue;
                case 2: /* DW_CFA_offset */
                        u = rd_uleb(&c);
                        set_reg(st, cie, op & 0x3f, RULE_OFFSET, (int64_t)(u * (uint64_t)cie->data_align));
                        continue;
                case 3: /* DW_CFA_restore */
                        reg = op & 0x3f;
                        goto restore;
                }

                switch (op) {
                case 0x00: /* nop */
                        break;
                case 0x01: /* set_loc */
                        if (rd_encoded(&c, s->is_eh ? cie->fde_enc : DW_EH_PE_absptr, cie->addr_size,
                                       vaddr_of(s, c.p), &new_loc) < 0)
                                return cfi_fail(p->err, -EBADMSG, "%s+%#zx: bad DW_CFA_set_loc", s->name,
                                                (size_t)(op_pos - s->data));
                        goto do_advance;
                case 0x02: /* advance_loc1 */
                        new_loc = *loc + rd_u8(&c) * cie->code_align;
                        goto do_advance;
                case 0x03: /* advance_loc2 */
                        new_loc = *loc + rd_u16(&c) * cie->code_align;
                        goto do_advance;
                case 0x04: /* advance_loc4 */
                        new_loc = *loc + rd_u32(&c) * cie->code_align;
                        goto do_advance;
                case 0x05: /* offset_extended */
                        reg = rd_uleb(&c);
                        u = rd_uleb(&c);
                        set_reg(st, cie, reg, RULE_OFFSET, (int64_t)(u * (uint64_t)cie->data_align));
                        break;
                case 0x06: /* restore_extended */
                        reg = rd_uleb(&c);
                        goto restore;
                case 0x07: /* undefined */
                        set_reg(st, cie, rd_uleb(&c), RULE_UNDEF, 0);
                        break;
                case 0x08: /* same_value */
                        set_reg(st, cie, rd_uleb(&c), RULE_SAME, 0);
                        break;
                case 0x09: /* register */
                        reg = rd_uleb(&c);
                        set_reg(st, cie, reg, RULE_REGISTER, (int64_t)rd_uleb(&c));
                        break;
                case 0x0a: /* remember_state: the CFA rule travels with the register rules, as GCC expects */
                        if (depth >= REMEMBER_STACK_MAX)
                                return cfi_fail(p->err, -E2BIG,
                                                "%s+%#zx: DW_CFA_remember_state nested deeper than %d",
                                                s->name, (size_t)(op_pos - s->data), REMEMBER_STACK_MAX);
                        stack[depth++] = *st;
                        break;
                case 0x0b: /* restore_state */
                        if (depth == 0)
                                return cfi_fail(p->err, -EBADMSG,
                                                "%s+%#zx: DW_CFA_restore_state without remember_state",
                                                s->name, (size_t)(op_pos - s->data));
                        *st = stack[--depth];
                        break;
                case 0x0c: /* def_cfa */
                        st->cfa_reg = rd_uleb(&c);
                        st->cfa_off = (int64_t)rd_uleb(&c);
                        st->cfa_expr = NULL;
                        break;
                case 0x0d: /* def_cfa_register */
                        /* After a CFA expression this is strictly invalid, but hand-written asm
                         * (libgcrypt) relies on libgcc's reading: register + the last offset. */
                        st->cfa_reg = rd_uleb(&c);
                        st->cfa_expr = NULL;
                        break;
                case 0x0e: /* def_cfa_offset */
                        st->cfa_off = (int64_t)rd_uleb(&c);
                        goto check_not_expr;
                case 0x0f: /* def_cfa_expression */
                        u = rd_uleb(&c);
                        if (c.overrun || u > (uint64_t)(c.end - c.p))
                                goto truncated;
                        st->cfa_expr = c.p;
                        st->cfa_expr_len = u;
                        c.p += u;
                        break;
                case 0x10: /* expression */
                case 0x16: /* val_expression */
                        reg = rd_uleb(&c);
                        u = rd_uleb(&c);
                        if (c.overrun || u > (uint64_t)(c.end - c.p))
                                goto truncated;
                        c.p += u;
                        set_reg(st, cie, reg, op == 0x10 ? RULE_EXPR : RULE_VAL_EXPR, 0);
                        break;
                case 0x11: /* offset_extended_sf */
                        reg = rd_uleb(&c);
                        sv = rd_sleb(&c);
                        set_reg(st, cie, reg, RULE_OFFSET,
                                (int64_t)((uint64_t)sv * (uint64_t)cie->data_align));
                        break;
                case 0x12: /* def_cfa_sf */
                        st->cfa_reg = rd_uleb(&c);
                        st->cfa_off = (int64_t)((uint64_t)rd_sleb(&c) * (uint64_t)cie->data_align);
                        st->cfa_expr = NULL;
                        break;
                case 0x13: /* def_cfa_offset_sf */
                        st->cfa_off = (int64_t)((uint64_t)rd_sleb(&c) * (uint64_t)cie->data_align);
                        goto check_not_expr;
                case 0x14: /* val_offset */
                        reg = rd_uleb(&c);
                        u = rd_uleb(&c);
                        set_reg(st, cie, reg, RULE_VAL_OFFSET, (int64_t)(u * (uint64_t)cie->data_align));
                        break;
                case 0x15: /* val_offset_sf */
                        reg = rd_uleb(&c);
                        sv = rd_sleb(&c);
                        set_reg(st, cie, reg, RULE_VAL_OFFSET,
                                (int64_t)((uint64_t)sv * (uint64_t)cie->data_align));
                        break;
                case 0x2d: /* aarch64: DW_CFA_AARCH64_negate_ra_state (elsewhere GNU_window_save,
                            * SPARC's, which no x86-64 CFI has) */
                        if (cie->machine != CFI_AARCH64)
                                return cfi_fail(p->err, -EBADMSG, "%s+%#zx: unknown CFA instruction %#x",
                                                s->name, (size_t)(op_pos - s->data), op);
                        st->ra_signed = !st->ra_signed;
                        break;
                case 0x2e: /* GNU_args_size: only matters for exception landing pads */
                        rd_uleb(&c);
                        break;
                case 0x2f: /* GNU_negative_offset_extended */
                        reg = rd_uleb(&c);
                        u = rd_uleb(&c);
                        set_reg(st, cie, reg, RULE_OFFSET, -(int64_t)(u * (uint64_t)cie->data_align));
                        break;
                default:
                        return cfi_fail(p->err, -EBADMSG, "%s+%#zx: unknown CFA instruction %#x", s->name,
                                        (size_t)(op_pos - s->data), op);
                }
                if (c.overrun)
                        goto truncated;
                continue;

        do_advance:
                if (c.overrun)
                        goto truncated;
                r = advance(p, s, cie, st, loc, new_loc, pc_end, b, op_pos);
                if (r != 0)
                        return r < 0 ? r : 0;
                continue;

        check_not_expr:
                /* libgcc keeps a CFA expression in force here and only records the offset */
                if (c.overrun)
                        goto truncated;
                continue;

        restore : {
                if (c.overrun)
                        goto truncated;
                RegRule *rr = reg_slot(st, cie, reg);
                if (rr) {
                        const RegRule *ir = init ? reg_slot((CfaState *)init, cie, reg) : NULL;
                        *rr = ir ? *ir : (RegRule){};
                        if (cie->machine == CFI_X86_64 && reg == REG_RBP && reg == cie->ra_reg)
                                st->rbp = st->ra;
                        if (cie->machine == CFI_X86_64 && reg == REG_RBX && reg == cie->ra_reg)
                                st->rbx = st->ra;
                }
                continue;
        }
        }
        if (c.overrun)
                goto truncated;
        return 0;

truncated:
        return cfi_fail(p->err, -EBADMSG, "%s+%#zx: truncated CFA instructions", s->name,
                        (size_t)(c.end - s->data));
}

int cfi_run_fde(CfiParser *p, const FdeRef *f, TableBuilder *b)
{
        const CfiSection *s = &p->sections[f->section];
        FdeHeader h;
        size_t next;
        int r;

        r = read_fde(p, f->section, f->offset, &h, &next);
        if (r < 0)
                return r;
        if (r == 0)
                return cfi_fail(p->err, -EBADMSG, "%s+%#x: expected an FDE", s->name, f->offset);
        if (h.start != f->start)
                return cfi_fail(p->err, -EBADMSG, "%s+%#x: FDE starts at %#llx, .eh_frame_hdr says %#llx",
                                s->name, f->offset, (unsigned long long)h.start,
                                (unsigned long long)f->start);
        uint64_t text_end = text_end_for(p->text, h.start);
        if (p->count_in_run) {
                if (h.end > h.start && text_end == 0)
                        p->stats->fdes_outside_text++;
                else if (h.end > h.start)
                        p->stats->fdes++;
        }
        if (h.end <= h.start || text_end == 0)
                return 0;
        if (h.end > text_end)
                h.end = text_end;

        p->work += (uint64_t)(h.insns_end - h.insns);
        if (p->work > p->work_limit)
                return cfi_fail(p->err, -E2BIG, "%s: CFI too costly to interpret (re-run CIEs)", s->name);
        CfaState st = h.cie->initial;
        uint64_t loc = h.start;
        r = execute(p, s, h.cie, h.insns, h.insns_end, &st, &h.cie->initial, &loc, h.end, b);
        if (r < 0)
                return r;
        if (loc < h.end) {
                r = advance(p, s, h.cie, &st, &loc, h.end, h.end, b, h.insns_end);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cfi_count_records(CfiParser *p, uint32_t si, size_t *ret_fdes)
{
        const CfiSection *s = &p->sections[si];
        size_t off = 0, n = 0;
        int r;

        if (s->size > UINT32_MAX)
                return cfi_fail(p->err, -EFBIG, "%s: section larger than 4 GiB", s->name);
        while (off < s->size) {
                Record rec;
                r = read_record(p, s, off, &rec);
                if (r < 0)
                        return r;
                if (rec.terminator)
                        break;
                if (rec.end) {
                        p->stats->cies += rec.is_cie;
                        n += !rec.is_cie;
                }
                off = rec.next;
        }
        *ret_fdes = n;
        return 0;
}

int cfi_eh_frame_hdr(CfiParser *p, const CfiSection *hdr, uint32_t eh_si, EhFrameHdr *ret)
{
        const CfiSection *eh = &p->sections[eh_si];
        Cursor c = {hdr->data, hdr->data + hdr->size, false};
        uint64_t eh_ptr, count;

        *ret = (EhFrameHdr){};
        uint8_t version = rd_u8(&c), ptr_enc = rd_u8(&c), count_enc = rd_u8(&c), table_enc = rd_u8(&c);
        /* Only the form every linker writes; anything else falls back to sorting the FDEs. */
        if (c.overrun || version != 1 || count_enc != DW_EH_PE_udata4 ||
            table_enc != 0x3b /* datarel|sdata4 */)
                return 0;
        if (rd_encoded(&c, ptr_enc, 8, vaddr_of(hdr, c.p), &eh_ptr) < 0 || eh_ptr != eh->vaddr)
                return 0;
        count = rd_u32(&c);
        if (c.overrun || count > (uint64_t)(c.end - c.p) / 8)
                return 0;
        ret->table = c.p;
        ret->count = count;
        ret->vaddr = hdr->vaddr;
        /* sorted, and every entry inside .eh_frame: checked here so the caller can fall back */
        int64_t prev = INT64_MIN;
        for (size_t i = 0; i < count; i++) {
                int32_t loc, fde;
                memcpy(&loc, c.p + i * 8, 4);
                memcpy(&fde, c.p + i * 8 + 4, 4);
                uint64_t fde_addr = hdr->vaddr + (uint64_t)(int64_t)fde;
                if (loc < prev || fde_addr < eh->vaddr || fde_addr - eh->vaddr >= eh->size)
                        return 0;
                prev = loc;
        }
        return 1;
}

void cfi_eh_frame_hdr_entry(const EhFrameHdr *h, const CfiSection *eh, size_t i, FdeRef *ret)
{
        int32_t loc, fde;
        memcpy(&loc, h->table + i * 8, 4);
        memcpy(&fde, h->table + i * 8 + 4, 4);
        ret->start = h->vaddr + (uint64_t)(int64_t)loc;
        ret->offset = (uint32_t)(h->vaddr + (uint64_t)(int64_t)fde - eh->vaddr);
        ret->section = 0;
}
