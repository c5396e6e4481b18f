/* chat_int.h — internals of the chat renderers (chat.c, chat_gemma4.c): the output under construction and
 * Python's view of JSON values, i.e. what jinja2 prints, compares, sorts and trims (chat_py.c). */
#ifndef CLGEMMA_CHAT_INT_H
#define CLGEMMA_CHAT_INT_H

#include <json-c/json.h>
#include <stdarg.h>

#include "chat.h"

/* ---- growable byte string; oom is sticky ---- */
typedef struct strbuf { char *p; size_t n, cap; int oom; } strbuf;
void sb_put(strbuf *b, const char *s, size_t n);
void sb_puts(strbuf *b, const char *s);
void sb_free(strbuf *b);

/* ---- the rendering: text plus spans of control-token text; the first error sticks ---- */
typedef struct chat_out {
    strbuf t;
    chat_span *sp;
    int nsp, capsp;
    const char *const *specials; /* control-token texts template literals may hold (NULL-terminated) */
    int failed;                  /* 0, CHAT_REFUSED or CHAT_NOMEM */
    char *err;
    size_t errlen;
    int depth;                   /* nesting of values being formatted */
} chat_out;

enum { CHAT_REFUSED = -1, CHAT_NOMEM = -2 };

/* conversation text: spliced as plain text, never parsed for control tokens */
void co_data(chat_out *o, const char *s, size_t n);
/* template text: each control-token text in it becomes a span */
void co_tpl(chat_out *o, const char *lit);
/* the bos_token text: one control token */
void co_special(chat_out *o, const char *s);
/* the template refuses the conversation (as jinja2 raises); the first message wins */
void co_fail(chat_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void co_nomem(chat_out *o);
/* Python's str(v) as conversation text, optionally stripped of surrounding whitespace */
void co_str(chat_out *o, json_object *v, int strip);

/* ---- Python values: a json_object, NULL for None, PY_UNDEF for jinja2's Undefined ---- */
extern const char py_undef_tag;
#define PY_UNDEF ((json_object *)(void *)&py_undef_tag)

/* v[key]: the value, PY_UNDEF when v is not an object or lacks key (v itself must not be PY_UNDEF) */
json_object *py_get(json_object *v, const char *key);
/* v.get(key) of a dict: None (NULL) when missing */
json_object *py_dict_get(json_object *v, const char *key);
int py_truthy(json_object *v);
int py_is_str(json_object *v);
int py_is_map(json_object *v);
int py_is_list(json_object *v);
/* jinja2's "is sequence" / "is iterable": lists, dicts, strings and Undefined */
int py_is_seq(json_object *v);
int py_eq(json_object *a, json_object *b);
int py_eq_str(json_object *v, const char *s);
/* str(v) and repr(v) appended to b (Undefined prints nothing) */
void py_str(strbuf *b, json_object *v);
void py_repr(strbuf *b, json_object *v);
/* repr of a float: shortest round-trip digits in Python's layout ("1e+16", "0.1", "100.0") */
void py_float_repr(char out[40], double d);
/* json.dumps(v, ensure_ascii=False), as transformers' tojson filter writes it, appended to b */
void py_tojson(strbuf *b, json_object *v);
/* str.strip() bounds (Python's Unicode whitespace) */
void py_strip(const char **s, size_t *n);
/* str.upper() / str.lower() appended to b (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic, fullwidth) */
void py_case(strbuf *b, const char *s, size_t n, int upper);

/* dict | dictsort: entries sorted by lower-cased key, ties in dict order; NULL with n 0 when empty */
typedef struct py_item { const char *key; size_t klen; json_object *val; } py_item;
py_item *py_dictsort(json_object *obj, int *n, int *oom);

/* the elements of a for loop over v as str() texts: list elements, dict keys, string characters.
 * Returns the count, or -1 when v is not iterable (a TypeError). */
typedef void (*py_each_fn)(chat_out *o, const char *s, size_t n, int index, int last, void *ctx);
int py_each_str(chat_out *o, json_object *v, py_each_fn fn, void *ctx);

/* renderers */
void chat_render_gemma3(chat_out *o, json_object *messages, const chat_opts *opt);
void chat_render_gemma4(chat_out *o, chat_kind k, json_object *messages, json_object *tools, const chat_opts *opt);
void chat_render_qwen35(chat_out *o, json_object *messages, json_object *tools, const chat_opts *opt);

#endif
