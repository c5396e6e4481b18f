/* chat_reply.c — the reply splitter (chat_reply.h): a small state machine over the generated text that
 * holds back only what may still turn out to be a marker, and Gemma 4's call syntax parsed into JSON. */
#include "chat_reply.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

enum state { ST_TEXT, ST_CHANNEL, ST_THOUGHT, ST_CALL };

/* the markers of REPLY_GEMMA4 and what each does in which state */
enum mark { M_CHAN_OPEN, M_CHAN_CLOSE, M_CALL_OPEN, M_CALL_CLOSE, M_COUNT };
static const char *const marks[M_COUNT] = { "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>" };

struct chat_reply {
    reply_syntax syntax;
    int tools;
    enum state st;
    char *buf;          /* held text: a possible marker's start, a channel name, a call body */
    size_t n, cap;
    int calls;
};

int chat_reply_create(chat_reply **out, reply_syntax syntax, int tools)
{
    chat_reply *r = calloc(1, sizeof *r);
    *out = r;
    if (!r) return -1;
    r->syntax = syntax;
    r->tools = tools;
    return 0;
}

void chat_reply_destroy(chat_reply *r)
{
    if (!r) return;
    free(r->buf);
    free(r);
}

int chat_reply_calls(const chat_reply *r) { return r->calls; }

static int hold(chat_reply *r, const char *s, size_t n)
{
    if (r->n + n + 1 > r->cap) {
        size_t cap = (r->n + n + 1) * 2;
        char *p = realloc(r->buf, cap);
        if (!p) return -1;
        r->buf = p;
        r->cap = cap;
    }
    memcpy(r->buf + r->n, s, n);
    r->n += n;
    r->buf[r->n] = 0;
    return 0;
}

static int emit(reply_fn fn, void *ctx, reply_part part, const char *s, size_t n, const char *name)
{
    if (!n && part != REPLY_TOOL_CALL) return 0;
    reply_event ev = { part, s, n, name };
    return fn(ctx, &ev);
}

/* the markers that act in state st (tool calls only when they are parsed) */
static int active(const chat_reply *r, enum state st, int m)
{
    switch (st) {
    case ST_TEXT: return m == M_CHAN_OPEN || (m == M_CALL_OPEN && r->tools);
    case ST_THOUGHT: return m == M_CHAN_CLOSE;
    case ST_CALL: return m == M_CALL_CLOSE;
    case ST_CHANNEL: return m == M_CHAN_CLOSE;
    }
    return 0;
}

/* the earliest active marker in s[0..n): its offset and index; else the offset from which s's tail
 * may still begin one (n when none), with *m = -1 */
static size_t find_mark(const chat_reply *r, const char *s, size_t n, int *m)
{
    *m = -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '<') continue;
        for (int k = 0; k < M_COUNT; k++) {
            if (!active(r, r->st, k)) continue;
            size_t l = strlen(marks[k]), have = n - i < l ? n - i : l;
            if (memcmp(s + i, marks[k], have)) continue;
            if (have == l) { *m = k; return i; }
            return i; /* a marker's beginning at the end: wait for more */
        }
    }
    return n;
}

static reply_part text_part(enum state st) { return st == ST_THOUGHT ? REPLY_REASONING : REPLY_CONTENT; }

static int heal_call(const char *s, size_t n, char **name, char **args);

/* a finished call body: one tool call, or (malformed) its text as content; a call cut off (max_tokens)
 * is what of it parses once closed, as OpenAI returns a cut call, or nothing before its name is whole */
static int call_done(chat_reply *r, reply_fn fn, void *ctx, int closed)
{
    char *name = NULL, *args = NULL;
    int rc = 0;
    const char *body = r->buf ? r->buf : "";
    if (reply_gemma4_call(body, r->n, &name, &args) == 0 || (!closed && heal_call(body, r->n, &name, &args) == 0)) {
        r->calls++;
        rc = emit(fn, ctx, REPLY_TOOL_CALL, args, strlen(args), name);
    } else if (!closed) {
        /* cut before anything whole: the finish reason ("length") says so */
    } else {
        rc = emit(fn, ctx, REPLY_CONTENT, marks[M_CALL_OPEN], strlen(marks[M_CALL_OPEN]), NULL);
        if (!rc) rc = emit(fn, ctx, REPLY_CONTENT, r->buf ? r->buf : "", r->n, NULL);
        if (!rc && closed) rc = emit(fn, ctx, REPLY_CONTENT, marks[M_CALL_CLOSE], strlen(marks[M_CALL_CLOSE]), NULL);
    }
    free(name);
    free(args);
    r->n = 0;
    return rc;
}

int chat_reply_push(chat_reply *r, const char *s, size_t n, reply_fn fn, void *ctx)
{
    if (r->syntax == REPLY_PLAIN) return emit(fn, ctx, REPLY_CONTENT, s, n, NULL);
    /* work on held + new text; what stays undecided is held again */
    if (hold(r, s, n)) return -1;
    char *work = r->buf;
    size_t len = r->n, pos = 0;
    r->buf = NULL;
    r->n = r->cap = 0;
    int rc = 0;
    while (!rc && pos < len) {
        if (r->st == ST_CHANNEL) { /* the channel's name runs to its newline */
            const char *nl = memchr(work + pos, '\n', len - pos);
            const char *cl = memmem(work + pos, len - pos, marks[M_CHAN_CLOSE], strlen(marks[M_CHAN_CLOSE]));
            if (cl && (!nl || cl < nl)) { r->st = ST_TEXT; pos = (size_t)(cl - work) + strlen(marks[M_CHAN_CLOSE]); }
            else if (nl) { r->st = ST_THOUGHT; pos = (size_t)(nl - work) + 1; }
            else { rc = hold(r, work + pos, len - pos); pos = len; }
            continue;
        }
        int m;
        size_t at = pos + find_mark(r, work + pos, len - pos, &m);
        if (r->st == ST_CALL) rc = hold(r, work + pos, at - pos);
        else rc = emit(fn, ctx, text_part(r->st), work + pos, at - pos, NULL);
        if (rc) break;
        if (m < 0) { /* a marker's possible beginning, or nothing: it waits for the next piece */
            rc = hold(r, work + at, len - at);
            break;
        }
        pos = at + strlen(marks[m]);
        if (m == M_CHAN_OPEN) r->st = ST_CHANNEL;
        else if (m == M_CHAN_CLOSE) r->st = ST_TEXT;
        else if (m == M_CALL_OPEN) r->st = ST_CALL;
        else { r->st = ST_TEXT; rc = call_done(r, fn, ctx, 1); }
    }
    free(work);
    return rc;
}

int chat_reply_finish(chat_reply *r, reply_fn fn, void *ctx)
{
    int rc = 0;
    if (r->st == ST_CALL) rc = call_done(r, fn, ctx, 0);
    else if (r->st != ST_CHANNEL) rc = emit(fn, ctx, text_part(r->st), r->buf ? r->buf : "", r->n, NULL);
    r->n = 0;
    r->st = ST_TEXT;
    return rc;
}

/* ---- Gemma 4's call syntax ---- */

static const char QUOTE[] = "<|\"|>";
#define QLEN 5
/* the arguments object and its values nest at most json-c's default parse depth (32), so a client and
 * our own request parser read back every call we return */
#define MAX_NEST 31

typedef struct cursor { const char *s, *end; int depth; } cursor;

static int at_quote(const cursor *c) { return c->end - c->s >= QLEN && !memcmp(c->s, QUOTE, QLEN); }

static json_object *value(cursor *c);

/* a parsed null (json-c's null is a NULL pointer, which here means "malformed") */
static const char null_tag;
#define JNULL ((json_object *)(void *)&null_tag)
static json_object *unwrap(json_object *v) { return v == JNULL ? NULL : v; }

/* <|"|>raw<|"|>: the closing quote is the first one followed by what may follow a value (a string may
 * hold the quote text itself, which the template does not escape) */
static json_object *quoted(cursor *c)
{
    const char *p = c->s + QLEN, *e;
    for (;; p = e + 1) {
        e = memmem(p, (size_t)(c->end - p), QUOTE, QLEN);
        if (!e) return NULL;
        if (e + QLEN == c->end || strchr(",}]:", e[QLEN])) break;
    }
    json_object *v = json_object_new_string_len(c->s + QLEN, (int)(e - c->s - QLEN));
    c->s = e + QLEN;
    return v;
}

/* JSON's number syntax */
static int is_number(const char *w)
{
    const char *p = w;
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return 0;
    if (*p == '.') {
        if (!(*++p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    return !*p;
}

/* a bare word up to a delimiter: a number, true/false/null/None, else the word as a string */
static json_object *bare(cursor *c)
{
    const char *b = c->s;
    while (c->s < c->end && !strchr(",}]:", *c->s) && !at_quote(c)) c->s++;
    size_t n = (size_t)(c->s - b);
    if (!n) return NULL;
    char w[64];
    if (n < sizeof w) {
        memcpy(w, b, n);
        w[n] = 0;
        if (!strcmp(w, "true")) return json_object_new_boolean(1);
        if (!strcmp(w, "false")) return json_object_new_boolean(0);
        if (!strcmp(w, "null") || !strcmp(w, "None")) return JNULL;
        if (is_number(w)) return json_tokener_parse(w);
    }
    return json_object_new_string_len(b, (int)n);
}

static json_object *object(cursor *c)
{
    c->s++; /* { */
    json_object *o = json_object_new_object();
    if (!o) return NULL;
    if (c->s < c->end && *c->s == '}') { c->s++; return o; }
    for (;;) {
        char *key = NULL;
        if (at_quote(c)) {
            json_object *k = quoted(c);
            if (k) key = strdup(json_object_get_string(k));
            json_object_put(k);
        } else {
            const char *b = c->s;
            while (c->s < c->end && *c->s != ':' && !strchr(",{}[]", *c->s)) c->s++;
            if (c->s > b) key = strndup(b, (size_t)(c->s - b));
        }
        if (!key || c->s >= c->end || *c->s != ':') { free(key); break; }
        c->s++;
        json_object *v = value(c);
        if (!v) { free(key); break; }
        json_object_object_add(o, key, unwrap(v));
        free(key);
        if (c->s < c->end && *c->s == ',') { c->s++; continue; }
        if (c->s < c->end && *c->s == '}') { c->s++; return o; }
        break;
    }
    json_object_put(o);
    return NULL;
}

static json_object *list(cursor *c)
{
    c->s++; /* [ */
    json_object *a = json_object_new_array();
    if (!a) return NULL;
    if (c->s < c->end && *c->s == ']') { c->s++; return a; }
    for (;;) {
        json_object *v = value(c);
        if (!v || json_object_array_add(a, unwrap(v))) { json_object_put(unwrap(v)); break; }
        if (c->s < c->end && *c->s == ',') { c->s++; continue; }
        if (c->s < c->end && *c->s == ']') { c->s++; return a; }
        break;
    }
    json_object_put(a);
    return NULL;
}

static json_object *value(cursor *c)
{
    if (c->s >= c->end || ++c->depth > MAX_NEST) return NULL;
    json_object *v = at_quote(c) ? quoted(c) : *c->s == '{' ? object(c) : *c->s == '[' ? list(c) : bare(c);
    c->depth--;
    return v;
}

/* s[0..n) closed: the open quote, lists and objects ended, into out (malloc'd) */
static char *closed_text(const char *s, size_t n)
{
    char stack[MAX_NEST];
    int depth = 0, quote = 0;
    for (size_t i = 0; i < n; i++) {
        if (n - i >= QLEN && !memcmp(s + i, QUOTE, QLEN)) { quote = !quote; i += QLEN - 1; continue; }
        if (quote) continue;
        if ((s[i] == '{' || s[i] == '[') && depth < MAX_NEST) stack[depth++] = s[i] == '{' ? '}' : ']';
        else if ((s[i] == '}' || s[i] == ']') && depth > 0) depth--;
    }
    char *out = malloc(n + QLEN + (size_t)depth + 1);
    if (!out) return NULL;
    memcpy(out, s, n);
    size_t k = n;
    if (quote) { memcpy(out + k, QUOTE, QLEN); k += QLEN; }
    while (depth > 0) out[k++] = stack[--depth];
    out[k] = 0;
    return out;
}

/* the longest prefix of a cut call body (within its last 256 bytes) that parses once closed */
static int heal_call(const char *s, size_t n, char **name, char **args)
{
    for (size_t cut = n; cut > 5 && cut + 256 >= n; cut--) {
        char *t = closed_text(s, cut);
        if (!t) return -1;
        int rc = reply_gemma4_call(t, strlen(t), name, args);
        free(t);
        if (rc == 0) return 0;
    }
    return -1;
}

int reply_gemma4_call(const char *s, size_t n, char **name, char **args_json)
{
    *name = *args_json = NULL;
    cursor c = { s, s + n, 0 };
    if (n < 5 || memcmp(s, "call:", 5)) return -1;
    c.s += 5;
    const char *b = c.s;
    while (c.s < c.end && *c.s != '{') c.s++;
    if (c.s == b || c.s == c.end) return -1;
    for (const char *p = b; p < c.s; p++)
        if ((unsigned char)*p <= ' ' || strchr("<>{}[]:,\"", *p)) return -1;
    const char *brace = c.s;
    json_object *args = object(&c);
    if (!args || c.s != c.end) { json_object_put(args); return -1; }
    *name = strndup(b, (size_t)(brace - b));
    const char *t = json_object_to_json_string_ext(args, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    *args_json = t ? strdup(t) : NULL;
    json_object_put(args);
    if (!*name || !*args_json) { free(*name); free(*args_json); *name = *args_json = NULL; return -1; }
    return 0;
}
