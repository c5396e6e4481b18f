/* api_chat.c — POST /v1/chat/completions.
 *
 * The prompt is built so that message text can never become control tokens: the chat template
 * is rendered with a placeholder in place of each message's content, the template's own text
 * is tokenized with special tokens recognised, and each message's content is tokenized as plain
 * text (parse_special = 0) and spliced in between. A user who writes "<end_of_turn>" gets the
 * characters, not the turn boundary. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_respond.h"
#include "json_io.h"

#define PH_OPEN '\x1e'   /* placeholder: \x1e <message index> \x1f (never in template text) */
#define PH_CLOSE '\x1f'

typedef struct ids_buf { int32_t *p; int n, cap; } ids_buf;

static int encode_append(ids_buf *b, const tokenizer *t, const char *s, size_t n, int add_special, int parse_special)
{
    if (n == 0 && !add_special) return 0;
    for (;;) {
        int room = b->cap - b->n;
        int k = tokenizer_encode(t, s, n, add_special, parse_special, b->p + b->n, room);
        if (k < 0) return -1;
        if (k <= room) { b->n += k; return 0; }
        int cap = (b->n + k) * 2;
        int32_t *p = realloc(b->p, (size_t)cap * sizeof *p);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
}

static int render(const engine *e, const chat_msg *m, int n, char **out)
{
    size_t cap = 4096;
    for (;;) {
        char *buf = malloc(cap);
        if (!buf) return -1;
        int k = engine_chat_prompt(e, m, n, 1, buf, cap);
        if (k < 0) { free(buf); return -2; }
        if ((size_t)k < cap) { *out = buf; return k; }
        free(buf);
        cap = (size_t)k + 1;
    }
}

/* content as the template puts it (trimmed of surrounding whitespace, as Gemma's does) */
static void trimmed(const api_message *m, const char **s, size_t *n)
{
    const char *p = m->content;
    size_t len = m->len;
    while (len && isspace((unsigned char)*p)) { p++; len--; }
    while (len && isspace((unsigned char)p[len - 1])) len--;
    *s = p;
    *n = len;
}

static const char *role_name(enum api_role r)
{
    return r == ROLE_SYSTEM ? "system" : r == ROLE_USER ? "user" : "assistant";
}

/* Walks the placeholder rendering: template text (specials parsed) and contents (plain).
 * With ids == NULL it rebuilds the text instead, into txt, to check against the real rendering. */
static int splice(const engine *e, const char *tpl, size_t tlen, const api_message *msgs, int n,
                  ids_buf *ids, char *txt, size_t *txt_len)
{
    const tokenizer *t = engine_tokenizer(e);
    size_t i = 0, start = 0, out = 0;
    int first = 1;
    for (;;) {
        while (i < tlen && tpl[i] != PH_OPEN) i++;
        /* template text tpl[start..i) */
        if (ids) {
            if (encode_append(ids, t, tpl + start, i - start, first, 1)) return -1;
        } else {
            memcpy(txt + out, tpl + start, i - start);
            out += i - start;
        }
        first = 0;
        if (i == tlen) break;
        char *end;
        long k = strtol(tpl + i + 1, &end, 10);
        if (k < 0 || k >= n || *end != PH_CLOSE) return -1;
        const char *s;
        size_t len;
        trimmed(&msgs[k], &s, &len);
        if (ids) {
            if (encode_append(ids, t, s, len, 0, 0)) return -1;
        } else {
            memcpy(txt + out, s, len);
            out += len;
        }
        i = start = (size_t)(end - tpl) + 1;
    }
    if (txt_len) *txt_len = out;
    return 0;
}

static int build_prompt(const engine *e, const api_message *msgs, int n, ids_buf *ids, api_error *err)
{
    chat_msg *real = calloc((size_t)n, sizeof *real), *ph = calloc((size_t)n, sizeof *ph);
    char (*names)[24] = calloc((size_t)n, sizeof *names);
    char *tpl = NULL, *full = NULL, *check = NULL;
    int rc = -1;
    if (!real || !ph || !names) { api_fail(err, 500, "server_error", NULL, NULL, "out of memory"); goto done; }
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "%c%d%c", PH_OPEN, i, PH_CLOSE);
        real[i] = (chat_msg){ role_name(msgs[i].role), msgs[i].content };
        ph[i] = (chat_msg){ role_name(msgs[i].role), names[i] };
    }
    int tl = render(e, ph, n, &tpl);
    int fl = tl >= 0 ? render(e, real, n, &full) : tl;
    if (tl == -2 || fl == -2) {
        api_fail(err, 400, "invalid_request_error", NULL, "messages",
                 "this model's chat template takes one optional system message first, then user and assistant messages");
        goto done;
    }
    if (tl < 0 || fl < 0) { api_fail(err, 500, "server_error", NULL, NULL, "out of memory"); goto done; }
    /* the spliced text must be exactly what the template makes of the real messages */
    size_t longest = 0, holes = 0, cl;
    for (int i = 0; i < n; i++) if (msgs[i].len > longest) longest = msgs[i].len;
    for (int i = 0; i < tl; i++) holes += tpl[i] == PH_OPEN;
    check = malloc((size_t)tl + holes * longest + 1);
    if (!check) { api_fail(err, 500, "server_error", NULL, NULL, "out of memory"); goto done; }
    if (splice(e, tpl, (size_t)tl, msgs, n, NULL, check, &cl) || cl != (size_t)fl || memcmp(check, full, cl)) {
        api_fail(err, 500, "server_error", NULL, NULL, "the chat template changed message text in a way the server cannot tokenize safely");
        goto done;
    }
    if (splice(e, tpl, (size_t)tl, msgs, n, ids, NULL, NULL)) {
        api_fail(err, 500, "server_error", NULL, NULL, "tokenization failed");
        goto done;
    }
    rc = 0;
done:
    free(real); free(ph); free(names); free(tpl); free(full); free(check);
    return rc;
}

int api_chat(const api_ctx *c, http_req *r)
{
    static const api_shape shape = { "chat.completion", "chat.completion.chunk", "chatcmpl-", 1 };
    api_error e;
    char *body = NULL;
    size_t len;
    api_chat_request req;
    memset(&req, 0, sizeof req);
    if (api_require_ready(c, &e) || http_read_body(r, c->cfg->max_body, &body, &len, &e) ||
        json_parse_chat(body, len, &req, &e) || api_check_model(c, req.model, &e)) {
        free(body);
        api_chat_request_free(&req);
        return api_reply_error(r, &e);
    }
    free(body);
    ids_buf ids = { 0 };
    int rc;
    if (build_prompt(c->eng, req.msgs, req.n_msgs, &ids, &e)) rc = api_reply_error(r, &e);
    else rc = api_generate(c, r, &shape, &req.gen, ids.p, ids.n);
    free(ids.p);
    api_chat_request_free(&req);
    return rc;
}
