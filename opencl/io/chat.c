/* chat.c — the template table (which texts clgemma knows, which renderer and family each has), the choice
 * of renderer for a file, the output of a rendering (text plus control-token spans), its tokenization, and
 * Gemma 3's renderer.
 *
 * Gemma 3 (google/gemma-3-*-it's template): "<bos>", a leading system message's content plus "\n\n" put
 * before the first user turn's text (untrimmed), "<start_of_turn>{user|model}\n{trimmed content}<end_of_turn>\n"
 * per turn, user and assistant alternating from a user turn (else it raises), "<start_of_turn>model\n" as
 * the generation prompt. clgemma also refuses a system message after the first (the template would render a
 * "system" turn Gemma 3 never saw in training). */
#include "chat_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct chat_tpl_info {
    const char *name;
    chat_family family;
    uint64_t hash;   /* chat_template_hash of the text */
    size_t len;      /* its length less one trailing newline */
} chat_tpl_info;

static const chat_tpl_info tpl_info[CHAT_TPL_COUNT] = {
    [CHAT_TPL_GEMMA3] = { "gemma3", CHAT_GEMMA3, 0x1d7eb3182dbd4071ull, 1538 },
    [CHAT_TPL_GEMMA4] = { "gemma4", CHAT_GEMMA4, 0x8db03aa6cb1ffc2full, 12044 },
    [CHAT_TPL_GEMMA4_INTERLEAVED] = { "gemma4-interleaved", CHAT_GEMMA4, 0x1e244f9a64c9873full, 12751 },
    [CHAT_TPL_GEMMA4_31B] = { "gemma4-31b", CHAT_GEMMA4, 0xecf8ed96903a3852ull, 16447 },
    [CHAT_TPL_QWEN35] = { "qwen35", CHAT_QWEN35, 0xf07c510f47fbaca0ull, 7756 },
};

static const chat_kind family_default[] = { [CHAT_GEMMA3] = CHAT_TPL_GEMMA3, [CHAT_GEMMA4] = CHAT_TPL_GEMMA4_31B,
                                            [CHAT_QWEN35] = CHAT_TPL_QWEN35 };

/* control-token texts the templates write; template literals are split at these */
static const char *const specials_gemma3[] = { "<start_of_turn>", "<end_of_turn>", "<start_of_image>", NULL };
static const char *const specials_gemma4[] = {
    "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>", "<|tool>", "<tool|>", "<|tool_call>",
    "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>", "<|image|>", "<|audio|>", "<|video|>", NULL
};
/* Qwen's added tokens the template writes (<think> and the tool tags are added tokens, not plain text) */
static const char *const specials_qwen35[] = {
    "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
    "</tool_response>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", NULL
};
static const char *const *const family_specials[] = { [CHAT_GEMMA3] = specials_gemma3,
                                                      [CHAT_GEMMA4] = specials_gemma4,
                                                      [CHAT_QWEN35] = specials_qwen35 };

const char *chat_kind_name(chat_kind k) { return k < CHAT_TPL_COUNT ? tpl_info[k].name : "?"; }
chat_family chat_kind_family(chat_kind k) { return k < CHAT_TPL_COUNT ? tpl_info[k].family : CHAT_GEMMA3; }

uint64_t chat_template_hash(const char *s, size_t n)
{
    if (n && s[n - 1] == '\n') n--;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

chat_kind chat_pick(chat_family family, const char *tmpl, size_t n, char *note, size_t notelen)
{
    chat_kind def = family_default[family];
    if (notelen) note[0] = 0;
    if (!tmpl) return def;
    uint64_t h = chat_template_hash(tmpl, n);
    size_t len = n && tmpl[n - 1] == '\n' ? n - 1 : n;
    for (int k = 0; k < CHAT_TPL_COUNT; k++)
        if (tpl_info[k].hash == h && tpl_info[k].len == len) return (chat_kind)k;
    char why[200];
    if (chat_template_check(tmpl, n, why, sizeof why))
        snprintf(note, notelen, "tokenizer.chat_template does not parse (%s); chat uses clgemma's built-in %s template",
                 why, tpl_info[def].name);
    else
        snprintf(note, notelen,
                 "tokenizer.chat_template is not a template clgemma knows (%zu bytes, FNV-1a %016llx); "
                 "chat uses clgemma's built-in %s template", n, (unsigned long long)h, tpl_info[def].name);
    return def;
}

/* ---- output ---- */

void co_nomem(chat_out *o)
{
    if (o->failed) return;
    o->failed = CHAT_NOMEM;
    snprintf(o->err, o->errlen, "out of memory");
}

void co_fail(chat_out *o, const char *fmt, ...)
{
    if (o->failed) return;
    o->failed = CHAT_REFUSED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->err, o->errlen, fmt, ap);
    va_end(ap);
}

void co_data(chat_out *o, const char *s, size_t n)
{
    if (o->failed) return;
    sb_put(&o->t, s, n);
    if (o->t.oom) co_nomem(o);
}

static void add_span(chat_out *o, size_t off, size_t len)
{
    if (o->nsp == o->capsp) {
        int cap = o->capsp ? o->capsp * 2 : 64;
        chat_span *p = realloc(o->sp, (size_t)cap * sizeof *p);
        if (!p) { co_nomem(o); return; }
        o->sp = p;
        o->capsp = cap;
    }
    o->sp[o->nsp++] = (chat_span){ off, len };
}

void co_tpl(chat_out *o, const char *lit)
{
    while (*lit && !o->failed) {
        /* the earliest control-token text in the rest of the literal */
        const char *hit = NULL;
        size_t hl = 0;
        for (const char *const *sp = o->specials; sp && *sp; sp++) {
            const char *h = strstr(lit, *sp);
            if (h && (!hit || h < hit)) { hit = h; hl = strlen(*sp); }
        }
        size_t plain = hit ? (size_t)(hit - lit) : strlen(lit);
        co_data(o, lit, plain);
        if (!hit) return;
        size_t off = o->t.n;
        co_data(o, hit, hl);
        add_span(o, off, hl);
        lit = hit + hl;
    }
}

void co_special(chat_out *o, const char *s)
{
    size_t off = o->t.n, n = strlen(s);
    if (!n) return;
    co_data(o, s, n);
    if (!o->failed) add_span(o, off, n);
}

void co_str(chat_out *o, json_object *v, int strip)
{
    if (o->failed) return;
    if (py_is_str(v)) {
        const char *s = json_object_get_string(v);
        size_t n = (size_t)json_object_get_string_len(v);
        if (strip) py_strip(&s, &n);
        co_data(o, s, n);
        return;
    }
    strbuf t = { 0 };
    py_str(&t, v);
    if (t.oom) { co_nomem(o); sb_free(&t); return; }
    const char *s = t.p ? t.p : "";
    size_t n = t.n;
    if (strip) py_strip(&s, &n);
    co_data(o, s, n);
    sb_free(&t);
}

/* ---- Gemma 3 ---- */

void chat_render_gemma3(chat_out *o, json_object *msgs, const chat_opts *opt)
{
    int n = (int)json_object_array_length(msgs);
    if (opt->bos) co_special(o, opt->bos);
    if (n == 0) { co_fail(o, "messages is empty"); return; }
    json_object *m0 = json_object_array_get_idx(msgs, 0);
    int start = 0;
    strbuf prefix = { 0 };
    if (py_eq_str(py_get(m0, "role"), "system")) {
        json_object *c = py_get(m0, "content"), *t = PY_UNDEF;
        if (py_is_str(c)) t = c;
        else if (py_is_list(c) && json_object_array_length(c) > 0) t = py_get(json_object_array_get_idx(c, 0), "text");
        if (!py_is_str(t)) { co_fail(o, "messages[0]: a system message needs string content or a first text part"); return; }
        sb_put(&prefix, json_object_get_string(t), (size_t)json_object_get_string_len(t));
        sb_puts(&prefix, "\n\n");
        start = 1;
    }
    for (int i = start; i < n && !o->failed; i++) {
        json_object *m = json_object_array_get_idx(msgs, i), *role = py_get(m, "role");
        if (i > 0 && (py_eq_str(role, "system") || py_eq_str(role, "developer")))
            co_fail(o, "messages[%d]: Gemma 3 takes a system message only first", i);
        else if (py_eq_str(role, "user") != ((i - start) % 2 == 0))
            co_fail(o, "messages[%d]: Conversation roles must alternate user/assistant/user/assistant/...", i);
        else if (!py_is_str(role) && !py_eq_str(role, "assistant"))
            co_fail(o, "messages[%d]: role must be a string", i);
    }
    for (int i = start; i < n && !o->failed; i++) {
        json_object *m = json_object_array_get_idx(msgs, i), *role = py_get(m, "role"), *c = py_get(m, "content");
        co_tpl(o, "<start_of_turn>");
        if (py_eq_str(role, "assistant")) co_data(o, "model", 5);
        else co_str(o, role, 0);
        co_tpl(o, "\n");
        if (i == start && prefix.n) co_data(o, prefix.p, prefix.n);
        if (py_is_str(c)) co_str(o, c, 1);
        else if (py_is_list(c)) {
            for (size_t j = 0; j < json_object_array_length(c); j++) {
                json_object *it = json_object_array_get_idx(c, j), *ty = py_get(it, "type");
                if (py_eq_str(ty, "image")) co_tpl(o, "<start_of_image>");
                else if (py_eq_str(ty, "text")) co_str(o, py_get(it, "text"), 1);
            }
        } else if (c != PY_UNDEF && !py_is_map(c)) {
            co_fail(o, "messages[%d]: Invalid content type", i);
        }
        co_tpl(o, "<end_of_turn>\n");
    }
    if (prefix.oom) co_nomem(o);
    sb_free(&prefix);
    if (opt->add_generation_prompt) co_tpl(o, "<start_of_turn>model\n");
}

/* ---- rendering, tokenization ---- */

int chat_render(chat_kind k, json_object *messages, json_object *tools, const chat_opts *opt, chat_text *out,
                char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char dummy[1];
    chat_out o = { .err = errlen ? err : dummy, .errlen = errlen ? errlen : 1 };
    o.err[0] = 0;
    o.specials = family_specials[tpl_info[k < CHAT_TPL_COUNT ? k : 0].family];
    if (!messages || json_object_get_type(messages) != json_type_array) co_fail(&o, "messages must be an array");
    else if (k == CHAT_TPL_GEMMA3) chat_render_gemma3(&o, messages, opt);
    else if (k == CHAT_TPL_QWEN35) chat_render_qwen35(&o, messages, tools, opt);
    else chat_render_gemma4(&o, k, messages, tools, opt);
    if (!o.failed && !o.t.p) { /* an empty rendering still gets its terminator */
        o.t.p = calloc(1, 1);
        if (!o.t.p) co_nomem(&o);
    }
    if (o.failed) {
        sb_free(&o.t);
        free(o.sp);
        return o.failed;
    }
    out->text = o.t.p;
    out->len = o.t.n;
    out->special = o.sp;
    out->n_special = o.nsp;
    return 0;
}

void chat_text_free(chat_text *t)
{
    free(t->text);
    free(t->special);
    memset(t, 0, sizeof *t);
}

typedef struct idbuf { int32_t *p; int n, cap; } idbuf;

static int encode_append(idbuf *b, const tokenizer *tok, const char *s, size_t n, int parse_special)
{
    if (n == 0) return 0;
    for (;;) {
        int room = b->cap - b->n;
        int k = tokenizer_encode(tok, s, n, 0, parse_special, b->p + b->n, room);
        if (k < 0) return -1;
        if (k <= room) { b->n += k; return 0; }
        int cap = (b->n + k) * 2;
        int32_t *p = realloc(b->p, (size_t)cap * sizeof *p);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
}

int chat_tokenize(const chat_text *t, const tokenizer *tok, int32_t **ids)
{
    idbuf b = { 0 };
    size_t pos = 0;
    *ids = NULL;
    for (int i = 0; i <= t->n_special; i++) {
        size_t end = i < t->n_special ? t->special[i].off : t->len;
        if (encode_append(&b, tok, t->text + pos, end - pos, 0)) goto fail;
        if (i == t->n_special) break;
        if (encode_append(&b, tok, t->text + end, t->special[i].len, 1)) goto fail;
        pos = end + t->special[i].len;
    }
    if (!b.p && !(b.p = malloc(sizeof *b.p))) goto fail;
    *ids = b.p;
    return b.n;
fail:
    free(b.p);
    return -1;
}
