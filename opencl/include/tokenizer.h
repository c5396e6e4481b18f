/* tokenizer.h — the tokenizers of llama.cpp's "llama" (SentencePiece, scores), "gemma4" (BPE with
 * merges over SentencePiece-style text) and "gpt2" (byte-level BPE after a pre-tokenizer regex, as
 * Qwen's) models, built from GGUF vocabulary arrays: pieces, scores,
 * token types, merges, byte-fallback tokens <0xXX>, special/control tokens. Behaviour matches
 * llama.cpp's llama_tokenize() / llama_token_to_piece() / llama_detokenize() for the same GGUF.
 * No OpenCL here. */
#ifndef CLGEMMA_TOKENIZER_H
#define CLGEMMA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

/* token types as stored in tokenizer.ggml.token_type */
enum tok_type {
    TOK_UNDEFINED = 0, TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3,
    TOK_USER_DEFINED = 4, TOK_UNUSED = 5, TOK_BYTE = 6
};

/* the encoding algorithm (tokenizer.ggml.model) */
enum tok_model {
    TOK_MODEL_SPM = 0,    /* "llama": highest-score merges, " " prefix, U+2581 for spaces */
    TOK_MODEL_GEMMA4 = 1, /* "gemma4": ranked BPE merges per line, U+2581 for spaces, raw UTF-8 */
    TOK_MODEL_GPT2 = 2,   /* "gpt2": ranked BPE merges per pre-tokenizer word, GPT-2's bytes-to-unicode */
};

/* the pre-tokenizer of a "gpt2" model (tokenizer.ggml.pre), as llama.cpp's LLAMA_VOCAB_PRE_TYPE_* */
enum tok_pre {
    TOK_PRE_NONE = 0,
    TOK_PRE_QWEN2 = 1,  /* "qwen2": letters \p{L}+, digits one by one */
    TOK_PRE_QWEN35 = 2, /* "qwen35": as qwen2, with combining marks \p{M} inside letter runs */
};

typedef struct tokenizer_vocab {
    enum tok_model model;
    uint32_t n;                 /* number of tokens */
    const char *const *pieces;  /* n piece strings (bytes, need not be NUL-terminated) */
    const uint32_t *piece_lens; /* n lengths */
    const float *scores;        /* n scores, or NULL (all 0) */
    const int32_t *types;       /* n enum tok_type, or NULL (all NORMAL) */
    int32_t bos, eos, unk, pad; /* -1 when absent */
    int add_bos, add_eos, add_space_prefix;
    int clean_spaces;           /* detokenize drops " " before ?!., and around ' (llama.cpp BPE) */
    enum tok_pre pre;           /* TOK_MODEL_GPT2 only (the others ignore it) */
    /* TOK_MODEL_GEMMA4 and TOK_MODEL_GPT2: n_merges "left right" lines, highest priority first */
    uint32_t n_merges;
    const char *const *merges;
    const uint32_t *merge_lens;
} tokenizer_vocab;

typedef struct tokenizer tokenizer;

/* Copies everything it needs from v. Returns -1 with a one-line message on bad input (for
 * merges: the 0-based line and what is wrong with it). */
int  tokenizer_create(tokenizer **out, const tokenizer_vocab *v, char *err, size_t errlen);
void tokenizer_destroy(tokenizer *t);
/* The tokenizer of a GGUF file from its tokenizer.* keys alone (vocabulary-only files work too;
 * tokenizer_gguf.c). Returns -1 with one line in err naming the file, key or problem. */
int  tokenizer_load(tokenizer **out, const char *path, char *err, size_t errlen);

uint32_t tokenizer_n_vocab(const tokenizer *t);
enum tok_model tokenizer_model(const tokenizer *t);
int32_t  tokenizer_bos(const tokenizer *t);
int32_t  tokenizer_eos(const tokenizer *t);
/* id of a piece given by exact text (e.g. "<end_of_turn>"), or -1 */
int32_t  tokenizer_find(const tokenizer *t, const char *piece);
/* 1 for control tokens (end of generation candidates are chosen by the caller) */
int      tokenizer_is_control(const tokenizer *t, int32_t id);
/* 1 for tokens llama.cpp treats as end of generation: eos plus control tokens known by text
 * ("<end_of_turn>", "<eos>", "</s>", "<turn|>", "<|tool_response>", ...). Such texts are forced
 * to CONTROL, as llama.cpp does: Gemma 3's "</s>" (USER_DEFINED in the GGUF) is then matched in
 * text only with parse_special and rendered only with render_special. llama.cpp's exceptions
 * hold too: with "<|tool_response>" (Gemma 4) "</s>" is ordinary text. */
int      tokenizer_is_eog(const tokenizer *t, int32_t id);
/* lstrip/rstrip attributes of a special token (llama.cpp sets these per model name): when the
 * token is matched in text, adjacent whitespace on that side is dropped. 0, or -1 for a bad id. */
int      tokenizer_set_strip(tokenizer *t, int32_t id, int lstrip, int rstrip);

/* Encode len bytes of text. add_special: prepend BOS (and append EOS) when the vocab says so.
 * parse_special: recognise control-token text such as "<start_of_turn>" inside the text.
 * Writes at most cap ids; returns the total number of ids needed (may be > cap: call again
 * with a larger buffer), or -1 on invalid arguments. */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int add_special,
                     int parse_special, int32_t *ids, int cap);

/* Bytes of one token as text: byte tokens give their byte, control tokens give "" unless
 * render_special. Returns the byte count (written up to cap) or -1 for an invalid id. */
int tokenizer_piece(const tokenizer *t, int32_t id, int render_special, char *buf, int cap);

/* llama_detokenize(): the pieces of n ids joined, with llama.cpp's adjustments: remove_special
 * drops a leading BOS / trailing EOS the vocab adds (and then keeps the first piece's leading
 * space, which add_space_prefix would otherwise strip), unparse_special renders control tokens,
 * clean_spaces tidies spaces before punctuation. Writes at most cap bytes; returns the full
 * length, or -1 for an invalid id or argument. */
int tokenizer_detokenize(const tokenizer *t, const int32_t *ids, int n, int remove_special,
                         int unparse_special, char *out, int cap);

/* Streaming decoder: feed ids one by one, get text that never ends inside a UTF-8 character.
 * Invalid byte sequences are flushed as U+FFFD once it is clear they cannot complete. */
typedef struct tok_stream {
    const tokenizer *t;
    int render_special;
    unsigned char pend[8];
    int npend;
} tok_stream;
void tok_stream_init(tok_stream *s, const tokenizer *t, int render_special);
/* Appends the decodable text for id to out (cap bytes); returns bytes written or -1. */
int  tok_stream_push(tok_stream *s, int32_t id, char *out, int cap);
/* Flushes any incomplete tail (as U+FFFD); returns bytes written. */
int  tok_stream_flush(tok_stream *s, char *out, int cap);

#endif
