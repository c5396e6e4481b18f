/* grammar.h — a JSON Schema or an OpenAI tools array compiled to grammar nodes (grammar.c: the
 * builder, schema.c: JSON Schema, tools.c: tool calls) and the byte-level pushdown matcher that
 * runs them (matcher.c). Internal to opencl/constrain/.
 *
 * Two dialects, one flag per grammar: JSON (response_format) and Gemma 4's call syntax (tool
 * calls): <|tool_call>call:NAME{key:VALUE,...}<tool_call|>, strings as <|"|>raw text<|"|>, bare
 * keys in dictsort order, no whitespace. The three control tokens reach the matcher as the single
 * bytes G_BYTE_*, which never occur in UTF-8 text (so JSON grammars never take them). */
#ifndef CLGEMMA_GRAMMAR_H
#define CLGEMMA_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

/* limits that bound memory and work; beyond them the schema is refused (HTTP 400) */
#define G_MAX_NODES 4096
#define G_MAX_SCHEMA_DEPTH 32   /* nesting of schema objects in the schema text */
#define G_MAX_STACK 48          /* frames per thread: nesting of the output value, root included */
#define G_MAX_THREADS 8         /* live anyOf alternatives; more are dropped (still sound) */
#define G_MAX_FRAMES 192        /* frames of all threads together */
#define G_MAX_ENUM 1024         /* values of one enum */
#define G_MAX_LIT_BYTES 65536   /* serialized enum/const values and keys of one schema */
#define G_MAX_PROPS 256         /* properties of one object, functions of one tools array */
#define G_MAX_WINDOW 64         /* consecutive optional properties (candidate keys at one point) */
#define G_MAX_MIN 4096          /* minLength / minItems */
#define G_NUM_DIGITS 15         /* digits of an integer part or fraction */
#define G_EXP_DIGITS 2          /* digits of an exponent (keeps values finite in a double) */
#define G_WS_MAX 1              /* spaces allowed after ':' and ',' (JSON dialect) */
#define G_MAX_CALLS 8           /* tool calls in a row when parallel */
#define G_MAX_NAME 64           /* bytes of a function name, of a free object's bare key */
#define G_NONE 0xffffffffu

/* Gemma 4's control tokens as matcher bytes (vocab_trie.c maps the tokens found by text) */
#define G_BYTE_QUOTE 0xf8       /* <|"|> */
#define G_BYTE_CALL 0xf9        /* <|tool_call> */
#define G_BYTE_END 0xfa         /* <tool_call|> */
#define G_QUOTE_TEXT "<|\"|>"   /* refused inside strings: a parser of the rendered text would end there */
#define G_IDENT(c) (((c) >= '0' && (c) <= '9') || (((c) | 0x20) >= 'a' && ((c) | 0x20) <= 'z') || (c) == '_' || (c) == '.' || (c) == '-')

enum g_kind {
    G_ANYOF,  /* alternatives alt[first .. first+count) */
    G_REF,    /* target node (resolved $ref) */
    G_LIT,    /* one of the sorted serialized values lit[first .. first+count) */
    G_STR,    /* string, min..max characters (code points) */
    G_NUM,    /* JSON number */
    G_INT,    /* JSON number without fraction or exponent */
    G_OBJ,    /* declared properties prop[first .. first+count), in order, optional ones skippable */
    G_FOBJ,   /* object with any keys and any values */
    G_ARR,    /* prefix items alt[first .. first+count), then items (or none), min..max items */
    G_CALLS,  /* min..max tool calls; prop[first .. first+count): "call:NAME" keys sorted by bytes, node = arguments */
};

typedef struct g_node {
    uint8_t kind;
    uint8_t min_depth;  /* frames a finite value needs; 255: none is finite */
    uint32_t first, count;
    uint32_t min, max;  /* string characters / array items / calls; max G_NONE: unbounded */
    uint32_t items;     /* G_ARR: node of the items after the prefix, G_NONE: no more items */
    uint32_t target;    /* G_REF */
} g_node;

typedef struct g_prop {
    uint32_t key, key_len;  /* the key as written (JSON: without quotes, escaped; Gemma: raw), in bytes */
    uint32_t node;
    uint32_t next_req;      /* index (within the object) of the first required property at or after this one */
} g_prop;

typedef struct g_lit { uint32_t off, len; } g_lit;

/* builtin nodes present in every grammar */
enum { G_N_ANY = 0, G_N_STR, G_N_NUM, G_N_TFN, G_N_FOBJ, G_N_ARR, G_N_BUILTIN };

typedef struct grammar {
    g_node *nodes; uint32_t n_nodes;
    g_prop *props; uint32_t n_props;
    uint32_t *alts; uint32_t n_alts;
    g_lit *lits; uint32_t n_lits;
    char *bytes; uint32_t n_bytes;  /* literal texts and keys */
    uint32_t root;
    int gemma;                      /* Gemma 4's call syntax instead of JSON */
} grammar;

/* schema == NULL: any object. where: the message prefix ("response_format.json_schema.schema: ").
 * Returns 0 or -1 with a 400-ready message. */
int  grammar_compile(grammar *g, const char *schema, size_t len, const char *where, char *err, size_t errlen);
/* tools: an OpenAI tools array; only: NULL (any function) or one function's name; parallel: 1..G_MAX_CALLS
 * calls instead of exactly one (tools.c). Returns 0 or -1 with a 400-ready message. */
int  grammar_compile_tools(grammar *g, const char *tools, size_t len, const char *only, int parallel,
                           char *err, size_t errlen);
void grammar_free(grammar *g);

/* ---------------------------------------------------------------- builder (grammar.c) */

typedef struct g_build {
    grammar *g;
    const char *where;   /* prefix of the messages */
    char *err; size_t errlen;
    int failed;
    uint32_t cap_nodes, cap_props, cap_alts, cap_lits, cap_bytes;
} g_build;

/* an empty grammar of the dialect with its builtin nodes; -1 with the message */
int      gb_start(g_build *b, grammar *g, int gemma, const char *where, char *err, size_t errlen);
/* records the first failure (where + message); returns G_NONE */
uint32_t gb_fail(g_build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* *p holds at least need elements (capacity doubled); -1 when out of memory */
int      gb_grow(void **p, uint32_t *cap, uint32_t need, size_t elem);
uint32_t gb_node(g_build *b, enum g_kind kind);
uint32_t gb_bytes(g_build *b, const void *s, size_t len);        /* offset of the copy */
uint32_t gb_alts(g_build *b, const uint32_t *a, uint32_t n);     /* index of the first */
uint32_t gb_props(g_build *b, const g_prop *p, uint32_t n);      /* index of the first */
uint32_t gb_lit(g_build *b, uint32_t off, uint32_t len);         /* index of the new literal */
/* anyOf/$ref flattened, min_depth computed, root checked; 0 or -1 (the grammar is freed on failure) */
int      gb_finish(g_build *b, uint32_t root);

/* schema.c: one schema document (its own $ref scope) compiled into b; its node or G_NONE */
uint32_t schema_compile(g_build *b, struct json_object *doc);
/* a JSON text parsed for compiling (trailing whitespace allowed, UTF-8 checked, nesting bounded for
 * schemas plus extra_depth levels around them); NULL after gb_fail */
struct json_object *schema_parse(g_build *b, const char *text, size_t len, int extra_depth);
/* Python's str.lower() order of dict keys (jinja's dictsort) for ASCII and Latin-1 letters */
int      key_order(const char *a, size_t na, const char *b, size_t nb);

/* ---------------------------------------------------------------- matcher */

typedef struct g_frame {
    uint16_t node;
    uint8_t st;
    uint8_t aux;      /* whitespace run / UTF-8 continuation bytes still due / calls so far */
    uint32_t a, b;
    uint64_t m;
} g_frame;

typedef struct g_thread { uint16_t base, depth; } g_thread;

/* a set of threads (stacks of frames), each a way the text so far can continue */
typedef struct g_state {
    uint16_t nt, nf;
    g_thread th[G_MAX_THREADS];
    g_frame fr[G_MAX_FRAMES];
} g_state;

void g_state_init(g_state *s, const grammar *g);
void g_state_copy(g_state *dst, const g_state *src);
/* dst = src advanced by byte c; returns 0 when no thread survives */
int  g_step(const grammar *g, const g_state *src, unsigned char c, g_state *dst);
int  g_complete(const grammar *g, const g_state *s);
/* kinds of free text, where whole tokens of the kind's plain class are taken without a walk */
enum g_text {
    G_TEXT_JSON,   /* a JSON string's body: no quote, backslash or control byte */
    G_TEXT_GEMMA,  /* a Gemma string's body: no NUL, no G_QUOTE_TEXT */
    G_TEXT_KEY,    /* a Gemma free object's bare key: [A-Za-z0-9_.-] */
    G_TEXT_KINDS,
};
/* the free text being typed when there is one thread and it is in a string's body between
 * characters, or in a bare key: its enum g_text, *room = characters (key: bytes) it may still take
 * (G_NONE: unbounded) and *quoted = bytes of G_QUOTE_TEXT just typed (a token may not complete
 * it); -1 elsewhere */
int  g_free_text(const grammar *g, const g_state *s, uint32_t *room, uint32_t *quoted);

#endif
