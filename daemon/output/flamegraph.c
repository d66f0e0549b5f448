/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph-html.h" /* generated from flamegraph.html: flamegraph_html[] */
#include "output/flamegraph.h"
#include "util/array.h"
#include "util/utf8.h"

/* Frames in the page's tree (distinct root-first paths). A busy 64-CPU host sampled for 300 s
 * stays well below; beyond it the rest of a stack is merged into one "[more stacks]" frame, which
 * is counted on the page, never dropped silently. Bounds the page to tens of MB. */
#define FLAMEGRAPH_MAX_NODES 400000

#define DATA_MARKER "/*@PROFD_DATA@*/null"

enum { KIND_USER = 0, KIND_KERNEL = 1, KIND_PROCESS = 2, KIND_SPECIAL = 3, KIND_ROOT = 4 };

typedef struct Node {
        uint32_t name, parent;
        uint32_t first_child, last_child, next_sibling; /* 0: none (node 0 is the root) */
        uint64_t value;
} Node;

typedef struct Tree {
        Node *nodes;
        size_t n, cap;
        /* (parent, name) -> child, open addressing; 0 = empty (the root is never a child) */
        uint32_t *child_index;
        size_t n_child_index;
        /* interned names */
        char **names;
        uint8_t *kinds;
        size_t n_names, cap_names;
        uint32_t *name_index; /* open addressing, name id + 1; 0 = empty */
        size_t n_name_index;
        uint64_t merged; /* samples whose stack hit FLAMEGRAPH_MAX_NODES */
} Tree;

static uint64_t hash_bytes(const char *s, size_t n)
{
        uint64_t h = 0xcbf29ce484222325ULL;
        for (size_t i = 0; i < n; i++) {
                h ^= (unsigned char)s[i];
                h *= 0x100000001b3ULL;
        }
        return h;
}

static uint64_t hash_pair(uint32_t parent, uint32_t name)
{
        return (((uint64_t)parent << 32) | name) * 0x9E3779B97F4A7C15ULL;
}

static int name_index_grow(Tree *t)
{
        size_t n = t->n_name_index ? t->n_name_index * 2 : 1024;
        uint32_t *idx = calloc(n, sizeof(uint32_t));
        if (!idx)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_names; i++) {
                size_t k = hash_bytes(t->names[i], strlen(t->names[i])) & (n - 1);
                while (idx[k])
                        k = (k + 1) & (n - 1);
                idx[k] = (uint32_t)i + 1;
        }
        free(t->name_index);
        t->name_index = idx;
        t->n_name_index = n;
        return 0;
}

static uint8_t kind_of(const char *name, size_t len, bool first)
{
        size_t sl = strlen(FOLDED_KERNEL_SUFFIX);
        if (first)
                return KIND_PROCESS;
        if (len >= sl && memcmp(name + len - sl, FOLDED_KERNEL_SUFFIX, sl) == 0)
                return KIND_KERNEL;
        if (len > 0 && name[0] == '[')
                return KIND_SPECIAL;
        return KIND_USER;
}

/* The process name (first frame) and a same-named function are different frames. */
static int intern(Tree *t, const char *s, size_t len, bool first, uint32_t *ret)
{
        int r;

        if ((t->n_names + 1) * 2 > t->n_name_index && (r = name_index_grow(t)) < 0)
                return r;
        uint8_t kind = kind_of(s, len, first);
        size_t k = (hash_bytes(s, len) ^ kind) & (t->n_name_index - 1);
        /* names of different kinds may collide in the probe sequence; compare kind too */
        for (uint32_t id; (id = t->name_index[k]); k = (k + 1) & (t->n_name_index - 1)) {
                const char *n = t->names[id - 1];
                if (t->kinds[id - 1] == kind && strlen(n) == len && memcmp(n, s, len) == 0) {
                        *ret = id - 1;
                        return 0;
                }
        }
        /* names and kinds are parallel: kinds is grown first, to the capacity names then gets. */
        size_t cap_kinds = t->cap_names;
        if (ARRAY_GROW(t->kinds, cap_kinds, t->n_names + 1, 256) < 0 ||
            ARRAY_GROW(t->names, t->cap_names, t->n_names + 1, 256) < 0)
                return -ENOMEM;
        char *copy = strndup(s, len);
        if (!copy)
                return -ENOMEM;
        t->names[t->n_names] = copy;
        t->kinds[t->n_names] = kind;
        t->name_index[k] = (uint32_t)t->n_names + 1;
        *ret = (uint32_t)t->n_names++;
        return 0;
}

static int child_index_grow(Tree *t)
{
        size_t n = t->n_child_index ? t->n_child_index * 2 : 4096;
        uint32_t *idx = calloc(n, sizeof(uint32_t));
        if (!idx)
                return -ENOMEM;
        for (size_t c = 1; c < t->n; c++) {
                size_t k = hash_pair(t->nodes[c].parent, t->nodes[c].name) & (n - 1);
                while (idx[k])
                        k = (k + 1) & (n - 1);
                idx[k] = (uint32_t)c;
        }
        free(t->child_index);
        t->child_index = idx;
        t->n_child_index = n;
        return 0;
}

/* force: create even beyond FLAMEGRAPH_MAX_NODES (only the one marker frame per parent). */
static int child(Tree *t, uint32_t parent, uint32_t name, bool force, uint32_t *ret)
{
        int r;

        if ((t->n + 1) * 2 > t->n_child_index && (r = child_index_grow(t)) < 0)
                return r;
        size_t k = hash_pair(parent, name) & (t->n_child_index - 1);
        for (uint32_t c; (c = t->child_index[k]); k = (k + 1) & (t->n_child_index - 1))
                if (t->nodes[c].name == name && t->nodes[c].parent == parent) {
                        *ret = c;
                        return 0;
                }
        if (t->n >= FLAMEGRAPH_MAX_NODES && !force)
                return -E2BIG;
        if (ARRAY_GROW(t->nodes, t->cap, t->n + 1, 1024) < 0)
                return -ENOMEM;
        uint32_t c = (uint32_t)t->n++;
        t->nodes[c] = (Node){.name = name, .parent = parent};
        if (t->nodes[parent].last_child)
                t->nodes[t->nodes[parent].last_child].next_sibling = c;
        else
                t->nodes[parent].first_child = c;
        t->nodes[parent].last_child = c;
        t->child_index[k] = c;
        *ret = c;
        return 0;
}

static int tree_add(Tree *t, const char *line, uint64_t count)
{
        uint32_t cur = 0;
        bool first = true;
        int r;

        t->nodes[0].value += count;
        for (const char *p = line; *p;) {
                size_t n = strcspn(p, ";");
                uint32_t name, c;
                if ((r = intern(t, p, n, first, &name)) < 0)
                        return r;
                r = child(t, cur, name, false, &c);
                if (r == -E2BIG) {
                        /* out of nodes: the rest of this stack becomes one visible frame */
                        static const char more[] = "[more stacks: page node limit]";
                        t->merged += count;
                        if ((r = intern(t, more, sizeof(more) - 1, false, &name)) < 0 ||
                            (r = child(t, cur, name, true, &c)) < 0)
                                return r;
                        t->nodes[c].value += count;
                        return 0;
                }
                if (r < 0)
                        return r;
                t->nodes[c].value += count;
                cur = c;
                first = false;
                p += n;
                if (*p == ';')
                        p++;
        }
        return 0;
}

static void tree_done(Tree *t)
{
        for (size_t i = 0; i < t->n_names; i++)
                free(t->names[i]);
        free(t->names);
        free(t->kinds);
        free(t->name_index);
        free(t->child_index);
        free(t->nodes);
}

/* JSON string for a <script> block: also escapes '<' so that "</script>" in a name cannot end
 * the block. Valid UTF-8 passes through (the page is UTF-8); any other byte (a title carrying a
 * query's bytes) becomes the text \xNN, as in pprof and folded output. */
static void json_string(FILE *f, const char *s, size_t len)
{
        fputc('"', f);
        for (size_t i = 0; i < len;) {
                unsigned char c = (unsigned char)s[i];
                size_t n = utf8_char_len(s + i, len - i);
                if (c == '"' || c == '\\')
                        fprintf(f, "\\%c", c);
                else if (c == '<' || c == '>' || c == '&')
                        fprintf(f, "\\u%04x", c);
                else if (n == 0 && (c < 0x20 || c == 0x7f))
                        fprintf(f, "\\u%04x", c);
                else if (n == 0)
                        fprintf(f, "\\\\x%02x", c);
                else {
                        fwrite(s + i, 1, n, f);
                        i += n;
                        continue;
                }
                i++;
        }
        fputc('"', f);
}

static void json_cstring(FILE *f, const char *s)
{
        json_string(f, s, strlen(s));
}

/* Preorder: name, value, number of children; the root is node 0. */
static int write_nodes(FILE *f, const Tree *t)
{
        /* iterative preorder with an explicit stack: stacks can be 600+ frames deep */
        uint32_t *stack = malloc(t->n * sizeof(uint32_t));
        size_t sp = 0;
        bool comma = false;

        if (!stack)
                return -ENOMEM;
        stack[sp++] = 0;
        while (sp > 0) {
                uint32_t c = stack[--sp];
                const Node *n = &t->nodes[c];
                unsigned nch = 0;
                for (uint32_t ch = n->first_child; ch; ch = t->nodes[ch].next_sibling)
                        nch++;
                fprintf(f, "%s%" PRIu32 ",%" PRIu64 ",%u", comma ? "," : "", n->name, n->value, nch);
                comma = true;
                /* push children in reverse so the first child comes out next */
                size_t base = sp;
                for (uint32_t ch = n->first_child; ch; ch = t->nodes[ch].next_sibling)
                        stack[sp++] = ch;
                for (size_t a = base, b = sp - 1; a < b && b != (size_t)-1; a++, b--) {
                        uint32_t tmp = stack[a];
                        stack[a] = stack[b];
                        stack[b] = tmp;
                }
        }
        free(stack);
        return 0;
}

int flamegraph_render(const FoldedStack *stacks, size_t n, const FlamegraphInfo *info, char **ret_html,
                      size_t *ret_size)
{
        Tree t = {};
        char *json = NULL, *html = NULL;
        size_t json_size = 0, html_size = 0;
        FILE *f = NULL;
        uint32_t root_name;
        int r;

        if ((r = intern(&t, "all", 3, false, &root_name)) < 0)
                goto out;
        t.kinds[root_name] = KIND_ROOT;
        t.nodes = calloc(1024, sizeof(Node));
        if (!t.nodes) {
                r = -ENOMEM;
                goto out;
        }
        t.cap = 1024;
        t.n = 1;
        t.nodes[0] = (Node){.name = root_name};
        for (size_t i = 0; i < n; i++)
                if ((r = tree_add(&t, stacks[i].line, stacks[i].count)) < 0)
                        goto out;

        f = open_memstream(&json, &json_size);
        if (!f) {
                r = -errno;
                goto out;
        }
        fputs("{\"title\":", f);
        json_cstring(f, info && info->title ? info->title : "profd flame graph");
        fputs(",\"subtitle\":", f);
        json_cstring(f, info && info->subtitle ? info->subtitle : "");
        fprintf(f, ",\"total\":%" PRIu64 ",\"merged\":%" PRIu64 ",\"names\":[", t.nodes[0].value, t.merged);
        size_t sl = strlen(FOLDED_KERNEL_SUFFIX);
        for (size_t i = 0; i < t.n_names; i++) {
                size_t len = strlen(t.names[i]);
                if (t.kinds[i] == KIND_KERNEL)
                        len -= sl; /* the page shows kernel frames by color, not by suffix */
                if (i)
                        fputc(',', f);
                json_string(f, t.names[i], len);
        }
        fputs("],\"kinds\":[", f);
        for (size_t i = 0; i < t.n_names; i++)
                fprintf(f, "%s%u", i ? "," : "", t.kinds[i]);
        fputs("],\"nodes\":[", f);
        if ((r = write_nodes(f, &t)) < 0)
                goto out;
        fputs("]}", f);
        if (fclose(f) != 0) {
                f = NULL;
                r = -ENOMEM;
                goto out;
        }
        f = NULL;

        const char *mark = strstr(flamegraph_html, DATA_MARKER);
        if (!mark) {
                r = -EINVAL; /* the embedded page lost its marker: a build problem */
                goto out;
        }
        size_t head = (size_t)(mark - flamegraph_html), ml = strlen(DATA_MARKER);
        size_t tail = strlen(mark + ml);
        html_size = head + json_size + tail;
        html = malloc(html_size + 1);
        if (!html) {
                r = -ENOMEM;
                goto out;
        }
        memcpy(html, flamegraph_html, head);
        memcpy(html + head, json, json_size);
        memcpy(html + head + json_size, mark + ml, tail + 1);
        *ret_html = TAKE_PTR(html);
        *ret_size = html_size;
        r = 0;
out:
        if (f)
                fclose(f);
        free(json);
        free(html);
        tree_done(&t);
        return r;
}

struct FlamegraphJob {
        FoldedJob *folded;
        char *title, *subtitle;
        char *html;
        size_t size;
};

int flamegraph_job_new(ProfileWindow *w, Symbolizer *sym, ProcessTable *procs, const FlamegraphInfo *info,
                       FlamegraphJob **ret)
{
        _cleanup_(flamegraph_job_freep) FlamegraphJob *j = calloc(1, sizeof(*j));
        int r;

        if (!j) {
                profile_window_free(w);
                return -ENOMEM;
        }
        r = folded_job_new(w, sym, procs, &j->folded);
        if (r < 0)
                return r;
        if (info && info->title && !(j->title = strdup(info->title)))
                return -ENOMEM;
        if (info && info->subtitle && !(j->subtitle = strdup(info->subtitle)))
                return -ENOMEM;
        *ret = TAKE_PTR(j);
        return 0;
}

int flamegraph_job_step(FlamegraphJob *j)
{
        const FoldedStack *stacks;
        int r;

        if (j->html)
                return 1;
        r = folded_job_step(j->folded);
        if (r <= 0)
                return r;
        size_t n = folded_job_stacks(j->folded, &stacks);
        FlamegraphInfo info = {.title = j->title, .subtitle = j->subtitle};
        r = flamegraph_render(stacks, n, &info, &j->html, &j->size);
        if (r < 0)
                return r;
        j->folded = folded_job_free(j->folded);
        return 1;
}

int flamegraph_job_take_result(FlamegraphJob *j, void **ret_data, size_t *ret_size)
{
        if (!j->html)
                return -EBUSY;
        *ret_size = j->size;
        *ret_data = TAKE_PTR(j->html);
        return 0;
}

FlamegraphJob *flamegraph_job_free(FlamegraphJob *j)
{
        if (!j)
                return NULL;
        folded_job_free(j->folded);
        free(j->title);
        free(j->subtitle);
        free(j->html);
        free(j);
        return NULL;
}
