/* constrain_walk — random walks through constraints: for a vocabulary and each schema, N outputs
 * made by choosing a random allowed token from each mask (after --close-after steps, mostly the
 * token of a sample that closes the most: EOG, then quotes ending strings and '}' ']', so outputs
 * end) until EOG; one output per line to OUTDIR/<schema file>.out (constrained JSON has no raw
 * newline). Prints the mask CPU time per step (median, p99) per schema and overall.
 *   build/tools/constrain_walk VOCAB.gguf N SEED OUTDIR FILE... [--close-after K]
 *                              [--tools [--only NAME] [--parallel]]
 * FILE: a JSON Schema, or "-" for json_object mode. With --tools each FILE is an OpenAI tools array
 * and the walks are Gemma 4 tool calls (constraint_create_tool_calls; --only: tool_choice naming
 * one function, --parallel: 1..8 calls); their outputs may hold newlines, so each is written as
 * its byte count, a newline, the bytes (control tokens as their text) and a newline. Exit 1 when
 * a walk breaks an invariant (an allowed token that is not accepted, an empty mask, a walk that
 * does not end). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "constrain.h"
#include "tokenizer.h"

static uint64_t rs;
static uint64_t rnd(void) {
    uint64_t z = (rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: a busy machine preempts us */
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* where a JSON text is: inside a string, after a backslash */
static void lex(const char *p, int n, int *in_str, int *esc) {
    for (int i = 0; i < n; i++) {
        if (*esc) *esc = 0;
        else if (*in_str && p[i] == '\\') *esc = 1;
        else if (p[i] == '"') *in_str = !*in_str;
    }
}

/* how much a piece closes: quotes that end strings, brackets that end containers; openers count against
 * (Gemma's call syntax: the caller scores its control tokens; outside strings its pieces are like JSON's) */
static int closing(const char *p, int n, int in_str, int esc) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        char c = p[i];
        if (esc) { esc = 0; continue; }
        if (in_str) {
            if (c == '\\') esc = 1;
            else if (c == '"') { in_str = 0; s += 3; }
            continue;
        }
        if (c == '"') { in_str = 1; s -= 3; }
        else if (c == '}' || c == ']') s += 2;
        else if (c == '{' || c == '[') s -= 2;
        else if (c == ',') s -= 1;
    }
    return s;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    fclose(f);
    if (s) { s[n] = 0; *len = (size_t)n; }
    return s;
}

/* n walks through one schema; outputs to out (may be NULL); mask times appended to *times */
typedef struct walker {
    const tokenizer *tok; const constraint_vocab *v;
    uint32_t nv, *bits; int32_t *allowed; int *score;
    char **pieces; int *plen; char *text;
    double *times; size_t nt, cap_t;
    int close_after;
    int tools, parallel; const char *only;  /* --tools mode */
    int32_t quote, call, end;                /* Gemma's <|"|>, <|tool_call>, <tool_call|> */
} walker;

static int create(walker *W, constraint **c, const char *text, size_t len, char *err, size_t errlen) {
    if (W->tools) return constraint_create_tool_calls(c, W->v, text, len, W->only, W->parallel, err, errlen);
    return constraint_create_json(c, W->v, text, len, err, errlen);
}

/* closing() for a token of the walk's syntax: in Gemma's, strings end only at <|"|> */
static int closes(const walker *W, int32_t t, int in_str, int esc) {
    if (!W->tools) return closing(W->pieces[t], W->plen[t], in_str, esc);
    if (t == W->quote) return in_str ? 3 : -3;
    if (t == W->end) return 2;
    if (t == W->call) return -2;
    return in_str ? 0 : closing(W->pieces[t], W->plen[t], 0, 0);
}

static void lex_token(const walker *W, int32_t t, const char *p, int n, int *in_str, int *esc) {
    if (!W->tools) lex(p, n, in_str, esc);
    else if (t == W->quote) *in_str = !*in_str;
}

static int walk_schema(walker *W, const char *schema, size_t slen, int n, FILE *out) {
    char err[512];
    int bad = 0;
    for (int w = 0; w < n && !bad; w++) {
        constraint *c;
        if (create(W, &c, schema, slen, err, sizeof err)) { fprintf(stderr, "schema: %s\n", err); return 1; }
        size_t tl = 0;
        int in_str = 0, esc = 0;
        for (int step = 0;; step++) {
            if (step > 4000) { fprintf(stderr, "walk %d did not end: %.*s\n", w, (int)(tl < 300 ? tl : 300), W->text); bad = 1; break; }
            double a = now_us();
            int cnt = constraint_mask(c, W->bits);
            double dt = now_us() - a;
            if (W->nt == W->cap_t) W->times = realloc(W->times, (W->cap_t *= 2) * sizeof *W->times);
            W->times[W->nt++] = dt;
            if (cnt <= 0) { fprintf(stderr, "walk %d: empty mask after: %.*s\n", w, (int)tl, W->text); bad = 1; break; }
            int na = 0;
            for (uint32_t k = 0; k < (W->nv + 31) / 32; k++)
                for (uint32_t b = W->bits[k]; b; b &= b - 1) W->allowed[na++] = (int32_t)(k * 32 + (uint32_t)__builtin_ctz(b));
            if (na != cnt) { fprintf(stderr, "mask count %d != bits %d\n", cnt, na); bad = 1; break; }
            if (step >= W->close_after && rnd() % 10) { /* the token that closes the most of a sample */
                int best = -1000, k = 0, ns = na < 512 ? na : 512;
                for (int i = 0; i < ns; i++) {
                    int32_t t = na <= 512 ? W->allowed[i] : W->allowed[rnd() % (uint64_t)na];
                    int sc = tokenizer_is_eog(W->tok, t) ? 1000 : closes(W, t, in_str, esc);
                    if (sc > best) { best = sc; k = 0; }
                    if (sc == best) W->score[k++] = t;
                }
                for (int i = 0; W->tools && i < 2; i++) { /* the one token that ends a Gemma string or call is rarely sampled */
                    int32_t t = i ? W->end : W->quote;
                    if (t < 0 || !(W->bits[t / 32] >> (t % 32) & 1)) continue;
                    int sc = closes(W, t, in_str, esc);
                    if (sc > best) { best = sc; k = 0; }
                    if (sc == best) W->score[k++] = t;
                }
                for (int i = 0; i < na && best < 1000; i++) /* an allowed end of generation wins */
                    if (tokenizer_is_eog(W->tok, W->allowed[i])) { W->score[0] = W->allowed[i]; k = 1; break; }
                memcpy(W->allowed, W->score, (size_t)k * sizeof *W->allowed);
                na = k;
            }
            int32_t t = W->allowed[rnd() % (uint64_t)na];
            if (W->parallel && W->call >= 0 && (W->bits[W->call / 32] >> (W->call % 32) & 1) && rnd() % 2)
                t = W->call; /* another call half the time, so walks reach the limit of 8 */
            if (constraint_accept(c, t)) { fprintf(stderr, "walk %d: allowed token %d not accepted\n", w, t); bad = 1; break; }
            if (tokenizer_is_eog(W->tok, t)) break;
            if (tl + (size_t)W->plen[t] + 2 > (1 << 20)) { fprintf(stderr, "walk %d too long\n", w); bad = 1; break; }
            memcpy(W->text + tl, W->pieces[t], (size_t)W->plen[t]);
            lex_token(W, t, W->text + tl, W->plen[t], &in_str, &esc);
            tl += (size_t)W->plen[t];
        }
        if (!bad && !constraint_complete(c)) { fprintf(stderr, "walk %d ended incomplete\n", w); bad = 1; }
        if (out && W->tools) fprintf(out, "%zu\n", tl);
        if (out) { fwrite(W->text, 1, tl, out); fputc('\n', out); }
        constraint_destroy(c);
    }
    return bad;
}

static void report(const char *name, walker *W, size_t from) {
    size_t n = W->nt - from;
    double *t = W->times + from;
    qsort(t, n, sizeof *t, cmp_d);
    printf("%s: %zu mask steps: median %.1f us, p99 %.1f us, max %.1f us\n", name, n,
           n ? t[n / 2] : 0, n ? t[n * 99 / 100] : 0, n ? t[n - 1] : 0);
}

int main(int argc, char **argv) {
    walker W = {.close_after = 48};
    const char *files[256];
    int n_files = 0;
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "--close-after") && i + 1 < argc) W.close_after = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) W.only = argv[++i];
        else if (!strcmp(argv[i], "--tools")) W.tools = 1;
        else if (!strcmp(argv[i], "--parallel")) W.parallel = 1;
        else if (n_files < 256 && strncmp(argv[i], "--", 2)) files[n_files++] = argv[i];
        else { n_files = 0; break; }
    }
    if (argc < 6 || !n_files) {
        fprintf(stderr, "usage: %s VOCAB.gguf N SEED OUTDIR FILE... [--close-after K] [--tools [--only NAME] [--parallel]]\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[2]);
    rs = strtoull(argv[3], NULL, 10);
    const char *outdir = argv[4];
    char err[512];
    tokenizer *tok;
    if (tokenizer_load(&tok, argv[1], err, sizeof err)) { fprintf(stderr, "%s\n", err); return 2; }
    double t0 = now_us();
    constraint_vocab *v;
    if (constraint_vocab_create(&v, tok, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 2; }
    printf("vocab %s: %u tokens, trie built in %.0f ms cpu\n", argv[1], tokenizer_n_vocab(tok), (now_us() - t0) / 1e3);
    W.tok = tok; W.v = v; W.nv = tokenizer_n_vocab(tok);
    W.quote = tokenizer_find(tok, "<|\"|>"); W.call = tokenizer_find(tok, "<|tool_call>"); W.end = tokenizer_find(tok, "<tool_call|>");
    W.bits = malloc((W.nv + 31) / 32 * 4);
    W.allowed = malloc(W.nv * sizeof *W.allowed);
    W.score = malloc(W.nv * sizeof *W.score);
    W.pieces = malloc(W.nv * sizeof *W.pieces);
    W.plen = malloc(W.nv * sizeof *W.plen);
    W.text = malloc(1 << 20);
    W.cap_t = 1 << 16;
    W.times = malloc(W.cap_t * sizeof *W.times);
    char piece[512];
    for (uint32_t t = 0; t < W.nv; t++) {
        int k = tokenizer_piece(tok, (int32_t)t, 1, piece, sizeof piece); /* control tokens as their text */
        W.plen[t] = k < 0 ? 0 : k > (int)sizeof piece ? (int)sizeof piece : k;
        W.pieces[t] = malloc((size_t)W.plen[t] + 1);
        memcpy(W.pieces[t], piece, (size_t)W.plen[t]);
    }
    int bad = 0;
    for (int i = 0; i < n_files; i++) {
        const char *path = files[i], *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        size_t slen = 0;
        char *schema = strcmp(path, "-") ? slurp(path, &slen) : NULL;
        if (strcmp(path, "-") && !schema) { fprintf(stderr, "cannot read %s\n", path); bad = 1; continue; }
        char op[4096];
        snprintf(op, sizeof op, "%s/%s.out", outdir, strcmp(path, "-") ? base : "json_object");
        FILE *out = fopen(op, "w");
        size_t from = W.nt;
        int b = walk_schema(&W, schema, slen, n, out);
        if (out) fclose(out);
        if (b) printf("FAIL walk %s: see stderr\n", base);
        bad |= b;
        report(strcmp(path, "-") ? base : "json_object", &W, from);
        free(schema);
    }
    report("all schemas", &W, 0);
    for (uint32_t t = 0; t < W.nv; t++) free(W.pieces[t]);
    free(W.pieces); free(W.plen); free(W.times); free(W.text); free(W.bits); free(W.allowed); free(W.score);
    constraint_vocab_destroy(v);
    tokenizer_destroy(tok);
    return bad;
}
