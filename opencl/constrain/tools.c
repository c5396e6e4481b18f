/* tools.c — an OpenAI tools array compiled to a grammar of tool calls in Gemma 4's own syntax, as
 * the chat template renders past calls (opencl/io/chat_gemma4.c):
 *     <|tool_call>call:NAME{key:VALUE,...}<tool_call|>    once, or 1..G_MAX_CALLS times (parallel)
 * NAME is one of the functions (or the one tool_choice names); the arguments object is compiled
 * from the function's parameters schema in the Gemma dialect (absent, null or {}: any keys).
 * Messages name the place: "tools[2].function.parameters: keyword 'pattern' at /properties/x ...". */
#include "grammar.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#define CALL_PREFIX "call:"

/* names the rendered call syntax can carry: a parser reads NAME up to '{' */
static int name_ok(const char *s, size_t n) {
    if (!n || n > G_MAX_NAME) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr("_-.:", c));
        if (!ok) return 0;
    }
    return 1;
}

/* tools[i] checked: its name and parameters (NULL: any object) */
static int function_at(g_build *b, json_object *t, size_t i, const char **name, json_object **params) {
    json_object *v, *fn, *nm;
    if (!json_object_is_type(t, json_type_object))
        return gb_fail(b, "tools[%zu] must be an object {\"type\":\"function\",\"function\":{...}}", i), -1;
    if (json_object_object_get_ex(t, "type", &v) &&
        !(json_object_is_type(v, json_type_string) && !strcmp(json_object_get_string(v), "function")))
        return gb_fail(b, "tools[%zu].type must be \"function\"", i), -1;
    if (!json_object_object_get_ex(t, "function", &fn) || !json_object_is_type(fn, json_type_object))
        return gb_fail(b, "tools[%zu].function must be an object", i), -1;
    if (!json_object_object_get_ex(fn, "name", &nm) || !json_object_is_type(nm, json_type_string))
        return gb_fail(b, "tools[%zu].function.name must be a string", i), -1;
    *name = json_object_get_string(nm);
    if (!name_ok(*name, (size_t)json_object_get_string_len(nm)))
        return gb_fail(b, "tools[%zu].function.name '%s' must be 1 to %d of A-Z a-z 0-9 _ - . :", i, *name, G_MAX_NAME), -1;
    *params = NULL;
    if (json_object_object_get_ex(fn, "parameters", &v) && v && !(json_object_is_type(v, json_type_object) && !json_object_object_length(v)))
        *params = v;
    return 0;
}

static int prop_cmp(const grammar *g, const g_prop *x, const g_prop *y) {
    uint32_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int r = memcmp(g->bytes + x->key, g->bytes + y->key, n);
    return r ? r : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* an object that closes within the stack above the root and calls frames */
static int object_fits(const g_node *d) { return (d->kind == G_OBJ || d->kind == G_FOBJ) && d->min_depth + 2u <= G_MAX_STACK; }

/* a function's arguments: '{' may follow its name, and the object can close */
static int args_ok(const grammar *g, uint32_t node) {
    const g_node *d = &g->nodes[node];
    if (d->kind != G_ANYOF) return object_fits(d);
    for (uint32_t i = 0; i < d->count; i++)
        if (object_fits(&g->nodes[g->alts[d->first + i]])) return 1;
    return 0;
}

static int compile_calls(g_build *b, json_object *tools, const char *only, int parallel, char *where, size_t wcap) {
    b->where = ""; /* the messages below name their place */
    if (!json_object_is_type(tools, json_type_array) || !json_object_array_length(tools))
        return gb_fail(b, "tools must be a non-empty array of functions"), -1;
    size_t n = json_object_array_length(tools);
    if (n > G_MAX_PROPS) return gb_fail(b, "tools has more than %d functions", G_MAX_PROPS), -1;
    const char *names[G_MAX_PROPS];
    g_prop p[G_MAX_PROPS];
    size_t idx[G_MAX_PROPS], k = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *params;
        if (function_at(b, json_object_array_get_idx(tools, i), i, &names[i], &params)) return -1;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(names[j], names[i])) return gb_fail(b, "tools[%zu].function.name '%s' repeats tools[%zu]", i, names[i], j), -1;
        if (only && strcmp(names[i], only)) continue;
        snprintf(where, wcap, "tools[%zu].function.parameters: ", i);
        b->where = where;
        uint32_t args = params ? schema_compile(b, params) : G_N_FOBJ;
        uint32_t key = gb_bytes(b, CALL_PREFIX, strlen(CALL_PREFIX));
        gb_bytes(b, names[i], strlen(names[i])); /* right after the prefix: one key */
        b->where = "";
        if (b->failed) return -1;
        g_prop q = {key, (uint32_t)(strlen(CALL_PREFIX) + strlen(names[i])), args, 0};
        size_t j = k++;
        for (; j > 0 && prop_cmp(b->g, &p[j - 1], &q) > 0; j--) { p[j] = p[j - 1]; idx[j] = idx[j - 1]; } /* sorted by bytes */
        p[j] = q; idx[j] = i;
    }
    if (only && !k) return gb_fail(b, "tool_choice names the function '%s', which is not in tools", only), -1;
    uint32_t first = gb_props(b, p, (uint32_t)k), id = first == G_NONE ? G_NONE : gb_node(b, G_CALLS);
    if (id == G_NONE) return -1;
    g_node *d = &b->g->nodes[id];
    d->first = first; d->count = (uint32_t)k; d->min = 1; d->max = parallel ? G_MAX_CALLS : 1;
    b->where = "tools: ";
    if (gb_finish(b, id)) return -1;
    for (size_t i = 0; i < k; i++)
        if (!args_ok(b->g, p[i].node)) {
            snprintf(where, wcap, "tools[%zu].function.parameters: ", idx[i]);
            b->where = where;
            return gb_fail(b, "must describe an object (a call's arguments) of finite size within %d levels", G_MAX_STACK - 2), -1;
        }
    return 0;
}

int grammar_compile_tools(grammar *g, const char *tools, size_t len, const char *only, int parallel,
                          char *err, size_t errlen) {
    g_build b;
    json_object *doc = NULL;
    char where[64];
    int rc = gb_start(&b, g, 1, "tools: ", err, errlen);
    if (!rc && !tools) rc = (int)gb_fail(&b, "no tools given");
    if (!rc) rc = (doc = schema_parse(&b, tools, len, 4)) ? compile_calls(&b, doc, only, parallel, where, sizeof where) : -1;
    json_object_put(doc);
    if (rc) {
        if (!b.failed) gb_fail(&b, "internal error");
        grammar_free(g);
    }
    return rc;
}
