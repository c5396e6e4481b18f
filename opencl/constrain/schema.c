/* schema.c — a JSON Schema (draft 2020-12 subset) compiled to grammar nodes for matcher.c.
 *
 * Decisions (the 400 messages name the keyword and its JSON pointer):
 *  - type: one name or an array (an anyOf of one node per type); absent, it is inferred from the
 *    keywords present (properties → object, items → array, minLength → string), else any value.
 *  - properties come out in the schema's order; those not in required may be left out.
 *    additionalProperties: false, true or absent are all accepted, but an object with properties
 *    never gets undeclared keys (always valid: extra keys are never required); an object schema
 *    without properties and without additionalProperties:false takes any keys and values.
 *    A schema as additionalProperties is refused.
 *  - oneOf is treated as anyOf: the output matches at least one alternative (with overlapping
 *    alternatives it may match several, which oneOf forbids — keep alternatives disjoint).
 *  - enum/const values are emitted as json-c serializes them; a sibling type filters them.
 *  - items absent or true: any values; items false, or absent beside prefixItems: the array ends
 *    after its prefix (extra items would be allowed but are never needed).
 *  - $ref: any "#..." JSON pointer into this document ("#/$defs/x", "#/definitions/x", "#"),
 *    recursion included; only annotations may stand beside it.
 *  - minimum, maximum, pattern, format, allOf, not, patternProperties, uniqueItems, ...: refused.
 */
#include "grammar.h"

#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_PREFIX "response_format.json_schema.schema: "

enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_NUM = 16, T_STR = 32, T_INT = 64, T_ALL = 127 };

static const struct { const char *name; int mask; } type_names[] = {
    {"null", T_NULL}, {"boolean", T_BOOL}, {"object", T_OBJ}, {"array", T_ARR},
    {"number", T_NUM}, {"string", T_STR}, {"integer", T_INT},
};

/* keywords we read, and what they imply when type is absent */
static const struct { const char *name; int implies; } keywords[] = {
    {"type", 0}, {"enum", 0}, {"const", 0}, {"anyOf", 0}, {"oneOf", 0}, {"$ref", 0},
    {"$defs", 0}, {"definitions", 0},
    {"properties", T_OBJ}, {"required", T_OBJ}, {"additionalProperties", T_OBJ},
    {"items", T_ARR}, {"prefixItems", T_ARR}, {"minItems", T_ARR}, {"maxItems", T_ARR},
    {"minLength", T_STR}, {"maxLength", T_STR},
};
static const char *const annotations[] = {
    "title", "description", "$schema", "$id", "$comment", "default", "examples", "deprecated",
    "readOnly", "writeOnly",
};

typedef struct refmemo { char *ptr; uint32_t node; } refmemo;

typedef struct cc {
    grammar *g;
    json_object *doc;
    char *err; size_t errlen;
    int failed;
    uint32_t cap_nodes, cap_props, cap_alts, cap_lits, cap_bytes;
    refmemo *refs; uint32_t n_refs, cap_refs;
} cc;

static uint32_t fail(cc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static uint32_t fail(cc *c, const char *fmt, ...) {
    if (!c->failed && c->errlen) { /* the first error is the one the client needs */
        int n = snprintf(c->err, c->errlen, ERR_PREFIX);
        if (n > 0 && (size_t)n < c->errlen) {
            va_list ap; va_start(ap, fmt);
            vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    c->failed = 1;
    return G_NONE;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) return 0;
    uint32_t n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return -1;
    *p = q; *cap = n;
    return 0;
}

static uint32_t new_node(cc *c, enum g_kind kind) {
    grammar *g = c->g;
    if (g->n_nodes >= G_MAX_NODES) return fail(c, "schema has more than %d nodes", G_MAX_NODES);
    if (grow((void **)&g->nodes, &c->cap_nodes, g->n_nodes + 1, sizeof *g->nodes)) return fail(c, "out of memory");
    g_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind; n->max = G_NONE; n->items = G_NONE; n->target = G_NONE; n->min_depth = 255;
    return g->n_nodes++;
}

static uint32_t add_bytes(cc *c, const char *s, size_t len) {
    grammar *g = c->g;
    if (g->n_bytes + len > G_MAX_LIT_BYTES) return fail(c, "enum, const and key texts exceed %d bytes", G_MAX_LIT_BYTES);
    if (grow((void **)&g->bytes, &c->cap_bytes, g->n_bytes + (uint32_t)len + 1, 1)) return fail(c, "out of memory");
    memcpy(g->bytes + g->n_bytes, s, len);
    uint32_t off = g->n_bytes;
    g->n_bytes += (uint32_t)len;
    return off;
}

static uint32_t add_alts(cc *c, const uint32_t *a, uint32_t n) {
    grammar *g = c->g;
    if (grow((void **)&g->alts, &c->cap_alts, g->n_alts + n + 1, sizeof *g->alts)) return fail(c, "out of memory");
    memcpy(g->alts + g->n_alts, a, n * sizeof *a);
    g->n_alts += n;
    return g->n_alts - n;
}

/* ---------------------------------------------------------------- pointers and values */

static void ptr_child(char *out, size_t cap, const char *ptr, const char *name) {
    size_t n = (size_t)snprintf(out, cap, "%s/", ptr);
    for (const char *p = name; *p && n + 3 < cap; p++) { /* RFC 6901: ~ as ~0, / as ~1 */
        if (*p == '~') { out[n++] = '~'; out[n++] = '0'; }
        else if (*p == '/') { out[n++] = '~'; out[n++] = '1'; }
        else out[n++] = *p;
    }
    if (n < cap) out[n] = 0; else out[cap - 1] = 0;
}

static const char *at(const char *ptr) { return *ptr ? ptr : "/"; }

static int value_types(json_object *v) {
    switch (json_object_get_type(v)) {
    case json_type_null: return T_NULL;
    case json_type_boolean: return T_BOOL;
    case json_type_object: return T_OBJ;
    case json_type_array: return T_ARR;
    case json_type_int: return T_NUM | T_INT;
    case json_type_double: {
        double d = json_object_get_double(v);
        return T_NUM | (d == floor(d) && fabs(d) < 1e15 ? T_INT : 0);
    }
    case json_type_string: return T_STR;
    }
    return 0;
}

static int finite_value(json_object *v) {
    enum json_type t = json_object_get_type(v);
    if (t == json_type_double) return isfinite(json_object_get_double(v));
    if (t == json_type_array) {
        for (size_t i = 0; i < json_object_array_length(v); i++)
            if (!finite_value(json_object_array_get_idx(v, i))) return 0;
    }
    if (t == json_type_object) {
        json_object_object_foreach(v, k, x) { (void)k; if (!finite_value(x)) return 0; }
    }
    return 1;
}

static int get_count(cc *c, json_object *s, const char *kw, const char *ptr, uint32_t *out, uint32_t limit) {
    json_object *v;
    if (!json_object_object_get_ex(s, kw, &v)) return 0;
    if (json_object_get_type(v) == json_type_double && value_types(v) & T_INT) {
        /* 3.0 is an integer in JSON Schema */
    } else if (json_object_get_type(v) != json_type_int) {
        fail(c, "keyword '%s' at %s must be a non-negative integer", kw, at(ptr));
        return -1;
    }
    double d = json_object_get_double(v);
    if (d < 0) { fail(c, "keyword '%s' at %s must be a non-negative integer", kw, at(ptr)); return -1; }
    if (d > limit) {
        if (limit != G_NONE - 1) { fail(c, "keyword '%s' at %s exceeds the limit %u", kw, at(ptr), limit); return -1; }
        d = limit;
    }
    *out = (uint32_t)d;
    return 0;
}

/* ---------------------------------------------------------------- nodes */

static uint32_t compile(cc *c, json_object *s, const char *ptr, int depth);

static int lit_cmp(const void *a, const void *b, void *bytes) {
    const g_lit *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int r = memcmp((char *)bytes + x->off, (char *)bytes + y->off, n);
    return r ? r : (x->len > y->len) - (x->len < y->len);
}

/* enum/const: the values of the allowed types, serialized, sorted, deduplicated */
static uint32_t compile_lit(cc *c, json_object *vals, int n, int types, const char *kw, const char *ptr) {
    if (n > G_MAX_ENUM) return fail(c, "keyword '%s' at %s has more than %d values", kw, at(ptr), G_MAX_ENUM);
    grammar *g = c->g;
    uint32_t first = g->n_lits;
    for (int i = 0; i < n; i++) {
        json_object *v = json_object_is_type(vals, json_type_array) ? json_object_array_get_idx(vals, (size_t)i) : vals;
        if (!finite_value(v)) return fail(c, "keyword '%s' at %s holds a number that is not finite", kw, at(ptr));
        if (!(value_types(v) & types)) continue;
        const char *txt = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!txt) return fail(c, "out of memory");
        uint32_t off = add_bytes(c, txt, strlen(txt));
        if (off == G_NONE) return G_NONE;
        if (grow((void **)&g->lits, &c->cap_lits, g->n_lits + 1, sizeof *g->lits)) return fail(c, "out of memory");
        g->lits[g->n_lits++] = (g_lit){off, (uint32_t)strlen(txt)};
    }
    uint32_t cnt = g->n_lits - first;
    if (!cnt) return fail(c, "keyword '%s' at %s leaves no value%s", kw, at(ptr), n ? " of the given type" : "");
    /* insertion sort: enums are small and qsort_r's signature is not portable */
    g_lit *L = g->lits + first;
    for (uint32_t i = 1; i < cnt; i++)
        for (uint32_t j = i; j > 0 && lit_cmp(&L[j - 1], &L[j], g->bytes) > 0; j--) {
            g_lit t = L[j]; L[j] = L[j - 1]; L[j - 1] = t;
        }
    uint32_t k = 0;
    for (uint32_t i = 0; i < cnt; i++)
        if (!k || lit_cmp(&L[k - 1], &L[i], g->bytes)) L[k++] = L[i];
    g->n_lits = first + k;
    uint32_t id = new_node(c, G_LIT);
    if (id == G_NONE) return id;
    g->nodes[id].first = first; g->nodes[id].count = k;
    return id;
}

static uint32_t compile_object(cc *c, json_object *s, const char *ptr, int depth) {
    json_object *props = NULL, *req = NULL, *addl = NULL;
    json_object_object_get_ex(s, "properties", &props);
    json_object_object_get_ex(s, "required", &req);
    json_object_object_get_ex(s, "additionalProperties", &addl);
    char sub[1024];
    if (props && !json_object_is_type(props, json_type_object))
        return fail(c, "keyword 'properties' at %s must be an object", at(ptr));
    if (req && !json_object_is_type(req, json_type_array))
        return fail(c, "keyword 'required' at %s must be an array", at(ptr));
    if (addl && !json_object_is_type(addl, json_type_boolean) &&
        !(json_object_is_type(addl, json_type_object) && json_object_object_length(addl) == 0)) {
        ptr_child(sub, sizeof sub, ptr, "additionalProperties");
        return fail(c, "keyword 'additionalProperties' at %s: only true or false is supported", at(ptr));
    }
    int n = props ? json_object_object_length(props) : 0;
    int closed = addl && json_object_is_type(addl, json_type_boolean) && !json_object_get_boolean(addl);
    size_t nreq = req ? json_object_array_length(req) : 0;
    for (size_t i = 0; i < nreq; i++) {
        json_object *r = json_object_array_get_idx(req, i);
        if (!json_object_is_type(r, json_type_string))
            return fail(c, "keyword 'required' at %s must list strings", at(ptr));
        if (!props || !json_object_object_get_ex(props, json_object_get_string(r), NULL))
            return fail(c, "required property '%s' at %s is not in properties", json_object_get_string(r), at(ptr));
    }
    if (n == 0 && !closed) return G_N_FOBJ;
    if (n > G_MAX_PROPS) return fail(c, "object at %s has more than %d properties", at(ptr), G_MAX_PROPS);
    g_prop tmp[G_MAX_PROPS];
    int i = 0;
    char pp[1024];
    ptr_child(pp, sizeof pp, ptr, "properties");
    json_object_object_foreach(props ? props : s, key, val) {
        if (!props) break;
        ptr_child(sub, sizeof sub, pp, key);
        json_object *ks = json_object_new_string(key);
        const char *kt = ks ? json_object_to_json_string_ext(ks, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
        uint32_t off = kt ? add_bytes(c, kt + 1, strlen(kt) - 2) : fail(c, "out of memory");
        tmp[i].key_len = kt ? (uint32_t)strlen(kt) - 2 : 0;
        json_object_put(ks);
        if (off == G_NONE) return G_NONE;
        tmp[i].key = off;
        tmp[i].node = compile(c, val, sub, depth + 1);
        if (tmp[i].node == G_NONE) return G_NONE;
        int r = 0;
        for (size_t j = 0; j < nreq; j++)
            if (!strcmp(json_object_get_string(json_object_array_get_idx(req, j)), key)) r = 1;
        tmp[i].next_req = r ? (uint32_t)i : G_NONE; /* fixed up below */
        i++;
    }
    uint32_t next = (uint32_t)n;
    for (int k = n - 1; k >= 0; k--) {
        if (tmp[k].next_req != G_NONE) next = (uint32_t)k;
        tmp[k].next_req = next;
        uint32_t last = next < (uint32_t)n ? next : (uint32_t)n - 1;
        if (last - (uint32_t)k + 1 > G_MAX_WINDOW)
            return fail(c, "object at %s has more than %d optional properties in a row", at(ptr), G_MAX_WINDOW);
    }
    grammar *g = c->g;
    if (grow((void **)&g->props, &c->cap_props, g->n_props + (uint32_t)n + 1, sizeof *g->props)) return fail(c, "out of memory");
    memcpy(g->props + g->n_props, tmp, (size_t)n * sizeof *tmp);
    uint32_t id = new_node(c, G_OBJ);
    if (id == G_NONE) return id;
    g->nodes[id].first = g->n_props; g->nodes[id].count = (uint32_t)n;
    g->n_props += (uint32_t)n;
    return id;
}

static uint32_t compile_array(cc *c, json_object *s, const char *ptr, int depth) {
    json_object *items = NULL, *prefix = NULL;
    json_object_object_get_ex(s, "items", &items);
    json_object_object_get_ex(s, "prefixItems", &prefix);
    uint32_t mn = 0, mx = G_NONE - 1;
    if (get_count(c, s, "minItems", ptr, &mn, G_MAX_MIN) || get_count(c, s, "maxItems", ptr, &mx, G_NONE - 1)) return G_NONE;
    if (mn > mx) return fail(c, "keyword 'minItems' at %s exceeds maxItems", at(ptr));
    if (prefix && !json_object_is_type(prefix, json_type_array))
        return fail(c, "keyword 'prefixItems' at %s must be an array", at(ptr));
    size_t np = prefix ? json_object_array_length(prefix) : 0;
    if (np > G_MAX_PROPS) return fail(c, "keyword 'prefixItems' at %s has more than %d schemas", at(ptr), G_MAX_PROPS);
    uint32_t tmp[G_MAX_PROPS];
    char pp[1024], sub[1100];
    ptr_child(pp, sizeof pp, ptr, "prefixItems");
    for (size_t i = 0; i < np; i++) {
        snprintf(sub, sizeof sub, "%s/%zu", pp, i);
        if ((tmp[i] = compile(c, json_object_array_get_idx(prefix, i), sub, depth + 1)) == G_NONE) return G_NONE;
    }
    uint32_t it = G_N_ANY;
    if (items && json_object_is_type(items, json_type_boolean))
        it = json_object_get_boolean(items) ? G_N_ANY : G_NONE;
    else if (items) {
        ptr_child(sub, sizeof sub, ptr, "items");
        if ((it = compile(c, items, sub, depth + 1)) == G_NONE) return G_NONE;
    } else if (np) {
        it = G_NONE; /* a tuple ends after its prefix: extra items are allowed but never needed */
    }
    if (it == G_NONE && mx > np) mx = (uint32_t)np;
    if (mn > mx) return fail(c, "keyword 'minItems' at %s asks for more items than the schema allows", at(ptr));
    uint32_t first = add_alts(c, tmp, (uint32_t)np);
    if (first == G_NONE) return G_NONE;
    uint32_t id = new_node(c, G_ARR);
    if (id == G_NONE) return id;
    g_node *nd = &c->g->nodes[id];
    nd->first = first; nd->count = (uint32_t)np; nd->items = it;
    nd->min = mn; nd->max = mx == G_NONE - 1 ? G_NONE : mx;
    return id;
}

static uint32_t compile_type(cc *c, int t, json_object *s, const char *ptr, int depth) {
    switch (t) {
    case T_NULL: case T_BOOL: {
        json_object *v = json_tokener_parse(t == T_NULL ? "[null]" : "[false,true]");
        uint32_t id = v ? compile_lit(c, v, (int)json_object_array_length(v), T_ALL, "type", ptr) : fail(c, "out of memory");
        json_object_put(v);
        return id;
    }
    case T_NUM: return new_node(c, G_NUM);
    case T_INT: return new_node(c, G_INT);
    case T_OBJ: return compile_object(c, s, ptr, depth);
    case T_ARR: return compile_array(c, s, ptr, depth);
    case T_STR: {
        uint32_t mn = 0, mx = G_NONE - 1;
        if (get_count(c, s, "minLength", ptr, &mn, G_MAX_MIN) || get_count(c, s, "maxLength", ptr, &mx, G_NONE - 1)) return G_NONE;
        if (mn > mx) return fail(c, "keyword 'minLength' at %s exceeds maxLength", at(ptr));
        uint32_t id = new_node(c, G_STR);
        if (id != G_NONE) { c->g->nodes[id].min = mn; c->g->nodes[id].max = mx == G_NONE - 1 ? G_NONE : mx; }
        return id;
    }
    }
    return fail(c, "internal: type %d", t);
}

static json_object *resolve_pointer(json_object *doc, const char *ref) {
    if (ref[0] != '#') return NULL;
    const char *p = ref + 1;
    json_object *cur = doc;
    char tok[512];
    while (*p) {
        if (*p != '/') return NULL;
        p++;
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            if (p[0] == '~' && p[1] == '0') { tok[n++] = '~'; p += 2; }
            else if (p[0] == '~' && p[1] == '1') { tok[n++] = '/'; p += 2; }
            else tok[n++] = *p++;
        }
        tok[n] = 0;
        if (json_object_is_type(cur, json_type_object)) {
            if (!json_object_object_get_ex(cur, tok, &cur)) return NULL;
        } else if (json_object_is_type(cur, json_type_array)) {
            char *end;
            long i = strtol(tok, &end, 10);
            if (!n || *end || i < 0 || (size_t)i >= json_object_array_length(cur)) return NULL;
            cur = json_object_array_get_idx(cur, (size_t)i);
        } else return NULL;
    }
    return cur;
}

static uint32_t compile_ref(cc *c, const char *ref, const char *ptr, int depth) {
    for (uint32_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ptr, ref)) return c->refs[i].node;
    json_object *t = resolve_pointer(c->doc, ref);
    if (!t) return fail(c, "keyword '$ref' at %s: '%s' is not supported (use \"#/$defs/...\" in this schema)", at(ptr), ref);
    uint32_t id = new_node(c, G_REF);
    if (id == G_NONE) return id;
    if (grow((void **)&c->refs, &c->cap_refs, c->n_refs + 1, sizeof *c->refs)) return fail(c, "out of memory");
    if (!(c->refs[c->n_refs].ptr = strdup(ref))) return fail(c, "out of memory");
    c->refs[c->n_refs++].node = id;
    uint32_t tg = compile(c, t, ref + 1, depth + 1);
    if (tg == G_NONE) return G_NONE;
    c->g->nodes[id].target = tg;
    return id;
}

static uint32_t compile(cc *c, json_object *s, const char *ptr, int depth) {
    if (c->failed) return G_NONE;
    if (depth > G_MAX_SCHEMA_DEPTH) return fail(c, "schema nesting deeper than %d at %s", G_MAX_SCHEMA_DEPTH, at(ptr));
    if (json_object_is_type(s, json_type_boolean)) {
        if (json_object_get_boolean(s)) return G_N_ANY;
        return fail(c, "schema false at %s admits no value", at(ptr));
    }
    if (!json_object_is_type(s, json_type_object)) return fail(c, "schema at %s must be an object", at(ptr));
    int implied = 0, n_kw = 0;
    json_object_object_foreach(s, key, val) {
        (void)val;
        size_t k, a;
        for (k = 0; k < sizeof keywords / sizeof *keywords && strcmp(keywords[k].name, key); k++) {}
        for (a = 0; a < sizeof annotations / sizeof *annotations && strcmp(annotations[a], key); a++) {}
        if (k < sizeof keywords / sizeof *keywords) {
            implied |= keywords[k].implies;
            if (strcmp(key, "$defs") && strcmp(key, "definitions")) n_kw++;
        } else if (a == sizeof annotations / sizeof *annotations) {
            return fail(c, "keyword '%s' at %s is not supported", key, at(ptr));
        }
    }
    json_object *v;
    if (json_object_object_get_ex(s, "$ref", &v)) {
        if (n_kw > 1) return fail(c, "keyword '$ref' at %s: only annotations may stand beside it", at(ptr));
        if (!json_object_is_type(v, json_type_string)) return fail(c, "keyword '$ref' at %s must be a string", at(ptr));
        return compile_ref(c, json_object_get_string(v), ptr, depth);
    }
    const char *alt_kw = json_object_object_get_ex(s, "anyOf", &v) ? "anyOf" :
                         json_object_object_get_ex(s, "oneOf", &v) ? "oneOf" : NULL;
    if (alt_kw) {
        if (n_kw > 1) return fail(c, "keyword '%s' at %s: only annotations may stand beside it", alt_kw, at(ptr));
        if (!json_object_is_type(v, json_type_array) || !json_object_array_length(v))
            return fail(c, "keyword '%s' at %s must be a non-empty array", alt_kw, at(ptr));
        size_t n = json_object_array_length(v);
        if (n > G_MAX_PROPS) return fail(c, "keyword '%s' at %s has more than %d schemas", alt_kw, at(ptr), G_MAX_PROPS);
        uint32_t tmp[G_MAX_PROPS];
        char pp[1024], sub[1100];
        ptr_child(pp, sizeof pp, ptr, alt_kw);
        for (size_t i = 0; i < n; i++) {
            snprintf(sub, sizeof sub, "%s/%zu", pp, i);
            if ((tmp[i] = compile(c, json_object_array_get_idx(v, i), sub, depth + 1)) == G_NONE) return G_NONE;
        }
        uint32_t first = add_alts(c, tmp, (uint32_t)n), id = first == G_NONE ? G_NONE : new_node(c, G_ANYOF);
        if (id != G_NONE) { c->g->nodes[id].first = first; c->g->nodes[id].count = (uint32_t)n; }
        return id;
    }
    int types = 0;
    if (json_object_object_get_ex(s, "type", &v)) {
        int arr = json_object_is_type(v, json_type_array);
        size_t n = arr ? json_object_array_length(v) : 1;
        for (size_t i = 0; i < n; i++) {
            json_object *t = arr ? json_object_array_get_idx(v, i) : v;
            const char *name = json_object_is_type(t, json_type_string) ? json_object_get_string(t) : "";
            size_t k;
            for (k = 0; k < sizeof type_names / sizeof *type_names && strcmp(type_names[k].name, name); k++) {}
            if (k == sizeof type_names / sizeof *type_names)
                return fail(c, "keyword 'type' at %s: '%s' is not a JSON Schema type", at(ptr), name);
            types |= type_names[k].mask;
        }
        if (!types) return fail(c, "keyword 'type' at %s lists no type", at(ptr));
    }
    const char *lit_kw = json_object_object_get_ex(s, "enum", &v) ? "enum" :
                         json_object_object_get_ex(s, "const", &v) ? "const" : NULL;
    if (lit_kw) {
        if (n_kw > 1 + (types != 0)) return fail(c, "keyword '%s' at %s: only type and annotations may stand beside it", lit_kw, at(ptr));
        int n = 1;
        if (!strcmp(lit_kw, "enum")) {
            if (!json_object_is_type(v, json_type_array)) return fail(c, "keyword 'enum' at %s must be an array", at(ptr));
            n = (int)json_object_array_length(v);
        } else {
            json_object *one = json_object_new_array(); /* const is a one-value enum */
            if (!one) return fail(c, "out of memory");
            json_object_array_add(one, json_object_get(v));
            uint32_t id = compile_lit(c, one, 1, types ? types : T_ALL, lit_kw, ptr);
            json_object_put(one);
            return id;
        }
        return compile_lit(c, v, n, types ? types : T_ALL, lit_kw, ptr);
    }
    if (!types) types = implied;
    if (!types) return G_N_ANY;
    if (types & T_INT && types & T_NUM) types &= ~T_INT; /* integers are numbers */
    uint32_t tmp[8], n = 0;
    for (size_t k = 0; k < sizeof type_names / sizeof *type_names; k++)
        if (types & type_names[k].mask)
            if ((tmp[n++] = compile_type(c, type_names[k].mask, s, ptr, depth)) == G_NONE) return G_NONE;
    if (n == 1) return tmp[0];
    uint32_t first = add_alts(c, tmp, n), id = first == G_NONE ? G_NONE : new_node(c, G_ANYOF);
    if (id != G_NONE) { c->g->nodes[id].first = first; c->g->nodes[id].count = n; }
    return id;
}

/* ---------------------------------------------------------------- finishing */

/* anyOf and $ref nodes become flat lists of concrete nodes, so the matcher expands one level */
static void flatten_visit(const grammar *g, uint32_t n, uint8_t *seen, uint32_t *out, uint32_t *k) {
    if (seen[n]) return;
    seen[n] = 1;
    const g_node *d = &g->nodes[n];
    if (d->kind == G_REF) flatten_visit(g, d->target, seen, out, k);
    else if (d->kind == G_ANYOF)
        for (uint32_t i = 0; i < d->count; i++) flatten_visit(g, g->alts[d->first + i], seen, out, k);
    else out[(*k)++] = n;
}

static int finish(cc *c) {
    grammar *g = c->g;
    uint32_t n = g->n_nodes;
    uint8_t *seen = malloc(n);
    uint32_t *out = malloc(n * sizeof *out);
    if (!seen || !out) { free(seen); free(out); fail(c, "out of memory"); return -1; }
    for (uint32_t i = 0; i < n; i++) {
        if (g->nodes[i].kind != G_REF && g->nodes[i].kind != G_ANYOF) continue;
        memset(seen, 0, n);
        uint32_t k = 0;
        flatten_visit(g, i, seen, out, &k);
        uint32_t first = add_alts(c, out, k);
        if (first == G_NONE) break;
        g->nodes[i].kind = G_ANYOF; g->nodes[i].first = first; g->nodes[i].count = k;
    }
    free(seen); free(out);
    if (c->failed) return -1;
    /* min_depth: frames a finite value needs, from above to the fixpoint */
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t i = 0; i < n; i++) {
            g_node *d = &g->nodes[i];
            uint32_t m = 1;
            if (d->kind == G_ANYOF) {
                m = 255;
                for (uint32_t j = 0; j < d->count; j++)
                    if (g->nodes[g->alts[d->first + j]].min_depth < m) m = g->nodes[g->alts[d->first + j]].min_depth;
            } else if (d->kind == G_OBJ) {
                for (uint32_t j = 0; j < d->count; j++) {
                    const g_prop *p = &g->props[d->first + j];
                    if (p->next_req == j && 1u + g->nodes[p->node].min_depth > m) m = 1u + g->nodes[p->node].min_depth;
                }
            } else if (d->kind == G_ARR) {
                for (uint32_t j = 0; j < d->min && j <= d->count; j++) {
                    uint32_t it = j < d->count ? g->alts[d->first + j] : d->items;
                    if (it != G_NONE && 1u + g->nodes[it].min_depth > m) m = 1u + g->nodes[it].min_depth;
                }
            }
            if (m > 255) m = 255;
            if (m < d->min_depth) { d->min_depth = (uint8_t)m; changed = 1; }
        }
    }
    if (g->nodes[g->root].min_depth + 1 > G_MAX_STACK) {
        fail(c, "schema admits no value of finite size within %d levels of nesting", G_MAX_STACK - 1);
        return -1;
    }
    return 0;
}

static int builtins(cc *c) {
    static const char *const tfn = "[false,null,true]";
    uint32_t any = new_node(c, G_ANYOF), str = new_node(c, G_STR), num = new_node(c, G_NUM);
    json_object *v = json_tokener_parse(tfn);
    uint32_t lit = v ? compile_lit(c, v, 3, T_ALL, "type", "") : fail(c, "out of memory");
    json_object_put(v);
    uint32_t fobj = new_node(c, G_FOBJ), arr = new_node(c, G_ARR);
    if (c->failed || any != G_N_ANY || str != G_N_STR || num != G_N_NUM || lit != G_N_TFN ||
        fobj != G_N_FOBJ || arr != G_N_ARR) return -1;
    uint32_t alts[5] = {G_N_FOBJ, G_N_ARR, G_N_STR, G_N_NUM, G_N_TFN};
    uint32_t first = add_alts(c, alts, 5);
    if (first == G_NONE) return -1;
    c->g->nodes[G_N_ANY].first = first; c->g->nodes[G_N_ANY].count = 5;
    c->g->nodes[G_N_ARR].items = G_N_ANY;
    return 0;
}

int grammar_compile(grammar *g, const char *schema, size_t len, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    cc c = {.g = g, .err = err, .errlen = errlen};
    if (errlen) err[0] = 0;
    int rc = -1;
    if (builtins(&c) == 0) {
        if (!schema) {
            g->root = G_N_FOBJ;
        } else {
            json_tokener *tk = json_tokener_new_ex(G_MAX_SCHEMA_DEPTH * 3 + 8);
            if (!tk) { fail(&c, "out of memory"); goto out; }
            c.doc = len <= INT32_MAX ? json_tokener_parse_ex(tk, schema, (int)len) : NULL;
            enum json_tokener_error je = json_tokener_get_error(tk);
            size_t used = json_tokener_get_parse_end(tk);
            json_tokener_free(tk);
            while (used < len && strchr(" \t\r\n", schema[used])) used++; /* trailing whitespace */
            if (!c.doc || je != json_tokener_success || used != len) {
                fail(&c, "not valid JSON%s", je == json_tokener_error_depth ? " (nested too deep)" : "");
                goto out;
            }
            g->root = compile(&c, c.doc, "", 0);
        }
        if (!c.failed) rc = finish(&c);
    }
out:
    if (c.doc) json_object_put(c.doc);
    for (uint32_t i = 0; i < c.n_refs; i++) free(c.refs[i].ptr);
    free(c.refs);
    if (rc) {
        if (!c.failed) fail(&c, "internal error");
        grammar_free(g);
    }
    return rc;
}

void grammar_free(grammar *g) {
    free(g->nodes); free(g->props); free(g->alts); free(g->lits); free(g->bytes);
    memset(g, 0, sizeof *g);
}
