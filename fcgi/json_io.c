/* json_io.c — request validation (json-c) into typed structs. */
#include "json_io.h"
#include "json_fields.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MESSAGES 4096

static int bad(api_error *e, const char *param, const char *fmt, const char *detail)
{
    return api_fail(e, 400, "invalid_request_error", NULL, param, fmt, param, detail);
}

/* ---- typed field readers: absent and JSON null both mean "not given" (return 0) ---- */

static json_object *field(json_object *obj, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(obj, key, &v)) return NULL;
    return v; /* NULL also for a JSON null */
}

static int get_number(json_object *obj, const char *key, double lo, double hi, double *out, api_error *e)
{
    json_object *v = field(obj, key);
    if (!v) return 0;
    enum json_type t = json_object_get_type(v);
    if (t != json_type_int && t != json_type_double) return bad(e, key, "'%s' must be a number%s", "");
    double x = json_object_get_double(v);
    if (!isfinite(x) || x < lo || x > hi) {
        char rng[96];
        snprintf(rng, sizeof rng, " in [%g, %g]", lo, hi);
        return bad(e, key, "'%s' must be a number%s", rng);
    }
    *out = x;
    return 1;
}

static int get_int(json_object *obj, const char *key, int64_t lo, int64_t hi, int64_t *out, api_error *e)
{
    json_object *v = field(obj, key);
    if (!v) return 0;
    enum json_type t = json_object_get_type(v);
    int64_t x;
    if (t == json_type_int) {
        x = json_object_get_int64(v);
        /* json-c saturates; a uint64 above INT64_MAX reads as INT64_MAX */
    } else if (t == json_type_double) {
        double d = json_object_get_double(v);
        if (!isfinite(d) || d != floor(d) || fabs(d) > 9.0e15) return bad(e, key, "'%s' must be an integer%s", "");
        x = (int64_t)d;
    } else {
        return bad(e, key, "'%s' must be an integer%s", "");
    }
    if (x < lo || x > hi) {
        char rng[96];
        snprintf(rng, sizeof rng, " in [%lld, %lld]", (long long)lo, (long long)hi);
        return bad(e, key, "'%s' must be an integer%s", rng);
    }
    *out = x;
    return 1;
}

static int get_bool(json_object *obj, const char *key, int *out, api_error *e)
{
    json_object *v = field(obj, key);
    if (!v) return 0;
    if (json_object_get_type(v) != json_type_boolean) return bad(e, key, "'%s' must be a boolean%s", "");
    *out = json_object_get_boolean(v);
    return 1;
}

/* copies a JSON string; rejects interior NUL bytes (the engine takes C strings) */
static int dup_string(json_object *v, const char *param, char **out, size_t *len_out, api_error *e)
{
    int n = json_object_get_string_len(v);
    const char *s = json_object_get_string(v);
    if (memchr(s, 0, (size_t)n)) return bad(e, param, "'%s' must not contain NUL characters%s", "");
    char *c = malloc((size_t)n + 1);
    if (!c) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    memcpy(c, s, (size_t)n);
    c[n] = 0;
    *out = c;
    if (len_out) *len_out = (size_t)n;
    return 1;
}

static int get_string(json_object *obj, const char *key, char **out, api_error *e)
{
    json_object *v = field(obj, key);
    if (!v) return 0;
    if (json_object_get_type(v) != json_type_string) return bad(e, key, "'%s' must be a string%s", "");
    return dup_string(v, key, out, NULL, e);
}

static json_object *parse_object(const char *body, size_t len, api_error *e)
{
    if (len > 0x7fffffff) { api_fail(e, 413, "invalid_request_error", NULL, NULL, "request body too large"); return NULL; }
    json_tokener *tok = json_tokener_new();
    if (!tok) { api_fail(e, 500, "server_error", NULL, NULL, "out of memory"); return NULL; }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *root = json_tokener_parse_ex(tok, body, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t used = json_tokener_get_parse_end(tok);
    if (!root && jerr == json_tokener_continue)
        api_fail(e, 400, "invalid_request_error", NULL, NULL, "malformed JSON: unexpected end of body");
    else if (!root)
        api_fail(e, 400, "invalid_request_error", NULL, NULL, "malformed JSON at byte %zu: %s", used,
                 json_tokener_error_desc(jerr));
    else {
        for (size_t i = used; i < len; i++) {
            char c = body[i];
            if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
                api_fail(e, 400, "invalid_request_error", NULL, NULL, "malformed JSON: trailing data at byte %zu", i);
                json_object_put(root);
                root = NULL;
                break;
            }
        }
        if (root && json_object_get_type(root) != json_type_object) {
            api_fail(e, 400, "invalid_request_error", NULL, NULL, "request body must be a JSON object");
            json_object_put(root);
            root = NULL;
        }
    }
    json_tokener_free(tok);
    return root;
}

/* ---- fields shared by chat and completions ---- */

static int parse_stop(json_object *root, api_gen *g, api_error *e)
{
    json_object *v = field(root, "stop");
    if (!v) return 0;
    if (json_object_get_type(v) == json_type_string) {
        if (json_object_get_string_len(v) == 0) return bad(e, "stop", "'%s' strings must not be empty%s", "");
        if (dup_string(v, "stop", &g->stop[0], &g->stop_len[0], e) < 0) return -1;
        g->n_stop = 1;
        return 0;
    }
    if (json_object_get_type(v) != json_type_array)
        return bad(e, "stop", "'%s' must be a string or an array of strings%s", "");
    size_t n = json_object_array_length(v);
    if (n > API_MAX_STOP) return bad(e, "stop", "'%s' may hold at most 4 strings%s", "");
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(v, i);
        if (!s || json_object_get_type(s) != json_type_string)
            return bad(e, "stop", "'%s' must be a string or an array of strings%s", "");
        if (json_object_get_string_len(s) == 0) return bad(e, "stop", "'%s' strings must not be empty%s", "");
        if (dup_string(s, "stop", &g->stop[i], &g->stop_len[i], e) < 0) return -1;
        g->n_stop = (int)i + 1;
    }
    return 0;
}

/* the keys of obj must be among keys (NULL-terminated); else 400 naming param.key */
static int only_keys(json_object *obj, const char *const *keys, const char *param, api_error *e)
{
    json_object_object_foreach(obj, key, val) {
        (void)val;
        int ok = 0;
        for (int i = 0; keys[i]; i++) ok |= !strcmp(keys[i], key);
        if (!ok) {
            char p[192];
            snprintf(p, sizeof p, "%.120s.%.60s", param, key);
            return api_fail(e, 400, "invalid_request_error", "unknown_parameter", p,
                            "Unrecognized request argument supplied: %s", p);
        }
    }
    return 0;
}

/* response_format: text (nothing), json_object, or json_schema {name, schema, strict, description} */
static int parse_response_format(json_object *root, api_gen *g, api_error *e)
{
    json_object *rf = field(root, "response_format");
    if (!rf) return 0;
    if (json_object_get_type(rf) != json_type_object) return bad(e, "response_format", "'%s' must be an object%s", "");
    json_object *t = field(rf, "type");
    if (!t || json_object_get_type(t) != json_type_string)
        return bad(e, "response_format.type", "'%s' must be one of text, json_object, json_schema%s", "");
    const char *type = json_object_get_string(t);
    static const char *const allowed_text[] = { "type", NULL }, *const allowed_schema[] = { "type", "json_schema", NULL };
    if (only_keys(rf, !strcmp(type, "json_schema") ? allowed_schema : allowed_text, "response_format", e)) return -1;
    if (!strcmp(type, "text")) return 0;
    if (!strcmp(type, "json_object")) { g->constrained = 1; return 0; }
    if (strcmp(type, "json_schema"))
        return bad(e, "response_format.type", "'%s' must be one of text, json_object, json_schema%s", "");
    json_object *js = field(rf, "json_schema");
    if (!js || json_object_get_type(js) != json_type_object)
        return bad(e, "response_format.json_schema", "'%s' must be an object with a 'schema'%s", "");
    static const char *const schema_keys[] = { "name", "schema", "strict", "description", NULL };
    if (only_keys(js, schema_keys, "response_format.json_schema", e)) return -1;
    json_object *name = field(js, "name");
    if (!name || json_object_get_type(name) != json_type_string || json_object_get_string_len(name) == 0)
        return bad(e, "response_format.json_schema.name", "'%s' must be a non-empty string%s", "");
    int strict = 0;
    if (get_bool(js, "strict", &strict, e) < 0) return -1;
    json_object *sc = field(js, "schema");
    if (!sc) { g->constrained = 1; return 0; } /* no schema: any JSON object, as OpenAI does */
    if (json_object_get_type(sc) != json_type_object)
        return bad(e, "response_format.json_schema.schema", "'%s' must be an object%s", "");
    size_t n;
    const char *text = json_object_to_json_string_length(sc, JSON_C_TO_STRING_PLAIN, &n);
    g->schema = malloc(n + 1);
    if (!g->schema) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    memcpy(g->schema, text, n + 1);
    g->schema_len = n;
    g->constrained = 1;
    return 0;
}

/* logit_bias: {"token id": bias}, bias in [-100, 100] */
static int parse_logit_bias(json_object *root, api_gen *g, api_error *e)
{
    json_object *lb = field(root, "logit_bias");
    if (!lb) return 0;
    if (json_object_get_type(lb) != json_type_object)
        return bad(e, "logit_bias", "'%s' must be an object mapping token ids to numbers%s", "");
    json_object_object_foreach(lb, key, val) {
        char *end;
        long id = strtol(key, &end, 10);
        if (!*key || *end || id < 0 || id > INT32_MAX || (key[0] == '0' && key[1]))
            return bad(e, "logit_bias", "'%s' keys must be token ids (non-negative integers)%s", "");
        enum json_type t = val ? json_object_get_type(val) : json_type_null;
        double b = (t == json_type_int || t == json_type_double) ? json_object_get_double(val) : NAN;
        if (!isfinite(b) || b < -100 || b > 100) return bad(e, "logit_bias", "'%s' values must be numbers in [-100, 100]%s", "");
        if (g->n_bias == API_MAX_BIAS) return bad(e, "logit_bias", "'%s' may hold at most 300 entries%s", "");
        g->bias_tok[g->n_bias] = (int32_t)id;
        g->bias_val[g->n_bias++] = (float)b;
    }
    return 0;
}

static int parse_gen(json_object *root, api_gen *g, int chat, api_error *e)
{
    int64_t i64;
    double d;
    int r;
    g->max_tokens = -1;
    g->think_open = g->think_close = -1;
    sampler_params_default(&g->sampling);
    g->sampling.temperature = 1.0f; /* OpenAI's default */

    if ((r = get_int(root, "max_tokens", 1, 1 << 24, &i64, e)) < 0) return -1;
    if (r) g->max_tokens = (int)i64;
    if (chat) {
        if ((r = get_int(root, "max_completion_tokens", 1, 1 << 24, &i64, e)) < 0) return -1;
        if (r) g->max_tokens = (int)i64; /* the newer name wins */
    }
    if ((r = get_number(root, "temperature", 0, 2, &d, e)) < 0) return -1;
    if (r) g->sampling.temperature = (float)d;
    if ((r = get_number(root, "top_p", 0, 1, &d, e)) < 0) return -1;
    if (r) {
        g->sampling.top_p = (float)d;
        if (d == 0) g->sampling.temperature = 0; /* nothing but the top token is left: greedy */
    }
    if ((r = get_int(root, "top_k", -1, 1 << 20, &i64, e)) < 0) return -1;
    if (r) g->sampling.top_k = i64 < 0 ? 0 : (int)i64;
    if ((r = get_number(root, "min_p", 0, 1, &d, e)) < 0) return -1;
    if (r) g->sampling.min_p = (float)d;
    if ((r = get_number(root, "frequency_penalty", -2, 2, &d, e)) < 0) return -1;
    if (r) g->sampling.frequency_penalty = (float)d;
    if ((r = get_number(root, "presence_penalty", -2, 2, &d, e)) < 0) return -1;
    if (r) g->sampling.presence_penalty = (float)d;
    if ((r = get_number(root, "repetition_penalty", 0.01, 10, &d, e)) < 0) return -1;
    if (r) g->sampling.repetition_penalty = (float)d;
    if ((r = get_int(root, "seed", INT64_MIN, INT64_MAX, &i64, e)) < 0) return -1;
    if (r) { g->sampling.seed = (uint64_t)i64; g->seed_given = 1; }
    g->n = 1;
    if ((r = get_int(root, "n", 1, API_MAX_N, &i64, e)) < 0) return -1;
    if (r) g->n = (int)i64;
    if (parse_stop(root, g, e)) return -1;
    if (get_bool(root, "stream", &g->stream, e) < 0) return -1;
    if (get_bool(root, "ignore_eos", &g->ignore_eos, e) < 0) return -1;
    if ((r = get_int(root, "priority", -1000000, 1000000, &i64, e)) < 0) return -1;
    if (r) g->priority = (int)i64;
    json_object *so = field(root, "stream_options");
    if (so) {
        if (json_object_get_type(so) != json_type_object) return bad(e, "stream_options", "'%s' must be an object%s", "");
        if (!g->stream) return bad(e, "stream_options", "'%s' is only allowed when 'stream' is true%s", "");
        if (get_bool(so, "include_usage", &g->include_usage, e) < 0) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            return -1;
        }
    }
    json_object *user = field(root, "user");
    if (user && json_object_get_type(user) != json_type_string) return bad(e, "user", "'%s' must be a string%s", "");
    if (chat && parse_response_format(root, g, e)) return -1;
    if (chat) {
        if (get_bool(root, "logprobs", &g->logprobs, e) < 0) return -1;
        if ((r = get_int(root, "top_logprobs", 0, 20, &i64, e)) < 0) return -1;
        if (r && !g->logprobs && i64 > 0)
            return bad(e, "top_logprobs", "'%s' needs 'logprobs': true%s", "");
        if (r) g->top_logprobs = (int)i64;
    } else {
        /* completions: logprobs is the number of alternatives, 0 for the chosen token's alone */
        if ((r = get_int(root, "logprobs", 0, 5, &i64, e)) < 0) return -1;
        if (r) { g->logprobs = 1; g->top_logprobs = (int)i64; }
    }
    return parse_logit_bias(root, g, e);
}

static int parse_model(json_object *root, char **model, api_error *e)
{
    int r = get_string(root, "model", model, e);
    if (r < 0) return -1;
    if (!r) return api_fail(e, 400, "invalid_request_error", NULL, "model", "'model' is required");
    return 0;
}

static void gen_free(api_gen *g)
{
    for (int i = 0; i < g->n_stop; i++) free(g->stop[i]);
    g->n_stop = 0;
    free(g->schema);
    g->schema = NULL;
}

/* ---- chat ---- */

static int parse_role(const char *s, enum api_role *out)
{
    if (!strcmp(s, "system") || !strcmp(s, "developer")) *out = ROLE_SYSTEM;
    else if (!strcmp(s, "user")) *out = ROLE_USER;
    else if (!strcmp(s, "assistant")) *out = ROLE_ASSISTANT;
    else if (!strcmp(s, "tool")) *out = ROLE_TOOL;
    else return -1;
    return 0;
}

/* an image_url part of message content: its image appended to m's */
static int image_part(json_object *p, const char *param, size_t j, api_message *m, api_error *e)
{
    char pp[96];
    snprintf(pp, sizeof pp, "%s[%zu]", param, j);
    api_image *im = realloc(m->images, (size_t)(m->n_images + 1) * sizeof *im);
    if (!im) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    m->images = im;
    if (api_image_part(p, pp, &m->images[m->n_images], e)) return -1;
    m->n_images++;
    return 0;
}

/* with images, the parts as the template reads them, in the client's order: {"type": "text", "text"},
 * {"type": "image"} where an image_url was, {"type": "video"} where a video was */
static int template_parts(json_object *c, api_message *m, api_error *e)
{
    size_t n = json_object_array_length(c);
    if (!(m->parts = json_object_new_array())) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(c, i), *q = json_object_new_object();
        const char *ty = json_object_get_string(field(p, "type"));
        int text = !strcmp(ty, "text");
        if (!q || json_object_object_add(q, "type", json_object_new_string(text ? "text" : !strncmp(ty, "video", 5) ? "video"
                                                                                                          : "image")) ||
            (text && json_object_object_add(q, "text", json_object_get(field(p, "text")))) ||
            json_object_array_add(m->parts, q)) {
            json_object_put(q);
            return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    return 0;
}

/* content: a string, or an array of {"type":"text","text":...} parts joined together and
 * {"type":"image_url",...} parts (the template sees those as {"type":"image"} in place) */
static int parse_content(json_object *c, const char *param, api_message *m, api_error *e)
{
    if (!c) return bad(e, param, "'%s' is required%s", "");
    if (json_object_get_type(c) == json_type_string)
        return dup_string(c, param, &m->content, &m->len, e) < 0 ? -1 : 0;
    if (json_object_get_type(c) != json_type_array)
        return bad(e, param, "'%s' must be a string or an array of text and image_url parts%s", "");
    size_t n = json_object_array_length(c), total = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(c, i), *t;
        if (!p || json_object_get_type(p) != json_type_object)
            return bad(e, param, "'%s' parts must be objects%s", "");
        t = field(p, "type");
        if (t && json_object_get_type(t) == json_type_string && !strcmp(json_object_get_string(t), "image_url")) {
            if (image_part(p, param, i, m, e)) return -1;
            continue;
        }
        const char *ty = t && json_object_get_type(t) == json_type_string ? json_object_get_string(t) : "";
        if (!strcmp(ty, "video") || !strcmp(ty, "video_url")) { /* frames, or a file decoded into frames */
            char pp[96];
            snprintf(pp, sizeof pp, "%s[%zu]", param, i);
            if (!strcmp(ty, "video") ? api_video_part(p, pp, API_VIDEO_MAX_FRAMES, &m->images, &m->n_images, e)
                                     : api_video_url_part(p, pp, &m->images, &m->n_images, e))
                return -1;
            m->n_videos++;
            continue;
        }
        if (!t || json_object_get_type(t) != json_type_string || strcmp(json_object_get_string(t), "text"))
            return bad(e, param, "'%s' parts must have type \"text\", \"image_url\", \"video_url\" or \"video\"%s", "");
        t = field(p, "text");
        if (!t || json_object_get_type(t) != json_type_string)
            return bad(e, param, "'%s' text parts need a string 'text'%s", "");
        total += (size_t)json_object_get_string_len(t);
    }
    if (m->n_images && template_parts(c, m, e)) return -1; /* a video has at least one frame */
    char *buf = malloc(total + 1);
    if (!buf) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(c, i), *t = field(p, "text");
        if (strcmp(json_object_get_string(field(p, "type")), "text")) continue; /* an image */
        size_t l = (size_t)json_object_get_string_len(t);
        memcpy(buf + off, json_object_get_string(t), l);
        off += l;
    }
    buf[off] = 0;
    if (memchr(buf, 0, off)) { free(buf); return bad(e, param, "'%s' must not contain NUL characters%s", ""); }
    m->content = buf;
    m->len = off;
    return 0;
}

/* obj[key] must be a string equal to want */
static int want_string(json_object *obj, const char *key, const char *want, const char *param, api_error *e)
{
    json_object *v = field(obj, key);
    char p[192];
    snprintf(p, sizeof p, "%.120s.%s", param, key);
    if (!v || json_object_get_type(v) != json_type_string || strcmp(json_object_get_string(v), want))
        return api_fail(e, 400, "invalid_request_error", NULL, p, "'%s' must be \"%s\"", p, want);
    return 0;
}

/* a function name as OpenAI allows it: a-z, A-Z, 0-9, _ and -, 1..64 characters */
static int function_name(json_object *v)
{
    if (!v || json_object_get_type(v) != json_type_string) return 0;
    const char *s = json_object_get_string(v);
    size_t n = (size_t)json_object_get_string_len(v);
    if (n < 1 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-')) return 0;
    return 1;
}

/* an assistant message's tool_calls, copied with each call's arguments parsed into an object */
static int parse_tool_calls(json_object *tc, const char *param, api_message *m, api_error *e)
{
    static const char *const call_keys[] = { "id", "type", "function", NULL }, *const fn_keys[] = { "name", "arguments", NULL };
    if (json_object_get_type(tc) != json_type_array) return bad(e, param, "'%s' must be an array%s", "");
    m->tool_calls = json_object_new_array();
    if (!m->tool_calls) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < json_object_array_length(tc); i++) {
        char p[160], pf[200];
        json_object *c = json_object_array_get_idx(tc, i);
        snprintf(p, sizeof p, "%.100s[%zu]", param, i);
        if (!c || json_object_get_type(c) != json_type_object) return bad(e, p, "'%s' must be an object%s", "");
        if (only_keys(c, call_keys, p, e) || want_string(c, "type", "function", p, e)) return -1;
        json_object *id = field(c, "id"), *fn = field(c, "function");
        snprintf(pf, sizeof pf, "%s.id", p);
        if (!id || json_object_get_type(id) != json_type_string) return bad(e, pf, "'%s' must be a string%s", "");
        snprintf(pf, sizeof pf, "%s.function", p);
        if (!fn || json_object_get_type(fn) != json_type_object) return bad(e, pf, "'%s' must be an object%s", "");
        if (only_keys(fn, fn_keys, pf, e)) return -1;
        json_object *name = field(fn, "name"), *args = field(fn, "arguments");
        snprintf(pf, sizeof pf, "%s.function.name", p);
        if (!name || json_object_get_type(name) != json_type_string) return bad(e, pf, "'%s' must be a string%s", "");
        snprintf(pf, sizeof pf, "%s.function.arguments", p);
        json_object *obj = NULL;
        if (args && json_object_get_type(args) == json_type_string) {
            json_tokener *t = json_tokener_new();
            if (!t) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
            json_tokener_set_flags(t, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
            obj = json_tokener_parse_ex(t, json_object_get_string(args), json_object_get_string_len(args) + 1);
            json_tokener_free(t);
        } else if (args && json_object_get_type(args) == json_type_object) {
            obj = json_object_get(args);
        }
        if (!obj || json_object_get_type(obj) != json_type_object) {
            json_object_put(obj);
            return bad(e, pf, "'%s' must be a JSON object (as text)%s", "");
        }
        json_object *call = json_object_new_object(), *f = json_object_new_object();
        if (!call || !f || json_object_array_add(m->tool_calls, call)) {
            json_object_put(call); json_object_put(f); json_object_put(obj);
            return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        }
        json_object_object_add(call, "id", json_object_get(id));
        json_object_object_add(call, "type", json_object_new_string("function"));
        json_object_object_add(f, "name", json_object_get(name));
        json_object_object_add(f, "arguments", obj);
        json_object_object_add(call, "function", f);
    }
    return 0;
}

static int parse_message(json_object *m, size_t i, api_message *out, api_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%zu]", i);
    if (!m || json_object_get_type(m) != json_type_object) return bad(e, param, "'%s' must be an object%s", "");
    if (json_check_fields(m, BODY_MESSAGE, param, e)) return -1;
    json_object *role = field(m, "role"), *tc = field(m, "tool_calls"), *c = field(m, "content");
    snprintf(param, sizeof param, "messages[%zu].role", i);
    if (!role || json_object_get_type(role) != json_type_string) return bad(e, param, "'%s' must be a string%s", "");
    if (parse_role(json_object_get_string(role), &out->role))
        return bad(e, param, "'%s' must be one of system, developer, user, assistant, tool%s", "");
    const char *which[] = { "tool_calls", "reasoning_content", "tool_call_id" };
    int allowed[] = { out->role == ROLE_ASSISTANT, out->role == ROLE_ASSISTANT, out->role == ROLE_TOOL };
    for (int k = 0; k < 3; k++) {
        snprintf(param, sizeof param, "messages[%zu].%s", i, which[k]);
        if (field(m, which[k]) && !allowed[k])
            return bad(e, param, "'%s' is only allowed in %s", k >= 2 ? "role \"tool\" messages" : "role \"assistant\" messages");
    }
    if (tc) {
        snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
        if (parse_tool_calls(tc, param, out, e)) return -1;
    }
    snprintf(param, sizeof param, "messages[%zu].content", i);
    /* an assistant turn of tool calls may have no content (OpenAI sends null) */
    if (!(c == NULL && out->role == ROLE_ASSISTANT && out->tool_calls && json_object_array_length(out->tool_calls) > 0) &&
        parse_content(c, param, out, e)) return -1;
    int r;
    char *scratch = NULL;
    snprintf(param, sizeof param, "messages[%zu].reasoning_content", i);
    json_object *v = field(m, "reasoning_content");
    if (v && json_object_get_type(v) != json_type_string) return bad(e, param, "'%s' must be a string%s", "");
    if (v && dup_string(v, param, &out->reasoning, NULL, e) < 0) return -1;
    /* name: a tool result's function; on other roles a participant's name, which Gemma's templates have no
     * place for (a documented no-op, as OpenAI's models may ignore it too) */
    if (get_string(m, "name", out->role == ROLE_TOOL ? &out->name : &scratch, e) < 0) {
        snprintf(e->param, sizeof e->param, "messages[%zu].name", i);
        return -1;
    }
    free(scratch);
    if (out->role == ROLE_TOOL) {
        snprintf(param, sizeof param, "messages[%zu].tool_call_id", i);
        if ((r = get_string(m, "tool_call_id", &out->tool_call_id, e)) < 0) return -1;
        if (!r) return bad(e, param, "'%s' is required in role \"tool\" messages%s", "");
    }
    return 0;
}

/* tools: [{type: "function", function: {name, description, parameters, strict}}] */
static int parse_tools(json_object *root, api_tools *t, api_error *e)
{
    static const char *const tool_keys[] = { "type", "function", NULL },
                             *const fn_keys[] = { "name", "description", "parameters", "strict", NULL };
    t->parallel = 1;
    if (get_bool(root, "parallel_tool_calls", &t->parallel, e) < 0) return -1;
    json_object *list = field(root, "tools"), *choice = field(root, "tool_choice");
    if (list && json_object_get_type(list) != json_type_array) return bad(e, "tools", "'%s' must be an array%s", "");
    size_t n = list ? json_object_array_length(list) : 0;
    if (n > 128) return bad(e, "tools", "'%s' may hold at most 128 tools%s", "");
    for (size_t i = 0; i < n; i++) {
        char p[64], pf[96];
        json_object *tool = json_object_array_get_idx(list, i), *fn;
        snprintf(p, sizeof p, "tools[%zu]", i);
        if (!tool || json_object_get_type(tool) != json_type_object) return bad(e, p, "'%s' must be an object%s", "");
        if (only_keys(tool, tool_keys, p, e) || want_string(tool, "type", "function", p, e)) return -1;
        snprintf(pf, sizeof pf, "%s.function", p);
        fn = field(tool, "function");
        if (!fn || json_object_get_type(fn) != json_type_object) return bad(e, pf, "'%s' must be an object%s", "");
        if (only_keys(fn, fn_keys, pf, e)) return -1;
        snprintf(pf, sizeof pf, "%s.function.name", p);
        if (!function_name(field(fn, "name")))
            return bad(e, pf, "'%s' must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -%s", "");
        for (size_t k = 0; k < i; k++)
            if (!strcmp(json_object_get_string(field(field(json_object_array_get_idx(list, k), "function"), "name")),
                        json_object_get_string(field(fn, "name"))))
                return bad(e, pf, "'%s' repeats the name of an earlier tool%s", "");
        json_object *d = field(fn, "description"), *pa = field(fn, "parameters"), *st = field(fn, "strict");
        snprintf(pf, sizeof pf, "%s.function.description", p);
        if (d && json_object_get_type(d) != json_type_string) return bad(e, pf, "'%s' must be a string%s", "");
        snprintf(pf, sizeof pf, "%s.function.parameters", p);
        if (pa && json_object_get_type(pa) != json_type_object) return bad(e, pf, "'%s' must be a JSON Schema object%s", "");
        snprintf(pf, sizeof pf, "%s.function.strict", p);
        if (st && json_object_get_type(st) != json_type_boolean) return bad(e, pf, "'%s' must be a boolean%s", "");
    }
    if (n) {
        size_t len;
        const char *txt = json_object_to_json_string_length(list, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        t->json = txt ? strndup(txt, len) : NULL;
        t->list = json_object_get(list);
        t->json_len = len;
        if (!t->json) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    t->choice = n ? TOOL_CHOICE_AUTO : TOOL_CHOICE_NONE;
    if (!choice) return 0;
    if (json_object_get_type(choice) == json_type_string) {
        const char *c = json_object_get_string(choice);
        if (!strcmp(c, "none")) { t->choice = TOOL_CHOICE_NONE; return 0; }
        if (strcmp(c, "auto") && strcmp(c, "required"))
            return bad(e, "tool_choice", "'%s' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}%s", "");
        if (!n) return bad(e, "tool_choice", "'%s' is only allowed when 'tools' are given%s", "");
        t->choice = !strcmp(c, "auto") ? TOOL_CHOICE_AUTO : TOOL_CHOICE_REQUIRED;
        return 0;
    }
    static const char *const choice_keys[] = { "type", "function", NULL }, *const name_key[] = { "name", NULL };
    if (json_object_get_type(choice) != json_type_object)
        return bad(e, "tool_choice", "'%s' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}%s", "");
    if (only_keys(choice, choice_keys, "tool_choice", e) || want_string(choice, "type", "function", "tool_choice", e)) return -1;
    json_object *fn = field(choice, "function");
    if (!fn || json_object_get_type(fn) != json_type_object)
        return bad(e, "tool_choice.function", "'%s' must be an object with the function's name%s", "");
    if (only_keys(fn, name_key, "tool_choice.function", e)) return -1;
    if (!function_name(field(fn, "name"))) return bad(e, "tool_choice.function.name", "'%s' must name a function%s", "");
    const char *want = json_object_get_string(field(fn, "name"));
    int found = 0;
    for (size_t i = 0; i < n; i++)
        found |= !strcmp(want, json_object_get_string(field(field(json_object_array_get_idx(list, i), "function"), "name")));
    if (!found) return bad(e, "tool_choice.function.name", "'%s' names no function of 'tools'%s", "");
    t->name = strdup(want);
    if (!t->name) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    t->choice = TOOL_CHOICE_NAMED;
    return 0;
}

/* thinking: reasoning_effort (none/minimal: off; low/medium/high: on; Gemma 4 thinks or does not) and
 * chat_template_kwargs.enable_thinking, which wins */
static int parse_thinking(json_object *root, int *thinking, api_error *e)
{
    *thinking = -1;
    json_object *re = field(root, "reasoning_effort"), *kw = field(root, "chat_template_kwargs");
    if (re) {
        static const char *const levels[] = { "none", "minimal", "low", "medium", "high" };
        int k = -1;
        for (int i = 0; i < 5 && json_object_get_type(re) == json_type_string; i++)
            if (!strcmp(json_object_get_string(re), levels[i])) k = i;
        if (k < 0) return bad(e, "reasoning_effort", "'%s' must be one of none, minimal, low, medium, high%s", "");
        *thinking = k >= 2;
    }
    if (!kw) return 0;
    static const char *const kw_keys[] = { "enable_thinking", NULL };
    if (json_object_get_type(kw) != json_type_object) return bad(e, "chat_template_kwargs", "'%s' must be an object%s", "");
    if (only_keys(kw, kw_keys, "chat_template_kwargs", e)) return -1;
    int on;
    int r = get_bool(kw, "enable_thinking", &on, e);
    if (r < 0) { snprintf(e->param, sizeof e->param, "chat_template_kwargs.enable_thinking"); return -1; }
    if (r) *thinking = on;
    return 0;
}

static void message_free(api_message *m)
{
    free(m->content);
    json_object_put(m->parts);
    for (int i = 0; i < m->n_images; i++) api_image_free(&m->images[i]);
    free(m->images);
    json_object_put(m->tool_calls);
    free(m->tool_call_id);
    free(m->name);
    free(m->reasoning);
}

int json_parse_chat(const char *body, size_t len, api_chat_request *out, api_error *e)
{
    memset(out, 0, sizeof *out);
    json_object *root = parse_object(body, len, e);
    if (!root) return -1;
    int rc = -1;
    if (json_check_fields(root, BODY_CHAT, NULL, e) || parse_model(root, &out->model, e)) goto done;
    json_object *msgs = field(root, "messages");
    if (!msgs) { api_fail(e, 400, "invalid_request_error", NULL, "messages", "'messages' is required"); goto done; }
    if (json_object_get_type(msgs) != json_type_array) { bad(e, "messages", "'%s' must be an array%s", ""); goto done; }
    size_t n = json_object_array_length(msgs);
    if (n == 0) { bad(e, "messages", "'%s' must not be empty%s", ""); goto done; }
    if (n > MAX_MESSAGES) { bad(e, "messages", "'%s' holds too many messages%s", ""); goto done; }
    out->msgs = calloc(n, sizeof *out->msgs);
    if (!out->msgs) { api_fail(e, 500, "server_error", NULL, NULL, "out of memory"); goto done; }
    for (size_t i = 0; i < n; i++) {
        out->n_msgs = (int)i + 1;
        if (parse_message(json_object_array_get_idx(msgs, i), i, &out->msgs[i], e)) goto done;
    }
    if (parse_tools(root, &out->tools, e) || parse_thinking(root, &out->thinking, e)) goto done;
    if (parse_gen(root, &out->gen, 1, e)) goto done;
    if (out->gen.constrained && (out->tools.choice == TOOL_CHOICE_REQUIRED || out->tools.choice == TOOL_CHOICE_NAMED)) {
        bad(e, "tool_choice", "'%s' cannot force a tool call together with 'response_format'%s", "");
        goto done;
    }
    rc = 0;
done:
    json_object_put(root);
    if (rc) api_chat_request_free(out);
    return rc;
}

void api_chat_request_free(api_chat_request *r)
{
    for (int i = 0; i < r->n_msgs; i++) message_free(&r->msgs[i]);
    free(r->msgs);
    free(r->model);
    json_object_put(r->tools.list);
    free(r->tools.json);
    free(r->tools.name);
    gen_free(&r->gen);
    memset(r, 0, sizeof *r);
}

/* ---- completions ---- */

/* token ids: a non-empty array of integers in [0, INT32_MAX] (param names it: "prompt" or "prompt[i]") */
static int parse_ids(json_object *a, const char *param, api_prompt *out, api_error *e)
{
    size_t n = json_object_array_length(a);
    if (n == 0) return bad(e, param, "'%s' must not be empty%s", "");
    if (n > 0x7fffffff) return bad(e, param, "'%s' holds too many tokens%s", "");
    if (!(out->ids = malloc(n * sizeof *out->ids))) return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    out->n_ids = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(a, i);
        int64_t x = v && json_object_get_type(v) == json_type_int ? json_object_get_int64(v) : -1;
        if (x < 0 || x > INT32_MAX) {
            char where[64];
            snprintf(where, sizeof where, "%s[%zu]", param, i);
            return bad(e, where, "'%s' must be a token id (a non-negative integer)%s", "");
        }
        out->ids[i] = (int32_t)x;
    }
    return 0;
}

/* prompt: a string, an array of strings, an array of token ids, or an array of arrays of them */
static int parse_prompts(json_object *p, api_completion_request *out, api_error *e)
{
    if (!p) return api_fail(e, 400, "invalid_request_error", NULL, "prompt", "'prompt' is required");
    const char *shape = "'%s' must be a string, an array of strings, an array of token ids or an array of arrays of "
                        "token ids%s";
    enum json_type t = json_object_get_type(p);
    if (t != json_type_string && t != json_type_array) return bad(e, "prompt", shape, "");
    size_t n = t == json_type_string ? 1 : json_object_array_length(p);
    if (n == 0) return bad(e, "prompt", "'%s' must not be empty%s", "");
    json_object *first = t == json_type_string ? p : json_object_array_get_idx(p, 0);
    enum json_type ft = first ? json_object_get_type(first) : json_type_null;
    if (ft == json_type_int) n = 1; /* one prompt of ids */
    if (n > API_MAX_PROMPTS) return bad(e, "prompt", "'%s' may hold at most 2048 prompts%s", "");
    if (!(out->prompts = calloc(n, sizeof *out->prompts)))
        return api_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    out->n_prompts = (int)n;
    if (ft == json_type_int) return parse_ids(p, "prompt", &out->prompts[0], e);
    for (size_t i = 0; i < n; i++) {
        json_object *v = t == json_type_string ? p : json_object_array_get_idx(p, i);
        enum json_type vt = v ? json_object_get_type(v) : json_type_null;
        char where[32];
        snprintf(where, sizeof where, t == json_type_string ? "prompt" : "prompt[%zu]", i);
        if (vt != ft || (vt != json_type_string && vt != json_type_array)) return bad(e, "prompt", shape, "");
        int rc = vt == json_type_string ? dup_string(v, where, &out->prompts[i].text, &out->prompts[i].len, e)
                                        : parse_ids(v, where, &out->prompts[i], e);
        if (rc < 0) return -1;
    }
    return 0;
}

int json_parse_completion(const char *body, size_t len, api_completion_request *out, api_error *e)
{
    memset(out, 0, sizeof *out);
    json_object *root = parse_object(body, len, e);
    if (!root) return -1;
    int rc = -1;
    if (json_check_fields(root, BODY_COMPLETION, NULL, e) || parse_model(root, &out->model, e)) goto done;
    if (parse_prompts(field(root, "prompt"), out, e)) goto done;
    if (get_bool(root, "echo", &out->gen.echo, e) < 0) goto done;
    json_object *sfx = field(root, "suffix");
    if (sfx && json_object_get_type(sfx) != json_type_string) { bad(e, "suffix", "'%s' must be a string%s", ""); goto done; }
    if (sfx && json_object_get_string_len(sfx) > 0) { /* Gemma has no FIM tokens */
        api_fail(e, 400, "invalid_request_error", "unsupported_value", "suffix",
                 "this model has no fill-in-the-middle support: 'suffix' must be empty");
        goto done;
    }
    if (parse_gen(root, &out->gen, 0, e)) goto done;
    rc = 0;
done:
    json_object_put(root);
    if (rc) api_completion_request_free(out);
    return rc;
}

void api_completion_request_free(api_completion_request *r)
{
    for (int i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    free(r->model);
    gen_free(&r->gen);
    memset(r, 0, sizeof *r);
}
