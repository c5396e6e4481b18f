/* grammar.h — a JSON Schema compiled to grammar nodes (schema.c) and the byte-level pushdown
 * matcher that runs them (matcher.c). Internal to opencl/constrain/. */
#ifndef CLGEMMA_GRAMMAR_H
#define CLGEMMA_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

/* limits that bound memory and work; beyond them the schema is refused (HTTP 400) */
#define G_MAX_NODES 4096
#define G_MAX_SCHEMA_DEPTH 32   /* nesting of schema objects in the schema text */
#define G_MAX_STACK 48          /* frames per thread: nesting of the output value, root included */
#define G_MAX_THREADS 8         /* live anyOf alternatives; more are dropped (still sound) */
#define G_MAX_FRAMES 192        /* frames of all threads together */
#define G_MAX_ENUM 1024         /* values of one enum */
#define G_MAX_LIT_BYTES 65536   /* serialized enum/const values and keys of one schema */
#define G_MAX_PROPS 256         /* properties of one object */
#define G_MAX_WINDOW 64         /* consecutive optional properties (candidate keys at one point) */
#define G_MAX_MIN 4096          /* minLength / minItems */
#define G_NUM_DIGITS 15         /* digits of an integer part or fraction */
#define G_EXP_DIGITS 2          /* digits of an exponent (keeps values finite in a double) */
#define G_WS_MAX 1              /* spaces allowed after ':' and ',' */
#define G_NONE 0xffffffffu

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
};

typedef struct g_node {
    uint8_t kind;
    uint8_t min_depth;  /* frames a finite value needs; 255: none is finite */
    uint32_t first, count;
    uint32_t min, max;  /* string characters / array items; max G_NONE: unbounded */
    uint32_t items;     /* G_ARR: node of the items after the prefix, G_NONE: no more items */
    uint32_t target;    /* G_REF */
} g_node;

typedef struct g_prop {
    uint32_t key, key_len;  /* the key's JSON text without quotes, in lit_bytes */
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
} grammar;

/* schema == NULL: any object. Returns 0 or -1 with a 400-ready message. */
int  grammar_compile(grammar *g, const char *schema, size_t len, char *err, size_t errlen);
void grammar_free(grammar *g);

/* ---------------------------------------------------------------- matcher */

typedef struct g_frame {
    uint16_t node;
    uint8_t st;
    uint8_t aux;      /* whitespace run / UTF-8 continuation bytes still due */
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
/* the one string being typed when every thread is inside the body of an unconstrained-content
 * string between characters: 1 and *room = characters it may still take (G_NONE: unbounded) */
int  g_in_plain_string(const grammar *g, const g_state *s, uint32_t *room);

#endif
