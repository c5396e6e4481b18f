/* chat_check.c — a structural check of a chat template's text, so that a file whose
 * tokenizer.chat_template could not even be parsed by jinja2 is reported as broken rather than merely
 * unknown: tags closed ({{ }}, {% %}, {# #}, string literals inside them), block statements balanced with
 * their end tags, elif/else where they belong, statement names jinja2 (with transformers' loopcontrols and
 * generation extensions) knows. Expressions themselves are not parsed. */
#include "chat.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define MAX_NEST 64

typedef struct open_block { char name[16]; int line; } open_block;

/* block statements and what closes them */
static const char *const blocks[][2] = {
    { "if", "endif" }, { "for", "endfor" }, { "macro", "endmacro" }, { "call", "endcall" },
    { "filter", "endfilter" }, { "block", "endblock" }, { "with", "endwith" },
    { "autoescape", "endautoescape" }, { "set", "endset" }, { "generation", "endgeneration" },
    { "raw", "endraw" },
};
static const char *const simple[] = { "extends", "include", "import", "from", "print", "break", "continue" };

static int line_at(const char *s, const char *p)
{
    int l = 1;
    for (; s < p; s++) l += *s == '\n';
    return l;
}

/* the end of a tag opened at p (after its two-character opener): the closer's first character, NULL if
 * none; string literals may hold the closer */
static const char *tag_end(const char *p, const char *end, char close)
{
    char q = 0;
    for (; p + 1 < end; p++) {
        if (q) {
            if (*p == '\\') p++;
            else if (*p == q) q = 0;
        } else if (*p == '\'' || *p == '"') {
            q = *p;
        } else if (*p == close && p[1] == '}') {
            return p;
        }
    }
    return NULL;
}

/* `{% set x %}` opens a block; `{% set x = ... %}` does not */
static int set_has_assign(const char *p, const char *e)
{
    char q = 0;
    for (; p < e; p++) {
        if (q) { if (*p == '\\') p++; else if (*p == q) q = 0; continue; }
        if (*p == '\'' || *p == '"') q = *p;
        else if (*p == '=' && p[1] != '=' && (p[-1] != '=' && p[-1] != '!' && p[-1] != '<' && p[-1] != '>')) return 1;
    }
    return 0;
}

int chat_template_check(const char *s, size_t n, char *err, size_t errlen)
{
    const char *p = s, *end = s + n;
    open_block st[MAX_NEST];
    int depth = 0;
    while (p + 1 < end) {
        if (p[0] != '{' || (p[1] != '{' && p[1] != '%' && p[1] != '#')) { p++; continue; }
        const char *open = p;
        char kind = p[1];
        if (kind == '#') {
            const char *c = memmem(p + 2, (size_t)(end - p - 2), "#}", 2);
            if (!c) { snprintf(err, errlen, "line %d: '{#' comment never closed", line_at(s, open)); return -1; }
            p = c + 2;
            continue;
        }
        const char *c = tag_end(p + 2, end, kind == '{' ? '}' : '%');
        if (!c) {
            snprintf(err, errlen, "line %d: '%s' never closed", line_at(s, open), kind == '{' ? "{{" : "{%");
            return -1;
        }
        p = c + 2;
        if (kind == '{') continue;
        /* the statement's name */
        const char *w = open + 2;
        if (w < c && (*w == '-' || *w == '+')) w++;
        while (w < c && isspace((unsigned char)*w)) w++;
        char name[16] = { 0 };
        size_t k = 0;
        while (w + k < c && (isalnum((unsigned char)w[k]) || w[k] == '_') && k < sizeof name - 1) { name[k] = w[k]; k++; }
        int line = line_at(s, open);
        if (!k) { snprintf(err, errlen, "line %d: a '{%%' tag without a statement", line); return -1; }
        if (!strcmp(name, "elif") || !strcmp(name, "else")) {
            int ok = depth && (!strcmp(st[depth - 1].name, "if") || (!strcmp(name, "else") && !strcmp(st[depth - 1].name, "for")));
            if (!ok) { snprintf(err, errlen, "line %d: '{%% %s %%}' outside an if%s", line, name, !strcmp(name, "else") ? " or for" : ""); return -1; }
            continue;
        }
        int b = -1, e = -1;
        for (int i = 0; i < (int)(sizeof blocks / sizeof blocks[0]); i++) {
            if (!strcmp(name, blocks[i][0])) b = i;
            if (!strcmp(name, blocks[i][1])) e = i;
        }
        if (b >= 0 && !(!strcmp(name, "set") && set_has_assign(w + k, c))) {
            if (depth == MAX_NEST) { snprintf(err, errlen, "line %d: blocks nested more than %d deep", line, MAX_NEST); return -1; }
            snprintf(st[depth].name, sizeof st[depth].name, "%s", name);
            st[depth++].line = line;
            if (!strcmp(name, "raw")) { /* its body is text up to {% endraw %} */
                const char *q = p;
                for (;;) {
                    const char *t = memmem(q, (size_t)(end - q), "{%", 2);
                    if (!t) { snprintf(err, errlen, "line %d: '{%% raw %%}' never closed", line); return -1; }
                    const char *u = t + 2;
                    if (u < end && (*u == '-' || *u == '+')) u++;
                    while (u < end && isspace((unsigned char)*u)) u++;
                    if ((size_t)(end - u) >= 6 && !memcmp(u, "endraw", 6)) { p = t; break; }
                    q = t + 2;
                }
            }
            continue;
        }
        if (e >= 0) {
            if (!depth) { snprintf(err, errlen, "line %d: '{%% %s %%}' without an open '{%% %s %%}'", line, name, blocks[e][0]); return -1; }
            if (strcmp(st[depth - 1].name, blocks[e][0])) {
                snprintf(err, errlen, "line %d: '{%% %s %%}' closes the '{%% %s %%}' of line %d", line, name,
                         st[depth - 1].name, st[depth - 1].line);
                return -1;
            }
            depth--;
            continue;
        }
        int known = b >= 0;
        for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++) known |= !strcmp(name, simple[i]);
        if (!known) { snprintf(err, errlen, "line %d: unknown statement '%s'", line, name); return -1; }
    }
    if (depth) {
        snprintf(err, errlen, "line %d: '{%% %s %%}' never closed", st[depth - 1].line, st[depth - 1].name);
        return -1;
    }
    return 0;
}
