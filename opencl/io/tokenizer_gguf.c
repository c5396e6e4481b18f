/* tokenizer_gguf.c — reads tokenizer.ggml.* keys (as llama.cpp's llama_vocab::load does for the
 * models in the table below) and hands them to tokenizer_create(). */
#include "tokenizer_gguf.h"
#include "errf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* optional token id: missing keeps *id; out of range keeps the default (llama.cpp warns) */
static int read_id(const gguf_file *f, const char *key, uint32_t n, int32_t *id, char *err, size_t errlen) {
    int64_t v;
    int rc = gguf_get_int(f, key, &v);
    if (rc == -1) return 0;
    if (rc != 0) { errf(err, errlen, "%s: not an integer", key); return -1; }
    if (v >= 0 && v < (int64_t)n) *id = (int32_t)v;
    return 0;
}

static int read_bool(const gguf_file *f, const char *key, int *out, char *err, size_t errlen) {
    int64_t v;
    int rc = gguf_get_int(f, key, &v);
    if (rc == -1) return 0;
    if (rc != 0) { errf(err, errlen, "%s: not a bool", key); return -1; }
    *out = v != 0;
    return 0;
}

/* pointer/length views of a GGUF string array */
static int str_views(const gguf_str *strs, uint32_t n, const char *key, const char ***ptrs, uint32_t **lens,
                     char *err, size_t errlen) {
    *ptrs = malloc((size_t)(n ? n : 1) * sizeof **ptrs);
    *lens = malloc((size_t)(n ? n : 1) * sizeof **lens);
    if (!*ptrs || !*lens) { errf(err, errlen, "%s: out of memory", key); return -1; }
    for (uint32_t i = 0; i < n; i++) {
        if (strs[i].len > UINT32_MAX) { errf(err, errlen, "%s[%u]: too long", key, i); return -1; }
        (*ptrs)[i] = strs[i].ptr;
        (*lens)[i] = (uint32_t)strs[i].len;
    }
    return 0;
}

/* llama.cpp gives every special token of a "phi-3" model (by general.name) rstrip */
static int is_phi3(const gguf_file *f) {
    gguf_str name;
    if (gguf_get_str(f, "general.name", &name) != 0) return 0;
    char buf[256];
    size_t n = name.len < sizeof buf - 1 ? (size_t)name.len : sizeof buf - 1;
    for (size_t i = 0; i < n; i++) buf[i] = (char)tolower((unsigned char)name.ptr[i]);
    buf[n] = 0;
    /* a name longer than the buffer is only checked in its first 255 bytes */
    return strstr(buf, "phi-3") || strstr(buf, "phi3");
}

/* tokenizer.ggml.model values we serve, with llama.cpp's defaults for keys a file leaves out */
static const struct tok_model_desc {
    const char *name;
    enum tok_model model;
    int32_t bos, eos, unk;  /* default ids (-1: none) */
    int add_bos;            /* default, or forced when force_add_bos */
    int force_add_bos;      /* llama.cpp overrides the file's false (Gemma 4, PR 21500) */
    int add_space_prefix, clean_spaces, need_merges;
    int need_pre;           /* tokenizer.ggml.pre picks the pre-tokenizer (pres[] below) */
} models[] = {
    { "llama", TOK_MODEL_SPM, 1, 2, 0, 1, 0, 1, 0, 0, 0 },
    { "gemma4", TOK_MODEL_GEMMA4, -1, -1, -1, 1, 1, 0, 1, 1, 0 },
    { "gpt2", TOK_MODEL_GPT2, 11, 11, -1, 0, 0, 0, 1, 1, 1 },
};

/* tokenizer.ggml.pre values we serve for "gpt2", with the clean_spaces llama.cpp sets for each */
static const struct tok_pre_desc {
    const char *name;
    enum tok_pre pre;
    int clean_spaces;
} pres[] = {
    { "qwen2", TOK_PRE_QWEN2, 0 },
    { "deepseek-r1-qwen", TOK_PRE_QWEN2, 0 },
    { "qwen35", TOK_PRE_QWEN35, 0 },
};

/* the pre-tokenizer of a model that needs one; -1 with a message naming the value and the known ones */
static const struct tok_pre_desc *read_pre(const gguf_file *f, const char *model, char *err, size_t errlen) {
    gguf_str pre;
    int rc = gguf_get_str(f, "tokenizer.ggml.pre", &pre);
    for (size_t i = 0; rc == 0 && i < sizeof pres / sizeof pres[0]; i++)
        if (gguf_str_eq(pre, pres[i].name)) return &pres[i];
    char known[160] = "";
    for (size_t i = 0, o = 0; i < sizeof pres / sizeof pres[0] && o < sizeof known; i++)
        o += (size_t)snprintf(known + o, sizeof known - o, "%s'%s'", i ? ", " : "", pres[i].name);
    if (rc != 0)
        errf(err, errlen, "tokenizer.ggml.pre %s (tokenizer.ggml.model '%s' needs it; known: %s)",
             rc == -1 ? "missing" : "is not a string", model, known);
    else
        errf(err, errlen, "tokenizer.ggml.pre '%.*s' unsupported for tokenizer.ggml.model '%s' (known: %s)",
             pre.len > 64 ? 64 : (int)pre.len, pre.ptr, model, known);
    return NULL;
}

int tokenizer_load(tokenizer **out, const char *path, char *err, size_t errlen)
{
    char why[512];
    gguf_file *f;
    *out = NULL;
    if (gguf_open(&f, path, why, sizeof why)) return errf(err, errlen, "%s", why);
    int rc = tokenizer_from_gguf(out, f, why, sizeof why);
    gguf_close(f);
    return rc ? errf(err, errlen, "%s: %s", path, why) : 0;
}

int tokenizer_from_gguf(tokenizer **out, const gguf_file *f, char *err, size_t errlen) {
    if (!out) { errf(err, errlen, "tokenizer_from_gguf: no output pointer"); return -1; }
    *out = NULL;
    if (!f) { errf(err, errlen, "tokenizer_from_gguf: no file"); return -1; }

    gguf_str model;
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &model);
    if (rc != 0) {
        errf(err, errlen, "tokenizer.ggml.model %s", rc == -1 ? "missing" : "is not a string");
        return -1;
    }
    const struct tok_model_desc *md = NULL;
    for (size_t i = 0; i < sizeof models / sizeof models[0] && !md; i++)
        if (gguf_str_eq(model, models[i].name)) md = &models[i];
    if (!md) {
        int l = model.len > 64 ? 64 : (int)model.len;
        errf(err, errlen, "tokenizer.ggml.model '%.*s' unsupported (known: 'llama' = SentencePiece, 'gemma4' = BPE, "
             "'gpt2' = byte-level BPE)",
               l, model.ptr);
        return -1;
    }

    const struct tok_pre_desc *pd = md->need_pre ? read_pre(f, md->name, err, errlen) : NULL;
    if (md->need_pre && !pd) return -1;

    const gguf_str *strs;
    uint64_t n64;
    rc = gguf_get_str_arr(f, "tokenizer.ggml.tokens", &strs, &n64);
    if (rc != 0) {
        errf(err, errlen, "tokenizer.ggml.tokens %s", rc == -1 ? "missing" : "is not a string array");
        return -1;
    }
    if (n64 == 0 || n64 > (uint64_t)INT32_MAX / 2) {
        errf(err, errlen, "tokenizer.ggml.tokens: bad count %llu", (unsigned long long)n64);
        return -1;
    }
    const uint32_t n = (uint32_t)n64;

    const char **pieces = NULL, **merges = NULL;
    uint32_t *lens = NULL, *merge_lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    int ret = -1;
    if (str_views(strs, n, "tokenizer.ggml.tokens", &pieces, &lens, err, errlen)) goto out;

    const gguf_str *mstrs = NULL;
    uint64_t nm64 = 0;
    rc = gguf_get_str_arr(f, "tokenizer.ggml.merges", &mstrs, &nm64);
    if (md->need_merges && rc != 0) {
        errf(err, errlen, "tokenizer.ggml.merges %s (tokenizer.ggml.model '%s' needs it)",
               rc == -1 ? "missing" : "is not a string array", md->name);
        goto out;
    }
    if (!md->need_merges) nm64 = 0; /* SPM has no use for merges */
    if (nm64 > (uint64_t)INT32_MAX / 2) {
        errf(err, errlen, "tokenizer.ggml.merges: bad count %llu", (unsigned long long)nm64);
        goto out;
    }
    if (nm64 && str_views(mstrs, (uint32_t)nm64, "tokenizer.ggml.merges", &merges, &merge_lens, err, errlen)) goto out;

    uint32_t et;
    uint64_t an;
    const void *data;
    rc = gguf_get_arr(f, "tokenizer.ggml.scores", &et, &an, &data);
    if (rc == -2 || (rc == 0 && et != GGUF_VT_F32 && et != GGUF_VT_I32)) {
        errf(err, errlen, "tokenizer.ggml.scores: not an f32/i32 array");
        goto out;
    }
    if (rc == 0) {
        if (an < n) {
            errf(err, errlen, "tokenizer.ggml.scores: %llu entries for %u tokens", (unsigned long long)an, n);
            goto out;
        }
        scores = malloc((size_t)n * sizeof *scores);
        if (!scores) { errf(err, errlen, "tokenizer_from_gguf: out of memory"); goto out; }
        const unsigned char *p = data;
        for (uint32_t i = 0; i < n; i++) {
            if (et == GGUF_VT_F32) {
                memcpy(&scores[i], p + 4 * (size_t)i, 4);
            } else {
                int32_t v;
                memcpy(&v, p + 4 * (size_t)i, 4);
                scores[i] = (float)v;
            }
        }
    }

    rc = gguf_get_arr(f, "tokenizer.ggml.token_type", &et, &an, &data);
    if (rc == -2 || (rc == 0 && et != GGUF_VT_I32)) {
        errf(err, errlen, "tokenizer.ggml.token_type: not an i32 array");
        goto out;
    }
    if (rc == 0) {
        if (an < n) {
            errf(err, errlen, "tokenizer.ggml.token_type: %llu entries for %u tokens", (unsigned long long)an, n);
            goto out;
        }
        types = malloc((size_t)n * sizeof *types);
        if (!types) { errf(err, errlen, "tokenizer_from_gguf: out of memory"); goto out; }
        memcpy(types, data, (size_t)n * 4);
    }

    /* llama.cpp's defaults for the model, disabled when outside the vocabulary */
    tokenizer_vocab v = {
        .model = md->model, .n = n, .pieces = pieces, .piece_lens = lens, .scores = scores, .types = types,
        .bos = md->bos < (int64_t)n ? md->bos : -1, .eos = md->eos < (int64_t)n ? md->eos : -1,
        .unk = md->unk < (int64_t)n ? md->unk : -1, .pad = -1,
        .add_bos = md->add_bos, .add_eos = 0, .add_space_prefix = md->add_space_prefix,
        .clean_spaces = pd ? pd->clean_spaces : md->clean_spaces, .pre = pd ? pd->pre : TOK_PRE_NONE,
        .n_merges = (uint32_t)nm64, .merges = merges, .merge_lens = merge_lens,
    };
    if (read_id(f, "tokenizer.ggml.bos_token_id", n, &v.bos, err, errlen) ||
        read_id(f, "tokenizer.ggml.eos_token_id", n, &v.eos, err, errlen) ||
        read_id(f, "tokenizer.ggml.unknown_token_id", n, &v.unk, err, errlen) ||
        read_id(f, "tokenizer.ggml.padding_token_id", n, &v.pad, err, errlen) ||
        read_bool(f, "tokenizer.ggml.add_bos_token", &v.add_bos, err, errlen) ||
        read_bool(f, "tokenizer.ggml.add_eos_token", &v.add_eos, err, errlen) ||
        read_bool(f, "tokenizer.ggml.add_space_prefix", &v.add_space_prefix, err, errlen))
        goto out;
    if (md->force_add_bos) v.add_bos = 1;
    if (v.add_bos && v.bos < 0) {
        errf(err, errlen, "tokenizer.ggml.bos_token_id missing or out of range, but a BOS token is to be added");
        goto out;
    }
    if (v.add_eos && v.eos < 0) {
        errf(err, errlen, "tokenizer.ggml.eos_token_id missing or out of range, but an EOS token is to be added");
        goto out;
    }

    tokenizer *t;
    if (tokenizer_create(&t, &v, err, errlen)) goto out;

    if (is_phi3(f)) {
        for (uint32_t i = 0; i < n; i++) {
            int32_t ty = types ? types[i] : TOK_NORMAL;
            if (ty == TOK_CONTROL || ty == TOK_USER_DEFINED || ty == TOK_UNKNOWN || tokenizer_is_control(t, (int32_t)i))
                tokenizer_set_strip(t, (int32_t)i, 0, 1);
        }
        static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>" };
        tokenizer_set_strip(t, tokenizer_find(t, "</s>"), 0, 1);
        for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++)
            tokenizer_set_strip(t, tokenizer_find(t, keep[k]), 0, 0);
    }
    *out = t;
    ret = 0;
out:
    free(pieces); free(lens); free(merges); free(merge_lens); free(scores); free(types);
    return ret;
}
