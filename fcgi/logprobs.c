/* logprobs.c — OpenAI logprobs objects (see logprobs.h). */
#include "logprobs.h"

#include <json-c/json.h>
#include <math.h>
#include <string.h>

/* a token's bytes as the detokenizer appends them mid-text */
static int piece(const tokenizer *t, int32_t id, char *buf, int cap)
{
    int k = tokenizer_piece(t, id, 0, buf, cap);
    return k < 0 ? 0 : k > cap ? cap : k;
}

/* the token as a JSON string: bytes that are not whole UTF-8 (a byte token's half of a character)
 * become U+FFFD, as OpenAI shows them; the exact bytes are in "bytes" */
static json_object *token_string(const char *b, int n)
{
    char out[4 * 256 + 4];
    int o = 0;
    for (int i = 0; i < n && o < (int)sizeof out - 4;) {
        unsigned char c = (unsigned char)b[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0 && i + len <= n;
        for (int k = 1; ok && k < len; k++) ok = ((unsigned char)b[i + k] >> 6) == 2;
        if (ok) { memcpy(out + o, b + i, (size_t)len); o += len; i += len; }
        else { memcpy(out + o, "\xef\xbf\xbd", 3); o += 3; i++; }
    }
    return json_object_new_string_len(out, o);
}

static json_object *bytes_array(const char *b, int n)
{
    json_object *a = json_object_new_array();
    for (int i = 0; i < n; i++) json_object_array_add(a, json_object_new_int((unsigned char)b[i]));
    return a;
}

/* -inf has no JSON form; OpenAI reports -9999.0 for tokens that cannot come */
static json_object *lp_number(float lp)
{
    return json_object_new_double(isfinite(lp) ? (double)lp : -9999.0);
}

static json_object *chat_entry(const tokenizer *t, int32_t id, float lp)
{
    char b[256];
    int n = piece(t, id, b, sizeof b);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "token", token_string(b, n));
    json_object_object_add(o, "logprob", lp_number(lp));
    json_object_object_add(o, "bytes", bytes_array(b, n));
    return o;
}

void logprobs_chat_add(json_object *o, const tokenizer *t, const gen_lp *e, int n, int top)
{
    json_object *content = json_object_object_get(o, "content");
    for (int i = 0; i < n; i++) {
        json_object *en = chat_entry(t, e[i].tok, e[i].lp.chosen);
        json_object *alts = json_object_new_array();
        for (int k = 0; k < top && k < e[i].lp.n_top; k++)
            json_object_array_add(alts, chat_entry(t, e[i].lp.top_id[k], e[i].lp.top_lp[k]));
        json_object_object_add(en, "top_logprobs", alts);
        json_object_array_add(content, en);
    }
}

json_object *logprobs_chat(const tokenizer *t, const gen_lp *e, int n, int top)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "content", json_object_new_array());
    logprobs_chat_add(o, t, e, n, top);
    return o;
}

void logprobs_completion_add(json_object *o, const tokenizer *t, const gen_lp *e, int n, int top, size_t *offset)
{
    json_object *tokens = json_object_object_get(o, "tokens"), *lps = json_object_object_get(o, "token_logprobs"),
                *tops = json_object_object_get(o, "top_logprobs"), *offs = json_object_object_get(o, "text_offset");
    for (int i = 0; i < n; i++) {
        char b[256];
        int k = piece(t, e[i].tok, b, sizeof b);
        json_object_array_add(tokens, token_string(b, k));
        json_object_array_add(lps, e[i].none ? NULL : lp_number(e[i].lp.chosen));
        json_object_array_add(offs, json_object_new_int64((int64_t)*offset));
        *offset += (size_t)k;
        if (e[i].none) { /* a prompt's first token: nothing before it to score it by */
            json_object_array_add(tops, NULL);
            continue;
        }
        json_object *alts = json_object_new_object();
        for (int a = 0; a < top && a < e[i].lp.n_top; a++) {
            char ab[256];
            int an = piece(t, e[i].lp.top_id[a], ab, sizeof ab);
            json_object *key = token_string(ab, an);
            json_object_object_add(alts, json_object_get_string(key), lp_number(e[i].lp.top_lp[a]));
            json_object_put(key);
        }
        json_object_array_add(tops, alts);
    }
}

json_object *logprobs_completion(const tokenizer *t, const gen_lp *e, int n, int top, size_t *offset)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "tokens", json_object_new_array());
    json_object_object_add(o, "token_logprobs", json_object_new_array());
    json_object_object_add(o, "top_logprobs", json_object_new_array());
    json_object_object_add(o, "text_offset", json_object_new_array());
    logprobs_completion_add(o, t, e, n, top, offset);
    return o;
}
