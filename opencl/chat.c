/* chat.c — Gemma chat templates.
 * Gemma 3: "<start_of_turn>{user|model}\n{content}<end_of_turn>\n" per turn; a system message is
 * folded into the first user turn followed by a blank line; content is trimmed of surrounding
 * whitespace as the reference template does; the generation prompt is "<start_of_turn>model\n".
 * Gemma 4 (docs/GEMMA4.md §6, thinking off): "<|turn>{system|user|model}\n{content}<turn|>\n" per
 * turn; a system (or developer) message gets its own turn; a model turn drops its thoughts (the
 * text up to the last "<channel|>"); content is trimmed; the generation prompt is
 * "<|turn>model\n<|channel>thought\n<channel|>" (an empty thought channel: thinking off). */
#include "chat.h"

#include <ctype.h>
#include <string.h>

chat_family chat_family_from_arch(const char *arch)
{
    return strcmp(arch, "gemma4") == 0 ? CHAT_GEMMA4 : CHAT_GEMMA3;
}

typedef struct sbuf { char *p; size_t cap, len; } sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->len < b->cap) {
        size_t room = b->cap - 1 - b->len;
        memcpy(b->p + b->len, s, n < room ? n : room);
    }
    b->len += n;
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void put_trimmed(sbuf *b, const char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)*s)) { s++; n--; }
    while (n && isspace((unsigned char)s[n - 1])) n--;
    put(b, s, n);
}

static int format_gemma4(const chat_msg *msgs, int n, int add_generation_prompt, char *out, size_t cap)
{
    sbuf b = { out, cap, 0 };
    for (int i = 0; i < n; i++) {
        const char *r = msgs[i].role, *c = msgs[i].content;
        if (!r || !c) return -1;
        const char *turn;
        if (strcmp(r, "system") == 0 || strcmp(r, "developer") == 0) {
            if (i != 0) return -1; /* only a leading system message */
            turn = "system";
        } else if (strcmp(r, "user") == 0) {
            turn = "user";
        } else if (strcmp(r, "assistant") == 0 || strcmp(r, "model") == 0) {
            turn = "model";
            const char *t = c, *hit;
            while ((hit = strstr(t, "<channel|>")) != NULL) t = hit + strlen("<channel|>");
            c = t;
        } else {
            return -1;
        }
        puts_(&b, "<|turn>");
        puts_(&b, turn);
        puts_(&b, "\n");
        put_trimmed(&b, c);
        puts_(&b, "<turn|>\n");
    }
    if (add_generation_prompt) puts_(&b, "<|turn>model\n<|channel>thought\n<channel|>");
    if (cap) out[b.len < cap ? b.len : cap - 1] = 0;
    return (int)b.len;
}

int chat_format(chat_family fam, const chat_msg *msgs, int n, int add_generation_prompt, char *out, size_t cap)
{
    if (fam == CHAT_GEMMA4) return format_gemma4(msgs, n, add_generation_prompt, out, cap);
    sbuf b = { out, cap, 0 };
    int i = 0;
    const char *system = NULL;
    if (n > 0 && msgs[0].role && strcmp(msgs[0].role, "system") == 0) { system = msgs[0].content; i = 1; }
    int first = 1;
    for (; i < n; i++) {
        const char *r = msgs[i].role;
        if (!r || !msgs[i].content) return -1;
        const char *turn;
        if (strcmp(r, "user") == 0) turn = "user";
        else if (strcmp(r, "assistant") == 0 || strcmp(r, "model") == 0) turn = "model";
        else return -1; /* a second system message or an unknown role */
        puts_(&b, "<start_of_turn>");
        puts_(&b, turn);
        puts_(&b, "\n");
        if (first && system) {
            put_trimmed(&b, system);
            puts_(&b, "\n\n");
        }
        first = 0;
        put_trimmed(&b, msgs[i].content);
        puts_(&b, "<end_of_turn>\n");
    }
    if (first && system) { /* only a system message: still show it as a user turn */
        puts_(&b, "<start_of_turn>user\n");
        put_trimmed(&b, system);
        puts_(&b, "\n\n<end_of_turn>\n");
    }
    if (add_generation_prompt) puts_(&b, "<start_of_turn>model\n");
    if (cap) out[b.len < cap ? b.len : cap - 1] = 0;
    return (int)b.len;
}
