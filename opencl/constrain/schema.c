/* schema.c — a JSON Schema (draft 2020-12 subset) compiled to grammar nodes for matcher.c, in the
 * grammar's dialect (JSON, or Gemma 4's call syntax for tool arguments).
 *
 * Decisions (the 400 messages name the keyword and its JSON pointer):
 *  - type: one name or an array (an anyOf of one node per type); absent, it is inferred from the
 *    keywords present (properties → object, items → array, minLength → string), else any value.
 *  - properties come out in the schema's order (Gemma: dictsort order, bare keys, none empty or
 *    holding ':'); those not in required may be left out.
 *    additionalProperties: false, true or absent are all accepted, but an object with properties
 *    never gets undeclared keys (always valid: extra keys are never required); an object schema
 *    without properties and without additionalProperties:false takes any keys and values.
 *    A schema as additionalProperties is refused.
 *  - oneOf is treated as anyOf: the output matches at least one alternative (with overlapping
 *    alternatives it may match several, which oneOf forbids — keep alternatives disjoint).
 *  - enum/const values are emitted as json-c serializes them (Gemma: as the chat template's
 *    format_argument writes them); a sibling type filters them.
 *  - items absent or true: any values; items false, or absent beside prefixItems: the array ends
 *    after its prefix (extra items would be allowed but are never needed).
 *  - $ref: any "#..." JSON pointer into this document ("#/$defs/x", "#/definitions/x", "#"),
 *    recursion included; only annotations may stand beside it.
 *  - minimum, maximum, pattern, format, allOf, not, patternProperties, uniqueItems, ...: refused.
 */
#include "grammar.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    g_build *b;
    json_object *doc;
    refmemo *refs; uint32_t n_refs, cap_refs;
} cc;

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
        gb_fail(c->b, "keyword '%s' at %s must be a non-negative integer", kw, at(ptr));
        return -1;
    }
    double d = json_object_get_double(v);
    if (d < 0) { gb_fail(c->b, "keyword '%s' at %s must be a non-negative integer", kw, at(ptr)); return -1; }
    if (d > limit) {
        if (limit != G_NONE - 1) { gb_fail(c->b, "keyword '%s' at %s exceeds the limit %u", kw, at(ptr), limit); return -1; }
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

static int put(cc *c, const char *s, size_t n) { return gb_bytes(c->b, s, n) == G_NONE ? -1 : 0; }

/* v as JSON text (json-c's serialization) */
static int put_text(cc *c, json_object *v) {
    const char *txt = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!txt) { gb_fail(c->b, "out of memory"); return -1; }
    return put(c, txt, strlen(txt));
}

/* a key Gemma's syntax can write bare: a parser reads it up to ':' */
static int bare_key_ok(const char *k, size_t n) { return n && k[0] != '}' && !memchr(k, ':', n); }

typedef struct key_ent { const char *k; size_t n; int idx; } key_ent;

static int by_key(const void *a, const void *b) {
    const key_ent *x = a, *y = b;
    int r = key_order(x->k, x->n, y->k, y->n);
    return r ? r : x->idx - y->idx;
}

/* v in Gemma's call syntax as the chat template's format_argument writes it: <|"|>raw<|"|> strings,
 * bare keys in dictsort order, no whitespace; numbers, booleans and null as JSON */
static int gemma_text(cc *c, json_object *v, const char *kw, const char *ptr) {
    static const char q = (char)G_BYTE_QUOTE;
    switch (json_object_get_type(v)) {
    case json_type_string: {
        const char *s = json_object_get_string(v);
        size_t n = (size_t)json_object_get_string_len(v);
        if (memmem(s, n, G_QUOTE_TEXT, strlen(G_QUOTE_TEXT)) || memchr(s, 0, n)) {
            gb_fail(c->b, "keyword '%s' at %s holds a string with %s or NUL, which Gemma's call syntax cannot write", kw, at(ptr), G_QUOTE_TEXT);
            return -1;
        }
        return put(c, &q, 1) || put(c, s, n) || put(c, &q, 1);
    }
    case json_type_array: {
        if (put(c, "[", 1)) return -1;
        for (size_t i = 0; i < json_object_array_length(v); i++)
            if ((i && put(c, ",", 1)) || gemma_text(c, json_object_array_get_idx(v, i), kw, ptr)) return -1;
        return put(c, "]", 1);
    }
    case json_type_object: {
        int n = json_object_object_length(v), i = 0, rc = put(c, "{", 1);
        key_ent *e = malloc((size_t)(n ? n : 1) * sizeof *e);
        if (!e) { gb_fail(c->b, "out of memory"); return -1; }
        json_object_object_foreach(v, k, x) { (void)x; e[i] = (key_ent){k, strlen(k), i}; i++; }
        qsort(e, (size_t)n, sizeof *e, by_key);
        for (i = 0; i < n && !rc; i++) {
            if (!bare_key_ok(e[i].k, e[i].n)) {
                gb_fail(c->b, "keyword '%s' at %s holds the key '%s', which Gemma's call syntax cannot write bare", kw, at(ptr), e[i].k);
                rc = -1;
                break;
            }
            rc = (i && put(c, ",", 1)) || put(c, e[i].k, e[i].n) || put(c, ":", 1) ||
                 gemma_text(c, json_object_object_get(v, e[i].k), kw, ptr);
        }
        free(e);
        return rc || put(c, "}", 1);
    }
    default:
        return put_text(c, v);
    }
}

/* enum/const: the values of the allowed types, serialized, sorted, deduplicated */
static uint32_t compile_lit(cc *c, json_object *vals, int n, int types, const char *kw, const char *ptr) {
    if (n > G_MAX_ENUM) return gb_fail(c->b, "keyword '%s' at %s has more than %d values", kw, at(ptr), G_MAX_ENUM);
    grammar *g = c->b->g;
    uint32_t first = g->n_lits;
    for (int i = 0; i < n; i++) {
        json_object *v = json_object_is_type(vals, json_type_array) ? json_object_array_get_idx(vals, (size_t)i) : vals;
        if (!finite_value(v)) return gb_fail(c->b, "keyword '%s' at %s holds a number that is not finite", kw, at(ptr));
        if (!(value_types(v) & types)) continue;
        uint32_t off = g->n_bytes;
        if (g->gemma ? gemma_text(c, v, kw, ptr) : put_text(c, v)) return G_NONE;
        if (gb_lit(c->b, off, g->n_bytes - off) == G_NONE) return G_NONE;
    }
    uint32_t cnt = g->n_lits - first;
    if (!cnt) return gb_fail(c->b, "keyword '%s' at %s leaves no value%s", kw, at(ptr), n ? " of the given type" : "");
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
    uint32_t id = gb_node(c->b, G_LIT);
    if (id == G_NONE) return id;
    g->nodes[id].first = first; g->nodes[id].count = k;
    return id;
}

/* a declared key as the dialect writes it (JSON: escaped, without quotes; Gemma: bare), in the bytes */
static uint32_t key_text(cc *c, const char *key, const char *ptr, uint32_t *len) {
    if (c->b->g->gemma) {
        if (!bare_key_ok(key, strlen(key)))
            return gb_fail(c->b, "property name '%s' at %s cannot be written bare in Gemma's call syntax (empty, or holding ':')", key, at(ptr));
        *len = (uint32_t)strlen(key);
        return gb_bytes(c->b, key, *len);
    }
    json_object *ks = json_object_new_string(key);
    const char *kt = ks ? json_object_to_json_string_ext(ks, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
    uint32_t off = kt ? gb_bytes(c->b, kt + 1, strlen(kt) - 2) : gb_fail(c->b, "out of memory");
    *len = kt ? (uint32_t)strlen(kt) - 2 : 0;
    json_object_put(ks);
    return off;
}

/* Gemma's order of declared properties: the template writes arguments with dictsort (stable) */
static void dictsort(const grammar *g, g_prop *p, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && key_order(g->bytes + p[j - 1].key, p[j - 1].key_len, g->bytes + p[j].key, p[j].key_len) > 0; j--) {
            g_prop t = p[j]; p[j] = p[j - 1]; p[j - 1] = t;
        }
}

static uint32_t compile_object(cc *c, json_object *s, const char *ptr, int depth) {
    json_object *props = NULL, *req = NULL, *addl = NULL;
    json_object_object_get_ex(s, "properties", &props);
    json_object_object_get_ex(s, "required", &req);
    json_object_object_get_ex(s, "additionalProperties", &addl);
    char sub[1024];
    if (props && !json_object_is_type(props, json_type_object))
        return gb_fail(c->b, "keyword 'properties' at %s must be an object", at(ptr));
    if (req && !json_object_is_type(req, json_type_array))
        return gb_fail(c->b, "keyword 'required' at %s must be an array", at(ptr));
    if (addl && !json_object_is_type(addl, json_type_boolean) &&
        !(json_object_is_type(addl, json_type_object) && json_object_object_length(addl) == 0)) {
        ptr_child(sub, sizeof sub, ptr, "additionalProperties");
        return gb_fail(c->b, "keyword 'additionalProperties' at %s: only true or false is supported", at(ptr));
    }
    int n = props ? json_object_object_length(props) : 0;
    int closed = addl && json_object_is_type(addl, json_type_boolean) && !json_object_get_boolean(addl);
    size_t nreq = req ? json_object_array_length(req) : 0;
    for (size_t i = 0; i < nreq; i++) {
        json_object *r = json_object_array_get_idx(req, i);
        if (!json_object_is_type(r, json_type_string))
            return gb_fail(c->b, "keyword 'required' at %s must list strings", at(ptr));
        if (!props || !json_object_object_get_ex(props, json_object_get_string(r), NULL))
            return gb_fail(c->b, "required property '%s' at %s is not in properties", json_object_get_string(r), at(ptr));
    }
    if (n == 0 && !closed) return G_N_FOBJ;
    if (n > G_MAX_PROPS) return gb_fail(c->b, "object at %s has more than %d properties", at(ptr), G_MAX_PROPS);
    g_prop tmp[G_MAX_PROPS];
    int i = 0;
    char pp[1024];
    ptr_child(pp, sizeof pp, ptr, "properties");
    json_object_object_foreach(props ? props : s, key, val) {
        if (!props) break;
        ptr_child(sub, sizeof sub, pp, key);
        uint32_t off = key_text(c, key, pp, &tmp[i].key_len);
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
    if (c->b->g->gemma) dictsort(c->b->g, tmp, n);
    uint32_t next = (uint32_t)n;
    for (int k = n - 1; k >= 0; k--) {
        if (tmp[k].next_req != G_NONE) next = (uint32_t)k;
        tmp[k].next_req = next;
        uint32_t last = next < (uint32_t)n ? next : (uint32_t)n - 1;
        if (last - (uint32_t)k + 1 > G_MAX_WINDOW)
            return gb_fail(c->b, "object at %s has more than %d optional properties in a row", at(ptr), G_MAX_WINDOW);
    }
    uint32_t first = gb_props(c->b, tmp, (uint32_t)n), id = first == G_NONE ? G_NONE : gb_node(c->b, G_OBJ);
    if (id == G_NONE) return id;
    c->b->g->nodes[id].first = first; c->b->g->nodes[id].count = (uint32_t)n;
    return id;
}

static uint32_t compile_array(cc *c, json_object *s, const char *ptr, int depth) {
    json_object *items = NULL, *prefix = NULL;
    json_object_object_get_ex(s, "items", &items);
    json_object_object_get_ex(s, "prefixItems", &prefix);
    uint32_t mn = 0, mx = G_NONE - 1;
    if (get_count(c, s, "minItems", ptr, &mn, G_MAX_MIN) || get_count(c, s, "maxItems", ptr, &mx, G_NONE - 1)) return G_NONE;
    if (mn > mx) return gb_fail(c->b, "keyword 'minItems' at %s exceeds maxItems", at(ptr));
    if (prefix && !json_object_is_type(prefix, json_type_array))
        return gb_fail(c->b, "keyword 'prefixItems' at %s must be an array", at(ptr));
    size_t np = prefix ? json_object_array_length(prefix) : 0;
    if (np > G_MAX_PROPS) return gb_fail(c->b, "keyword 'prefixItems' at %s has more than %d schemas", at(ptr), G_MAX_PROPS);
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
    if (mn > mx) return gb_fail(c->b, "keyword 'minItems' at %s asks for more items than the schema allows", at(ptr));
    uint32_t first = gb_alts(c->b, tmp, (uint32_t)np);
    if (first == G_NONE) return G_NONE;
    uint32_t id = gb_node(c->b, G_ARR);
    if (id == G_NONE) return id;
    g_node *nd = &c->b->g->nodes[id];
    nd->first = first; nd->count = (uint32_t)np; nd->items = it;
    nd->min = mn; nd->max = mx == G_NONE - 1 ? G_NONE : mx;
    return id;
}

static uint32_t compile_type(cc *c, int t, json_object *s, const char *ptr, int depth) {
    switch (t) {
    case T_NULL: case T_BOOL: {
        json_object *v = json_tokener_parse(t == T_NULL ? "[null]" : "[false,true]");
        uint32_t id = v ? compile_lit(c, v, (int)json_object_array_length(v), T_ALL, "type", ptr) : gb_fail(c->b, "out of memory");
        json_object_put(v);
        return id;
    }
    case T_NUM: return gb_node(c->b, G_NUM);
    case T_INT: return gb_node(c->b, G_INT);
    case T_OBJ: return compile_object(c, s, ptr, depth);
    case T_ARR: return compile_array(c, s, ptr, depth);
    case T_STR: {
        uint32_t mn = 0, mx = G_NONE - 1;
        if (get_count(c, s, "minLength", ptr, &mn, G_MAX_MIN) || get_count(c, s, "maxLength", ptr, &mx, G_NONE - 1)) return G_NONE;
        if (mn > mx) return gb_fail(c->b, "keyword 'minLength' at %s exceeds maxLength", at(ptr));
        uint32_t id = gb_node(c->b, G_STR);
        if (id != G_NONE) { c->b->g->nodes[id].min = mn; c->b->g->nodes[id].max = mx == G_NONE - 1 ? G_NONE : mx; }
        return id;
    }
    }
    return gb_fail(c->b, "internal: type %d", t);
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
    if (!t) return gb_fail(c->b, "keyword '$ref' at %s: '%s' is not supported (use \"#/$defs/...\" in this schema)", at(ptr), ref);
    uint32_t id = gb_node(c->b, G_REF);
    if (id == G_NONE) return id;
    if (gb_grow((void **)&c->refs, &c->cap_refs, c->n_refs + 1, sizeof *c->refs)) return gb_fail(c->b, "out of memory");
    if (!(c->refs[c->n_refs].ptr = strdup(ref))) return gb_fail(c->b, "out of memory");
    c->refs[c->n_refs++].node = id;
    uint32_t tg = compile(c, t, ref + 1, depth + 1);
    if (tg == G_NONE) return G_NONE;
    c->b->g->nodes[id].target = tg;
    return id;
}

static uint32_t compile(cc *c, json_object *s, const char *ptr, int depth) {
    if (c->b->failed) return G_NONE;
    if (depth > G_MAX_SCHEMA_DEPTH) return gb_fail(c->b, "schema nesting deeper than %d at %s", G_MAX_SCHEMA_DEPTH, at(ptr));
    if (json_object_is_type(s, json_type_boolean)) {
        if (json_object_get_boolean(s)) return G_N_ANY;
        return gb_fail(c->b, "schema false at %s admits no value", at(ptr));
    }
    if (!json_object_is_type(s, json_type_object)) return gb_fail(c->b, "schema at %s must be an object", at(ptr));
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
            return gb_fail(c->b, "keyword '%s' at %s is not supported", key, at(ptr));
        }
    }
    json_object *v;
    if (json_object_object_get_ex(s, "$ref", &v)) {
        if (n_kw > 1) return gb_fail(c->b, "keyword '$ref' at %s: only annotations may stand beside it", at(ptr));
        if (!json_object_is_type(v, json_type_string)) return gb_fail(c->b, "keyword '$ref' at %s must be a string", at(ptr));
        return compile_ref(c, json_object_get_string(v), ptr, depth);
    }
    const char *alt_kw = json_object_object_get_ex(s, "anyOf", &v) ? "anyOf" :
                         json_object_object_get_ex(s, "oneOf", &v) ? "oneOf" : NULL;
    if (alt_kw) {
        if (n_kw > 1) return gb_fail(c->b, "keyword '%s' at %s: only annotations may stand beside it", alt_kw, at(ptr));
        if (!json_object_is_type(v, json_type_array) || !json_object_array_length(v))
            return gb_fail(c->b, "keyword '%s' at %s must be a non-empty array", alt_kw, at(ptr));
        size_t n = json_object_array_length(v);
        if (n > G_MAX_PROPS) return gb_fail(c->b, "keyword '%s' at %s has more than %d schemas", alt_kw, at(ptr), G_MAX_PROPS);
        uint32_t tmp[G_MAX_PROPS];
        char pp[1024], sub[1100];
        ptr_child(pp, sizeof pp, ptr, alt_kw);
        for (size_t i = 0; i < n; i++) {
            snprintf(sub, sizeof sub, "%s/%zu", pp, i);
            if ((tmp[i] = compile(c, json_object_array_get_idx(v, i), sub, depth + 1)) == G_NONE) return G_NONE;
        }
        uint32_t first = gb_alts(c->b, tmp, (uint32_t)n), id = first == G_NONE ? G_NONE : gb_node(c->b, G_ANYOF);
        if (id != G_NONE) { c->b->g->nodes[id].first = first; c->b->g->nodes[id].count = (uint32_t)n; }
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
                return gb_fail(c->b, "keyword 'type' at %s: '%s' is not a JSON Schema type", at(ptr), name);
            types |= type_names[k].mask;
        }
        if (!types) return gb_fail(c->b, "keyword 'type' at %s lists no type", at(ptr));
    }
    const char *lit_kw = json_object_object_get_ex(s, "enum", &v) ? "enum" :
                         json_object_object_get_ex(s, "const", &v) ? "const" : NULL;
    if (lit_kw) {
        if (n_kw > 1 + (types != 0)) return gb_fail(c->b, "keyword '%s' at %s: only type and annotations may stand beside it", lit_kw, at(ptr));
        int n = 1;
        if (!strcmp(lit_kw, "enum")) {
            if (!json_object_is_type(v, json_type_array)) return gb_fail(c->b, "keyword 'enum' at %s must be an array", at(ptr));
            n = (int)json_object_array_length(v);
        } else {
            json_object *one = json_object_new_array(); /* const is a one-value enum */
            if (!one) return gb_fail(c->b, "out of memory");
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
    uint32_t first = gb_alts(c->b, tmp, n), id = first == G_NONE ? G_NONE : gb_node(c->b, G_ANYOF);
    if (id != G_NONE) { c->b->g->nodes[id].first = first; c->b->g->nodes[id].count = n; }
    return id;
}


/* ---------------------------------------------------------------- entry points */

/* one byte of a key as Python's str.lower() makes it: ASCII and Latin-1 capitals (U+00C0..U+00DE) */
static unsigned lower_at(const unsigned char *s, size_t i) {
    unsigned c = s[i];
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (i && s[i - 1] == 0xc3 && c >= 0x80 && c <= 0x9e && c != 0x97) return c + 32;
    return c;
}

int key_order(const char *a, size_t na, const char *b, size_t nb) {
    size_t n = na < nb ? na : nb;
    for (size_t i = 0; i < n; i++) {
        unsigned x = lower_at((const unsigned char *)a, i), y = lower_at((const unsigned char *)b, i);
        if (x != y) return x < y ? -1 : 1;
    }
    return (na > nb) - (na < nb);
}

json_object *schema_parse(g_build *b, const char *text, size_t len, int extra_depth) {
    json_tokener *tk = json_tokener_new_ex(G_MAX_SCHEMA_DEPTH * 3 + 8 + extra_depth);
    if (!tk) { gb_fail(b, "out of memory"); return NULL; }
    json_tokener_set_flags(tk, JSON_TOKENER_VALIDATE_UTF8); /* bytes past UTF-8 stand for Gemma's control tokens */
    json_object *doc = len <= INT32_MAX ? json_tokener_parse_ex(tk, text, (int)len) : NULL;
    enum json_tokener_error je = json_tokener_get_error(tk);
    size_t used = json_tokener_get_parse_end(tk);
    json_tokener_free(tk);
    while (used < len && strchr(" \t\r\n", text[used])) used++; /* trailing whitespace */
    if (!doc || je != json_tokener_success || used != len) {
        json_object_put(doc);
        gb_fail(b, "not valid JSON%s", je == json_tokener_error_depth ? " (nested too deep)" : "");
        return NULL;
    }
    return doc;
}

uint32_t schema_compile(g_build *b, json_object *doc) {
    cc c = {.b = b, .doc = doc};
    uint32_t root = compile(&c, doc, "", 0);
    for (uint32_t i = 0; i < c.n_refs; i++) free(c.refs[i].ptr);
    free(c.refs);
    return b->failed ? G_NONE : root;
}

int grammar_compile(grammar *g, const char *schema, size_t len, const char *where, char *err, size_t errlen) {
    g_build b;
    json_object *doc = NULL;
    int rc = gb_start(&b, g, 0, where, err, errlen);
    if (!rc) {
        uint32_t root = G_N_FOBJ;
        if (schema) root = (doc = schema_parse(&b, schema, len, 0)) ? schema_compile(&b, doc) : G_NONE;
        rc = gb_finish(&b, root);
    }
    json_object_put(doc);
    if (rc) {
        if (!b.failed) gb_fail(&b, "internal error");
        grammar_free(g);
    }
    return rc;
}
