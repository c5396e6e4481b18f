/* tokenizer_decode.c — ids back to text, as llama.cpp's llama_token_to_piece() and
 * llama_detokenize() do: NORMAL pieces with U+2581 -> ' ' (gpt2: each character back to the byte
 * it stands for), BYTE tokens -> their byte,
 * USER_DEFINED as text, CONTROL/UNKNOWN as text only when rendering specials, UNUSED/UNDEFINED
 * -> nothing; plus the streaming decoder, which never ends a chunk inside a UTF-8 character. */
#include "tokenizer_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* byte of a BYTE token: hex digits at text[3..4], as strtol(substr(3, 2), 16) would read them */
static unsigned char token_byte(const tokenizer *t, uint32_t id) {
    const char *p = tok_piece_ptr(t, id);
    uint32_t l = t->len[id];
    int v = 0;
    for (uint32_t i = 3; i < 5 && i < l && hexval(p[i]) >= 0; i++) v = v * 16 + hexval(p[i]);
    return (unsigned char)v;
}

/* l bytes at buf + *n, as far as cap goes (the count goes on: callers size their buffer from it) */
static void put(char *buf, int cap, int *n, const char *p, size_t l) {
    for (size_t i = 0; i < l; i++, (*n)++)
        if (*n < cap) buf[*n] = p[i];
}

/* llama.cpp's llama_decode_text: each code point of a gpt2 piece back to its byte (an invalid
 * byte reads as U+FFFD); one that stands for no byte gives "[UNK_BYTE_0x<its UTF-8 in hex><the
 * whole piece>]", kept as llama.cpp writes it */
static int gpt2_piece(const char *p, uint32_t l, char *buf, int cap) {
    int n = 0;
    for (uint32_t i = 0; i < l;) {
        uint32_t cp;
        size_t k = tok_cpt_decode(p + i, l - i, &cp);
        if (k == 0) { cp = 0xfffd; k = 1; }
        i += (uint32_t)k;
        int b = tok_gpt2_cp_byte(cp);
        if (b >= 0) {
            char c = (char)b;
            put(buf, cap, &n, &c, 1);
            continue;
        }
        char u[4], hex[9];
        size_t ul = tok_cpt_encode(cp, u);
        for (size_t j = 0; j < ul; j++) {
            static const char digits[] = "0123456789abcdef";
            hex[2 * j] = digits[(unsigned char)u[j] >> 4];
            hex[2 * j + 1] = digits[(unsigned char)u[j] & 15];
        }
        put(buf, cap, &n, "[UNK_BYTE_0x", 12);
        put(buf, cap, &n, hex, 2 * ul);
        put(buf, cap, &n, p, l);
        put(buf, cap, &n, "]", 1);
    }
    return n;
}

int tokenizer_piece(const tokenizer *t, int32_t id, int render_special, char *buf, int cap) {
    if (!t || id < 0 || (uint32_t)id >= t->n || cap < 0 || (!buf && cap > 0)) return -1;
    uint16_t a = t->attr[id];
    const char *p = tok_piece_ptr(t, id);
    uint32_t l = t->len[id];
    if (a & (A_CONTROL | A_UNKNOWN)) {
        if (!render_special) return 0;
    } else if (a & A_USER) {
        /* as is */
    } else if (a & A_NORMAL) {
        if (t->model == TOK_MODEL_GPT2) return gpt2_piece(p, l, buf, cap);
        int n = 0;
        for (uint32_t i = 0; i < l;) {
            char c;
            if (i + 2 < l && p[i] == '\xe2' && p[i + 1] == '\x96' && p[i + 2] == '\x81') { c = ' '; i += 3; }
            else c = p[i++];
            if (n < cap) buf[n] = c;
            n++;
        }
        return n;
    } else if (a & A_BYTE) {
        if (cap > 0) buf[0] = (char)token_byte(t, (uint32_t)id);
        return 1;
    } else {
        return 0; /* UNUSED / UNDEFINED render as nothing */
    }
    if (l > INT_MAX) return -1;
    if (cap > 0) memcpy(buf, p, (size_t)cap < l ? (size_t)cap : l);
    return (int)l;
}

/* llama.cpp's clean_up_tokenization_spaces passes, in place, kept literally (including the
 * second pass's NUL write, which hides a space from the next " ' " test) */
static int clean_spaces(char *text, int total) {
    int total1 = total;
    total = total ? 1 : 0;
    for (int i = 1; i < total1; ++i) { /* " ?", " !", " .", " ," lose the space */
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }
    int total2 = total;
    total = total ? 1 : 0;
    for (int i = 1; i < total2; ++i) { /* " ' " -> "'" */
        const char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    int total3 = total;
    total = total ? 1 : 0;
    for (int i = 1; i < total3; ++i) { /* " 's", " 'm", " 're", " 've" lose the space */
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            const char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') total--;
            else if (x1 != 't' && x1 != 'd' && i + 2 < total3) {
                const char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
            }
        }
        text[total++] = x;
    }
    return total;
}

int tokenizer_detokenize(const tokenizer *t, const int32_t *ids, int n, int remove_special,
                         int unparse_special, char *out, int cap) {
    if (!t || n < 0 || (!ids && n > 0) || cap < 0 || (!out && cap > 0)) return -1;
    int remove_space = t->add_space_prefix;
    if (remove_special && t->add_bos && n > 0 && ids[0] == t->bos) {
        remove_space = 0;
        n--;
        ids++;
    }
    if (remove_special && t->add_eos && n > 0 && ids[n - 1] == t->eos) n--;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        int k = tokenizer_piece(t, ids[i], unparse_special, NULL, 0);
        if (k < 0) return -1;
        total += k;
    }
    if (total > INT_MAX) return -1;
    char *text = malloc((size_t)total + 1);
    if (!text) return -1;
    int len = 0;
    for (int i = 0; i < n; i++) {
        int k = tokenizer_piece(t, ids[i], unparse_special, text + len, (int)total - len);
        if (i == 0 && remove_space && k > 0 && text[0] == ' ') { /* lstrip of one space */
            memmove(text, text + 1, (size_t)k - 1);
            k--;
        }
        len += k;
    }
    if (t->clean_spaces) len = clean_spaces(text, len);
    if (cap > 0) memcpy(out, text, (size_t)(len < cap ? len : cap));
    free(text);
    return len;
}

/* ---------------------------------------------------------------- streaming */

void tok_stream_init(tok_stream *s, const tokenizer *t, int render_special) {
    memset(s, 0, sizeof *s);
    s->t = t;
    s->render_special = render_special;
}

/* Expected total length of a sequence starting with lead byte c, 0 if c cannot start one. */
static int utf8_need(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) return 2;
    if (c >= 0xe0 && c <= 0xef) return 3;
    if (c >= 0xf0 && c <= 0xf4) return 4;
    return 0;
}

/* whether c may follow the pending bytes pend[0..n) (n >= 1) */
static int utf8_cont_ok(const unsigned char *pend, int n, unsigned char c) {
    if (c < 0x80 || c > 0xbf) return 0;
    if (n == 1) {
        switch (pend[0]) {
        case 0xe0: return c >= 0xa0;
        case 0xed: return c <= 0x9f;
        case 0xf0: return c >= 0x90;
        case 0xf4: return c <= 0x8f;
        default: return 1;
        }
    }
    return 1;
}

/* Feeds bytes through the UTF-8 assembler in pend/npend, writing complete characters (and
 * U+FFFD for each maximal invalid subpart) to k. */
typedef struct sink { char *out; int cap; int n; } sink;

static void sink_put(sink *k, const void *p, int n) {
    if (k->out && k->n + n <= k->cap) memcpy(k->out + k->n, p, (size_t)n);
    k->n += n;
}

static void utf8_feed(unsigned char *pend, int *npend, const unsigned char *p, int n, sink *k) {
    static const unsigned char fffd[3] = { 0xef, 0xbf, 0xbd };
    for (int i = 0; i < n;) {
        unsigned char c = p[i];
        if (*npend == 0) {
            int need = utf8_need(c);
            if (need == 0) sink_put(k, fffd, 3);
            else if (need == 1) sink_put(k, &c, 1);
            else pend[(*npend)++] = c;
            i++;
            continue;
        }
        if (!utf8_cont_ok(pend, *npend, c)) {
            sink_put(k, fffd, 3); /* the pending prefix can never complete; reprocess c */
            *npend = 0;
            continue;
        }
        pend[(*npend)++] = c;
        i++;
        if (*npend == utf8_need(pend[0])) {
            sink_put(k, pend, *npend);
            *npend = 0;
        }
    }
}

int tok_stream_push(tok_stream *s, int32_t id, char *out, int cap) {
    if (!s || !s->t || cap < 0 || (!out && cap > 0)) return -1;
    char small[64];
    char *piece = small;
    int n = tokenizer_piece(s->t, id, s->render_special, small, (int)sizeof small);
    if (n < 0) return -1;
    if (n > (int)sizeof small) {
        piece = malloc((size_t)n);
        if (!piece) return -1;
        tokenizer_piece(s->t, id, s->render_special, piece, n);
    }
    /* dry run on a copy of the state to learn the size; commit only if it fits */
    unsigned char pend[8];
    int npend = s->npend;
    memcpy(pend, s->pend, sizeof pend);
    sink k = { NULL, 0, 0 };
    utf8_feed(pend, &npend, (const unsigned char *)piece, n, &k);
    int rc = -1;
    if (k.n <= cap) {
        k = (sink){ out, cap, 0 };
        utf8_feed(s->pend, &s->npend, (const unsigned char *)piece, n, &k);
        rc = k.n;
    }
    if (piece != small) free(piece);
    return rc;
}

int tok_stream_flush(tok_stream *s, char *out, int cap) {
    if (!s || cap < 0 || (!out && cap > 0)) return -1;
    if (s->npend == 0) return 0;
    if (cap < 3) return -1;
    memcpy(out, "\xef\xbf\xbd", 3);
    s->npend = 0;
    return 3;
}
