/* constrain_walk — random walks through a constraint: for a vocabulary and a schema, N outputs made
 * by choosing a random allowed token from each mask (after --close-after steps, mostly a token that
 * closes the most: '}' ']' '"' and EOG, so outputs end) until only EOG is allowed; one output per
 * line to --out (a constrained output has no raw newline). Prints the mask time per step.
 *   build/tools/constrain_walk VOCAB.gguf SCHEMA.json|- N SEED [--out FILE] [--close-after K]
 * "-" as schema: json_object mode. Exit 1 when a walk breaks an invariant (an allowed token that is
 * not accepted, an empty mask, a walk that does not end). */
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

/* how much a piece closes: quotes that end strings, brackets that end containers; openers count against */
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

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s VOCAB.gguf SCHEMA.json|- N SEED [--out FILE] [--close-after K]\n", argv[0]);
        return 2;
    }
    const char *out_path = NULL;
    int close_after = 48, n = atoi(argv[3]);
    rs = strtoull(argv[4], NULL, 10);
    for (int i = 5; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--out")) out_path = argv[i + 1];
        else if (!strcmp(argv[i], "--close-after")) close_after = atoi(argv[i + 1]);
    }
    char err[512];
    tokenizer *tok;
    if (tokenizer_load(&tok, argv[1], err, sizeof err)) { fprintf(stderr, "%s\n", err); return 2; }
    double t0 = now_us();
    constraint_vocab *v;
    if (constraint_vocab_create(&v, tok, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 2; }
    double vocab_ms = (now_us() - t0) / 1e3;
    size_t slen = 0;
    char *schema = strcmp(argv[2], "-") ? slurp(argv[2], &slen) : NULL;
    if (strcmp(argv[2], "-") && !schema) { fprintf(stderr, "cannot read %s\n", argv[2]); return 2; }
    FILE *out = out_path ? fopen(out_path, "w") : NULL;
    uint32_t nv = tokenizer_n_vocab(tok), *bits = malloc((nv + 31) / 32 * 4);
    int32_t *allowed = malloc(nv * sizeof *allowed);
    int *score = malloc(nv * sizeof *score);
    char **pieces = malloc(nv * sizeof *pieces);
    int *plen = malloc(nv * sizeof *plen);
    char piece[512];
    for (uint32_t t = 0; t < nv; t++) {
        int k = tokenizer_piece(tok, (int32_t)t, 0, piece, sizeof piece);
        plen[t] = k < 0 ? 0 : k > (int)sizeof piece ? (int)sizeof piece : k;
        pieces[t] = malloc((size_t)plen[t] + 1);
        memcpy(pieces[t], piece, (size_t)plen[t]);
    }
    size_t cap_t = 1 << 16, nt = 0;
    double *times = malloc(cap_t * sizeof *times);
    char *text = malloc(1 << 20);
    int bad = 0;
    for (int w = 0; w < n && !bad; w++) {
        constraint *c;
        if (constraint_create_json(&c, v, schema, slen, err, sizeof err)) { fprintf(stderr, "schema: %s\n", err); return 1; }
        size_t tl = 0;
        int in_str = 0, esc = 0;
        for (int step = 0;; step++) {
            if (step > 4000) { fprintf(stderr, "walk %d did not end: %.*s\n", w, (int)(tl < 300 ? tl : 300), text); bad = 1; break; }
            double a = now_us();
            int cnt = constraint_mask(c, bits);
            double dt = now_us() - a;
            if (nt == cap_t) times = realloc(times, (cap_t *= 2) * sizeof *times);
            times[nt++] = dt;
            if (cnt <= 0) { fprintf(stderr, "walk %d: empty mask after: %.*s\n", w, (int)tl, text); bad = 1; break; }
            int na = 0, best = -1000;
            for (uint32_t t = 0; t < nv; t++)
                if (bits[t / 32] >> (t % 32) & 1) allowed[na++] = (int32_t)t;
            if (na != cnt) { fprintf(stderr, "mask count %d != bits %d\n", cnt, na); bad = 1; break; }
            if (step >= close_after && rnd() % 10) { /* keep the tokens that close the most */
                for (int i = 0; i < na; i++) {
                    score[i] = tokenizer_is_eog(tok, allowed[i]) ? 1000 : closing(pieces[allowed[i]], plen[allowed[i]], in_str, esc);
                    if (score[i] > best) best = score[i];
                }
                int k = 0;
                for (int i = 0; i < na; i++) if (score[i] == best) allowed[k++] = allowed[i];
                na = k;
            }
            int32_t t = allowed[rnd() % (uint64_t)na];
            if (constraint_accept(c, t)) { fprintf(stderr, "walk %d: allowed token %d not accepted\n", w, t); bad = 1; break; }
            if (tokenizer_is_eog(tok, t)) break;
            int k = tokenizer_piece(tok, t, 0, text + tl, (1 << 20) - (int)tl - 1);
            if (k > 0) { lex(text + tl, k, &in_str, &esc); tl += (size_t)k; }
        }
        if (!bad && !constraint_complete(c)) { fprintf(stderr, "walk %d ended incomplete\n", w); bad = 1; }
        if (out) { fwrite(text, 1, tl, out); fputc('\n', out); }
        constraint_destroy(c);
    }
    qsort(times, nt, sizeof *times, cmp_d);
    printf("vocab %u tokens, built in %.0f ms; %zu mask steps: median %.1f us, p99 %.1f us, max %.1f us\n",
           nv, vocab_ms, nt, nt ? times[nt / 2] : 0, nt ? times[nt * 99 / 100] : 0, nt ? times[nt - 1] : 0);
    if (out) fclose(out);
    free(times); free(text); free(bits); free(allowed); free(score); free(schema);
    for (uint32_t t = 0; t < nv; t++) free(pieces[t]);
    free(pieces); free(plen);
    constraint_vocab_destroy(v);
    tokenizer_destroy(tok);
    return bad;
}
