/* engine.c — see engine.h. Owns the runtime, model, KV cache and forward buffers; turns a
 * batch of (sequence, tokens) items into forward chunks, then picks tokens. */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "chat.h"
#include "chat_reply.h"
#include "choice.h"
#include "draw.h"
#include "draft.h"
#include "clock.h"
#include "gguf.h"
#include "kv.h"
#include "model.h"
#include "ops.h"
#include "prefix.h"
#include "runtime.h"
#include "synth.h"
#include "tokenizer_gguf.h"
#include "vision.h"
#include "engine_int.h"

#include "errf.h"
#include "fit.h"


static const tensor_maker synth_maker = { synth_fill, synth_bytes };

/* "Q4_K 302, Q5_0 60 (ffn_down, ffn_down_exps), F32 423": tensors per type; for the minority
 * weight types (not F32, not the most common) the tensor roles that have them */
static void types_summary(const gguf_file *f, char *out, size_t cap)
{
    size_t cnt[GGML_TYPE_COUNT] = { 0 }, n = gguf_tensor_count(f);
    for (size_t i = 0; i < n; i++) {
        uint32_t t = gguf_tensor_at(f, i)->type;
        if (t < GGML_TYPE_COUNT) cnt[t]++;
    }
    uint32_t major = GGML_TYPE_F32;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++)
        if (t != GGML_TYPE_F32 && cnt[t] > (major == GGML_TYPE_F32 ? 0 : cnt[major])) major = t;
    size_t o = 0;
    out[0] = 0;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT && o + 1 < cap; t++) {
        if (!cnt[t]) continue;
        o += (size_t)snprintf(out + o, cap - o, "%s%s %zu", o ? ", " : "", ggml_type_name(t), cnt[t]);
        if (t == major || t == GGML_TYPE_F32 || o + 1 >= cap) continue;
        /* roles: the name without "blk.N.", each once, up to 4 */
        char roles[4][48];
        int nr = 0, more = 0;
        for (size_t i = 0; i < n; i++) {
            const gguf_tensor *g = gguf_tensor_at(f, i);
            if (g->type != t) continue;
            const char *p = g->name.ptr;
            size_t len = g->name.len;
            if (len > 4 && !memcmp(p, "blk.", 4)) {
                size_t k = 4;
                while (k < len && p[k] != '.') k++;
                if (k < len) { p += k + 1; len -= k + 1; }
            }
            if (len > 7 && !memcmp(p + len - 7, ".weight", 7)) len -= 7;
            char r[48];
            snprintf(r, sizeof r, "%.*s", (int)(len < 47 ? len : 47), p);
            int seen = 0;
            for (int j = 0; j < nr && !seen; j++) seen = !strcmp(roles[j], r);
            if (seen) continue;
            if (nr < 4) memcpy(roles[nr++], r, sizeof r);
            else more = 1;
        }
        for (int j = 0; j < nr && o + 1 < cap; j++)
            o += (size_t)snprintf(out + o, cap - o, "%s%s", j ? ", " : " (", roles[j]);
        if (nr && o + 1 < cap) o += (size_t)snprintf(out + o, cap - o, "%s)", more ? ", ..." : "");
    }
    if (o >= cap) out[cap - 1] = 0;
}

static int engine_init(engine *e, const char *path, const engine_opts *opts, double t0, char *err, size_t errlen);

_Static_assert(ENGINE_MAX_SETTINGS <= RT_MAX_SETTINGS, "the runtime holds every setting the API accepts");

int engine_list_devices(int plain) { return rt_list_devices(plain); }

int engine_load(engine **out, const char *path, const engine_opts *opts, char *err, size_t errlen)
{
    double t0 = monotonic_seconds();
    engine_opts def = { 0 };
    if (!opts) opts = &def;
    *out = NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) return ERR("out of memory");
    char why[512];
    if (gguf_open(&e->gguf, path, why, sizeof why)) { ERR("%s", why); goto fail; }
    const model_arch *arch;
    if (model_arch_of(e->gguf, &arch, why, sizeof why)) { ERR("%s: %s", path, why); goto fail; }
    if (arch->drafts_for) { /* before the device is touched: a drafter alone cannot run */
        ERR("%s: '%s' is an MTP drafter of %s models: load it beside one", path, arch->name,
            arch->drafts_for);
        goto fail;
    }
    if (tokenizer_from_gguf(&e->tok, e->gguf, why, sizeof why)) { ERR("%s: %s", path, why); goto fail; }
    if (engine_init(e, path, opts, t0, err, errlen)) goto fail;
    *out = e;
    return 0;
fail:
    engine_destroy(e);
    return -1;
}

int engine_load_synthetic(engine **out, const char *model, const char *type, int layers, const engine_opts *opts,
                          char *err, size_t errlen)
{
    double t0 = monotonic_seconds();
    engine_opts def = { 0 };
    if (!opts) opts = &def;
    *out = NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) return ERR("out of memory");
    char why[512], name[96];
    size_t size;
    uint64_t virt;
    if (synth_build(model, type, layers, &e->synth_buf, &size, &virt, name, why, sizeof why)) { ERR("%s", why); goto fail; }
    if (gguf_open_virtual(&e->gguf, e->synth_buf, size, virt, why, sizeof why)) {
        ERR("synthetic model: %s", why);
        goto fail;
    }
    e->make = &synth_maker;
    /* no tokenizer: the engine works on ids (bench); engine_tokenizer() returns NULL */
    if (engine_init(e, name, opts, t0, err, errlen)) goto fail;
    *out = e;
    return 0;
fail:
    engine_destroy(e);
    return -1;
}

/* The KV cache as fit.c sizes it (kv_fit: rings first, then the full-attention blocks; the sequences
 * when not given), and the fit report of what was allocated. */
static int kv_init(engine *e, const engine_opts *opts, const fit_device *d, uint32_t n_ctx, uint64_t wbytes, char *err,
                   size_t errlen)
{
    const model_hparams *hp = &e->m.hp;
    uint32_t NL = hp->n_layer, *dims = calloc(NL, sizeof *dims), *win = calloc(NL, sizeof *win);
    if (!dims || !win) { free(dims); free(win); return ERR("out of memory"); }
    for (uint32_t l = 0; l < NL; l++) {
        dims[l] = e->m.kv_dims ? e->m.kv_dims[l] : hp->n_kv * hp->head_dim;
        win[l] = model_layer_window(&e->m, l);
    }
    if (opts->kv_type != ENGINE_KV_F16 && hp->head_dim % KV_QK) { /* a row is whole quant blocks */
        free(dims);
        free(win);
        return ERR("a %s KV cache needs a head dim in multiples of %d; this model's is %u",
                   kv_types[opts->kv_type].name, KV_QK, hp->head_dim);
    }
    /* the prefix cache's chains start from the model's name, shape and weights' size */
    char id[256];
    int idn = snprintf(id, sizeof id, "%s|%zu|%u|%u|%u|%u|%llu", hp->arch, gguf_tensor_count(e->gguf), NL, hp->n_embd,
                       hp->n_vocab, hp->n_ctx_train, (unsigned long long)wbytes);
    kv_fit_in in = { { NL, dims, win, opts->max_seqs > 0 ? (uint32_t)opts->max_seqs : 0, n_ctx, e->seq_chunk,
                       opts->kv_type, e->m.state_floats, e->m.arch->replay ? e->m.replay_floats : NULL,
                       opts->state_checkpoints > 0 ? (uint32_t)opts->state_checkpoints : 0,
                       opts->state_snapshots > 0 && !opts->no_prefix_cache ? (uint32_t)opts->state_snapshots : 0 },
                     fit_kv_room(d, wbytes), e->rt.max_alloc, opts->kv_tokens > 0 ? (uint32_t)opts->kv_tokens : 0,
                     e->rt.is_gpu ? FIT_SEQS_GPU : FIT_SEQS_OTHER, e->max_batch };
    in.c.max_chunk = e->seq_chunk = fit_seq_chunk(&in.c, e->max_batch, in.room);
    kv_fit_plan p;
    int rc = kv_fit(&in, &p, err, errlen);
    if (!rc) {
        in.c.n_seq = p.n_seq;
        rc = kv_create(&e->kv, &e->rt, &in.c, p.blocks, err, errlen);
        /* a recurrent state is kept per prefix in snapshots: without them no prefix cache for such models */
        if (!rc && !opts->no_prefix_cache && (!kv_has_state(&e->kv) || e->kv.state->n_snap))
            rc = kv_prefix_on(&e->kv, prefix_seed(id, idn < (int)sizeof id ? (size_t)idn : sizeof id - 1), err, errlen);
    }
    if (!rc) {
        engine_fit *f = &e->info.fit;
        snprintf(f->device, sizeof f->device, "%s", e->rt.device_name);
        f->is_gpu = e->rt.is_gpu;
        f->device_bytes = e->rt.global_mem;
        f->weight_bytes = wbytes;
        f->host_weight_bytes = e->m.host_bytes;
        f->n_ctx_train = hp->n_ctx_train;
        fit_report(f, &in, &p, NULL, 1);
    }
    if (!rc && opts->verbose)
        fprintf(stderr, "clgemma: KV cache (%s) %.1f MiB: %.1f KiB per token (full-attention layers, %u blocks of %d) + "
                        "%.2f MiB per sequence (sliding-window rings of %u tokens, %u blocks); %u sequences\n",
                kv_types[opts->kv_type].name, e->kv.bytes / 1048576.0, p.s.full_per_token / 1024.0, p.blocks[KV_FULL], KV_BLOCK,
                p.s.ring_per_seq / 1048576.0, p.s.ring_blocks * KV_BLOCK, p.blocks[KV_RING], p.n_seq);
    free(dims);
    free(win);
    return rc;
}

/* the part of loading shared by files and synthetic models: device, weights, KV cache, buffers */
static int engine_init(engine *e, const char *path, const engine_opts *opts, double t0, char *err, size_t errlen)
{
    char why[512];
    if (rt_create(&e->rt, opts->device, opts->profile, why, sizeof why)) { ERR("%s", why); goto fail; }
    e->rt_ok = 1;
    if (opts->n_settings < 0 || opts->n_settings > RT_MAX_SETTINGS) {
        ERR("%d settings (at most %d)", opts->n_settings, RT_MAX_SETTINGS);
        goto fail;
    }
    e->rt.settings = opts->settings;
    e->rt.n_settings = opts->n_settings;
    /* the settings apply to the ops policy now, so a misspelt name fails before the upload */
    ops_policy pol;
    ops_policy_defaults(&pol, &e->rt);
    if (ops_policy_apply(&pol, &e->rt, why, sizeof why)) { ERR("%s", why); goto fail; }
    const gguf_tensor *big;
    uint64_t wbytes = model_device_bytes(e->gguf, &big);
    fit_device dev = { e->rt.is_gpu, e->rt.global_mem, e->rt.max_alloc };
    if (fit_weights(e->rt.device_name, &dev, wbytes, big, err, errlen)) goto fail;
    if (opts->kv_type < 0 || opts->kv_type >= ENGINE_KV_TYPES) { ERR("unknown KV cache type %d", opts->kv_type); goto fail; }
    /* the cache's type is compiled into the kernels that write and read it (kernels/kv.cl) */
    if (rt_build(&e->rt, kv_types[opts->kv_type].build, opts->cache_dir, why, sizeof why)) { ERR("%s", why); goto fail; }
    if (opts->verbose)
        fprintf(stderr, "clgemma: kernels %s in %.2f s on %s\n", e->rt.cache_hit ? "loaded from cache" : "compiled",
                e->rt.build_seconds, e->rt.device_name);
    if (model_load(&e->m, e->gguf, &e->rt, e->make, why, sizeof why)) { ERR("%s: %s", path, why); goto fail; }
    if (e->make) {
        /* the device-side fill is part of loading (and reports its errors here) */
        cl_int ce = clFinish(e->rt.q);
        if (ce) { ERR("%s: filling the weights failed: %s", path, rt_errstr(ce)); goto fail; }
    }
    /* the projector's weights are on the device before the KV cache is sized around the weights */
    uint32_t image_tokens = opts->image_tokens ? (uint32_t)opts->image_tokens : 280;
    if (opts->mmproj_path) {
        if (image_tokens != 70 && image_tokens != 140 && image_tokens != 280 && image_tokens != 560 &&
            image_tokens != 1120) {
            ERR("image tokens %u: the budgets are 70, 140, 280, 560 and 1120", image_tokens);
            goto fail;
        }
        if (opts->image_attention < 0 || opts->image_attention > ENGINE_IMAGE_ATTN_BIDIR) {
            ERR("unknown image attention mode %d", opts->image_attention);
            goto fail;
        }
        if (vision_open(&e->vision, opts->mmproj_path, &e->m, &e->rt, image_tokens * IMAGE_PREP_POOL * IMAGE_PREP_POOL,
                        err, errlen))
            goto fail;
        wbytes += e->vision.weight_bytes + e->vision.scratch_bytes;
    }
    const model_hparams *hp = &e->m.hp;
    uint32_t n_ctx = fit_ctx(opts, hp->n_ctx_train);
    e->max_batch = fit_max_batch(opts, &dev, wbytes);
    size_t scratch = e->m.max_weight_elems;
    size_t out_tile = (size_t)hp->n_embd * 4096; /* logits GEMM in tiles of 4096 vocab rows */
    if (scratch < out_tile) scratch = out_tile;
    if (ops_init(&e->o, &e->rt, scratch, why, sizeof why)) { ERR("%s", why); goto fail; }
    e->o.pol = pol;
    if (kv_init(e, opts, &dev, n_ctx, wbytes, err, errlen)) goto fail;
    uint32_t n_seq = e->kv.n_seq, max_out = n_seq > 16 ? n_seq : 16;
    if (fwd_bufs_create(&e->b, &e->m, &e->rt, e->max_batch, max_out, n_ctx, why, sizeof why)) {
        ERR("%s", why);
        goto fail;
    }
    e->info.max_rows = max_out;
    if (e->vision.arch && (image_tokens > e->seq_chunk || image_tokens > e->max_batch)) {
        /* an image's rows go through one forward (its tokens see each other) */
        ERR("images of up to %u tokens need a forward of as many tokens of one sequence; this one takes %u (raise "
            "the batch tokens or lower the image tokens)", image_tokens,
            e->seq_chunk < e->max_batch ? e->seq_chunk : e->max_batch);
        goto fail;
    }
    media_create(&e->media, hp->n_embd,
                 (uint64_t)(opts->image_cache_mb > 0 ? opts->image_cache_mb : 256) << 20);
    e->info.state_checkpoints = e->kv.state ? (int)e->kv.state->n_ck : 0;
    e->info.state_snapshots = e->kv.state ? (int)e->kv.state->n_snap : 0;
    if (opts->draft_path) {
        if (!(e->draft = calloc(1, sizeof *e->draft))) { ERR("out of memory"); goto fail; }
        if (drafter_create(e->draft, opts->draft_path, &e->m, &e->rt, n_seq, n_ctx, err, errlen)) goto fail;
    }
    e->h_logits = malloc(sizeof(float) * hp->n_vocab);
    if (!e->h_logits) { ERR("out of memory"); goto fail; }
    if (choice_create(&e->choice, &e->rt, hp->n_vocab, n_seq, why, sizeof why) ||
        draw_create(&e->draw, &e->rt, hp->n_vocab, n_seq, why, sizeof why)) { ERR("%s", why); goto fail; }
    /* the file's chat template when clgemma knows it; else the family's, said once */
    gguf_str tmpl;
    char note[512];
    int has_tmpl = gguf_get_str(e->gguf, "tokenizer.chat_template", &tmpl);
    e->chat = chat_pick(e->m.arch->chat, has_tmpl == 0 ? tmpl.ptr : NULL, has_tmpl == 0 ? tmpl.len : 0, note,
                        sizeof note);
    if (has_tmpl == -2)
        snprintf(note, sizeof note, "tokenizer.chat_template is not a string; chat uses clgemma's built-in %s template",
                 chat_kind_name(e->chat));
    if (note[0] && e->tok) fprintf(stderr, "clgemma: %s: %s\n", path, note);
    e->n_stop = 0;
    /* eos, the file's eot id (if any), then the architecture's end-of-turn texts */
    int32_t cand[sizeof e->stop_ids / sizeof *e->stop_ids] = { tokenizer_eos(e->tok), -1 };
    int ncand = 2;
    int64_t eot_id;
    if (gguf_get_int(e->gguf, "tokenizer.ggml.eot_token_id", &eot_id) == 0 && eot_id >= 0 && eot_id < hp->n_vocab)
        cand[1] = (int32_t)eot_id;
    for (const char *const *s = e->m.arch->stop_texts; s && *s && ncand < (int)(sizeof cand / sizeof *cand); s++)
        cand[ncand++] = tokenizer_find(e->tok, *s);
    for (int i = 0; i < ncand; i++) {
        int dup = cand[i] < 0;
        for (int j = 0; j < e->n_stop && !dup; j++) dup = e->stop_ids[j] == cand[i];
        if (!dup) e->stop_ids[e->n_stop++] = cand[i];
    }

    engine_info *in = &e->info;
    snprintf(in->arch, sizeof in->arch, "%s", hp->arch);
    gguf_str nm;
    if (gguf_get_str(e->gguf, "general.name", &nm) == 0)
        snprintf(in->name, sizeof in->name, "%.*s", (int)(nm.len > 120 ? 120 : nm.len), nm.ptr);
    else
        snprintf(in->name, sizeof in->name, "%s", hp->arch);
    snprintf(in->device, sizeof in->device, "%s", e->rt.device_name);
    snprintf(in->platform, sizeof in->platform, "%s", e->rt.platform_name);
    in->n_vocab = hp->n_vocab;
    in->n_ctx = n_ctx;
    in->n_ctx_train = hp->n_ctx_train;
    in->n_layer = hp->n_layer;
    in->n_embd = hp->n_embd;
    in->weight_bytes = e->m.weight_bytes;
    in->device_bytes = e->m.weight_bytes + e->kv.bytes;
    if (e->draft) {
        snprintf(in->draft_arch, sizeof in->draft_arch, "%s", e->draft->m.hp.arch);
        in->draft_layers = e->draft->m.hp.n_layer;
        in->draft_embd = e->draft->m.hp.n_embd;
        in->draft_bytes = e->draft->m.weight_bytes;
        in->device_bytes += in->draft_bytes;
    }
    in->boi_token = in->eoi_token = in->image_token = -1;
    if (e->vision.arch) {
        snprintf(in->vision_proj, sizeof in->vision_proj, "%s", e->vision.hp.proj);
        in->vision_bytes = e->vision.weight_bytes + e->vision.scratch_bytes;
        in->device_bytes += in->vision_bytes;
        in->image_tokens = image_tokens;
        in->image_bidir = opts->image_attention == ENGINE_IMAGE_ATTN_BIDIR ||
                          (opts->image_attention == ENGINE_IMAGE_ATTN_AUTO && !hp->n_embd_per_layer);
        /* an image's rows and KV depend on the projector and the mask besides its pixels */
        e->image_salt = prefix_seed(e->vision.hp.proj, strlen(e->vision.hp.proj)) * 2u + (uint32_t)in->image_bidir;
        if (e->tok) {
            in->boi_token = tokenizer_find(e->tok, "<|image>");
            in->eoi_token = tokenizer_find(e->tok, "<image|>");
            in->image_token = tokenizer_find(e->tok, "<|image|>");
        }
    }
    in->host_weight_bytes = e->m.host_bytes;
    in->kv_bytes = e->kv.bytes;
    in->kv_bytes_per_token = e->kv.sizes.full_per_token;
    in->kv_ring_bytes_per_seq = e->kv.sizes.ring_per_seq;
    in->kv_ring_tokens = e->kv.sizes.ring_blocks * KV_BLOCK;
    in->device_total = e->rt.global_mem;
    in->tensor_cores = e->o.has_mma;
    in->int8_decode = ops_int8_decode(&e->o);
    in->draft_rows = in->int8_decode ? ENGINE_DECODE_ROWS : 0;
    types_summary(e->gguf, in->types, sizeof in->types);
    in->load_seconds = monotonic_seconds() - t0;
    e->rt.settings = NULL; /* the caller's strings are only borrowed for the load */
    e->rt.n_settings = 0;
    return 0;
fail:
    e->rt.settings = NULL;
    e->rt.n_settings = 0;
    return -1;
}

void engine_destroy(engine *e)
{
    if (!e) return;
    if (e->rt_ok) clFinish(e->rt.q);
    choice_destroy(&e->choice);
    draw_destroy(&e->draw);
    if (e->draft) drafter_destroy(e->draft);
    free(e->draft);
    vision_free(&e->vision);
    fwd_bufs_destroy(&e->b);
    kv_destroy(&e->kv);
    ops_destroy(&e->o);
    model_free(&e->m);
    if (e->rt_ok) rt_destroy(&e->rt);
    tokenizer_destroy(e->tok);
    gguf_close(e->gguf);
    free(e->synth_buf);
    if (e->staged) clReleaseEvent(e->staged);
    free(e->h_ids); free(e->h_pos); free(e->h_seq); free(e->h_out); free(e->h_logits);
    free(e->h_hi); free(e->h_span); free(e->h_rows);
    media_destroy(&e->media);
    free(e);
}

const engine_info *engine_get_info(const engine *e) { return &e->info; }
const tokenizer *engine_tokenizer(const engine *e) { return e->tok; }

int engine_chat_encode(const engine *e, struct json_object *messages, struct json_object *tools,
                       const engine_chat_opts *o, int32_t **ids, char *err, size_t errlen)
{
    *ids = NULL;
    if (!e->tok) { snprintf(err, errlen, "this model has no tokenizer"); return -2; }
    char bos[64] = "";
    int32_t b = tokenizer_bos(e->tok);
    int bl = b >= 0 ? tokenizer_piece(e->tok, b, 1, bos, (int)sizeof bos - 1) : 0;
    bos[bl > 0 && bl < (int)sizeof bos ? bl : 0] = 0;
    chat_opts co = { o->add_generation_prompt, o->enable_thinking, bos[0] ? bos : NULL };
    chat_text t;
    int rc = chat_render(e->chat, messages, tools, &co, &t, err, errlen);
    if (rc) return rc == -1 ? -1 : -2;
    int n = chat_tokenize(&t, e->tok, ids);
    chat_text_free(&t);
    if (n < 0) { snprintf(err, errlen, "tokenizing the chat prompt failed (out of memory)"); return -2; }
    return n;
}

const char *engine_chat_template(const engine *e) { return chat_kind_name(e->chat); }

int engine_chat_reply_syntax(const engine *e)
{
    return e->tok && chat_kind_family(e->chat) == CHAT_GEMMA4 ? REPLY_GEMMA4 : REPLY_PLAIN;
}

int engine_chat_prompt(const engine *e, const chat_msg *msgs, int n, int add_generation_prompt, char *out, size_t cap)
{
    json_object *arr = json_object_new_array();
    for (int i = 0; arr && i < n; i++) {
        json_object *m = json_object_new_object();
        if (!m || json_object_array_add(arr, m)) { json_object_put(m); json_object_put(arr); return -1; }
        json_object_object_add(m, "role", msgs[i].role ? json_object_new_string(msgs[i].role) : NULL);
        json_object_object_add(m, "content", msgs[i].content ? json_object_new_string(msgs[i].content) : NULL);
    }
    if (!arr) return -1;
    chat_opts co = { add_generation_prompt, 0, NULL };
    chat_text t;
    char err[256];
    int rc = chat_render(e->chat, arr, NULL, &co, &t, err, sizeof err);
    json_object_put(arr);
    if (rc) return -1;
    if (cap) {
        size_t k = t.len < cap ? t.len : cap - 1;
        memcpy(out, t.text, k);
        out[k] = 0;
    }
    int len = (int)t.len;
    chat_text_free(&t);
    return len;
}

int engine_is_stop_token(const engine *e, int32_t id)
{
    for (int i = 0; i < e->n_stop; i++)
        if (e->stop_ids[i] == id) return 1;
    return tokenizer_is_eog(e->tok, id); /* llama.cpp's end-of-generation set, e.g. Gemma's </s> */
}

int engine_budget(const engine *e, int n_prompt, int max_tokens, char *err, size_t errlen)
{
    uint32_t n_ctx = e->info.n_ctx;
    if (n_prompt < 0 || (uint32_t)n_prompt >= n_ctx) {
        /* OpenAI's wording: client libraries map it to their context-window error */
        errf(err, errlen, "This model's maximum context length is %u tokens. However, your prompt resulted in %d "
             "tokens. Please reduce the length of the prompt.", n_ctx, n_prompt);
        return -1;
    }
    if (max_tokens < 0) return (int)(n_ctx - (uint32_t)n_prompt);
    if ((uint64_t)n_prompt + (uint64_t)max_tokens > n_ctx) {
        errf(err, errlen, "This model's maximum context length is %u tokens. However, you requested %lld tokens "
             "(%d in the prompt, %d in the completion). Please reduce the length of the prompt or completion.",
             n_ctx, (long long)n_prompt + max_tokens, n_prompt, max_tokens);
        return -2;
    }
    return max_tokens;
}

engine_stop engine_should_stop(const engine *e, int seq, int32_t token, int n_generated, int max_tokens)
{
    if (engine_is_stop_token(e, token)) return ENGINE_STOP_TOKEN;
    if (n_generated + 1 >= max_tokens || (uint32_t)engine_seq_len(e, seq) + 1 > e->info.n_ctx)
        return ENGINE_STOP_LENGTH;
    return ENGINE_GO;
}

/* a sequence slot taken or given back: no hidden rows of its own to draft from */
static int seq_fresh(engine *e, int seq)
{
    if (e->draft) drafter_forget(e->draft, seq);
    return seq;
}
int engine_seq_new(engine *e) { return seq_fresh(e, kv_seq_new(&e->kv)); }
int engine_seq_fork(engine *e, int src)
{
    if (src < 0 || (uint32_t)src >= e->kv.n_seq || e->kv.seq_len[src] < 0) return -1;
    return seq_fresh(e, kv_seq_fork(&e->kv, src));
}
int engine_seq_new_prefix(engine *e, const int32_t *tokens, int n, int *cached)
{
    uint32_t got = 0;
    int seq = kv_seq_new_prefix(&e->kv, tokens, n > 0 ? (uint32_t)n : 0, &got);
    *cached = (int)got;
    return seq_fresh(e, seq);
}
void engine_seq_free(engine *e, int seq) { kv_seq_free(&e->kv, seq_fresh(e, seq)); }
void engine_kv_need(const engine *e, int n_prompt, int max_tokens, int n, engine_kv_blocks *out)
{
    uint32_t b[KV_POOLS];
    uint64_t total = (uint64_t)(n_prompt > 0 ? n_prompt : 0) + (uint64_t)(max_tokens > 0 ? max_tokens : 0);
    kv_need(&e->kv.sizes, n_prompt > 0 ? (uint32_t)n_prompt : 0, total > UINT32_MAX ? UINT32_MAX : (uint32_t)total,
            n > 0 ? (uint32_t)n : 1, b);
    out->full = e->kv.pool[KV_FULL].table ? b[KV_FULL] : 0;
    out->ring = e->kv.pool[KV_RING].table ? b[KV_RING] : 0;
}

void engine_kv_usage(const engine *e, engine_kv_stats *out)
{
    const kv_pool *f = &e->kv.pool[KV_FULL], *r = &e->kv.pool[KV_RING];
    *out = (engine_kv_stats){ f->n_blocks, f->n_free + f->n_lru, f->n_lru, r->n_blocks, r->n_free + r->n_lru, r->n_lru,
                              KV_BLOCK };
}

int engine_seq_truncate(engine *e, int seq, int len, const int32_t *tokens, char *err, size_t errlen)
{
    if (seq < 0 || (uint32_t)seq >= e->kv.n_seq || e->kv.seq_len[seq] < 0) return ERR("invalid sequence %d", seq);
    if (len < 0 || len >= e->kv.seq_len[seq])
        return ERR("truncate sequence %d to %d tokens: it holds %d", seq, len, e->kv.seq_len[seq]);
    if (len > 0 && !tokens) return ERR("truncate: no tokens");
    state_store *st = e->kv.state;
    int32_t ck = st ? st->ck_of[seq] : -1;
    if (st && (ck < 0 || len < st->ck_pos[ck] || state_broken(st, seq)))
        return ERR("truncate sequence %d to %d tokens: this model's recurrent state cannot go back %s%d tokens)", seq,
                   len, !st->n_ck ? "(no checkpoints: engine_opts.state_checkpoints; " : "past its last step (a draft "
                   "of 2 .. ", STATE_CK_ROWS);
    if (kv_truncate(&e->kv, seq, (uint32_t)len, tokens))
        return ERR("truncate sequence %d by %d tokens: more than its sliding-window ring keeps", seq,
                   e->kv.seq_len[seq] - len);
    /* the state: the checkpoint before the step, then the step's kept tokens again (design-qwen35 3.6) */
    uint32_t keep = st ? (uint32_t)(len - st->ck_pos[ck]) : 0;
    if (st && (state_restore(st, &e->rt, seq, (int32_t)keep, err, errlen) ||
               model_replay(&e->m, &e->o, &e->b, &e->kv, seq, keep, err, errlen))) {
        clFinish(e->rt.q);
        state_mark_broken(st, seq); /* the blocks went back, the state may be half way */
        return -1;
    }
    return 0;
}

int engine_seq_len(const engine *e, int seq)
{
    if (seq < 0 || (uint32_t)seq >= e->kv.n_seq) return -1;
    return e->kv.seq_len[seq];
}

void engine_set_profiling(engine *e, int on) { e->profiling = on; ops_profile_reset(&e->o); }

/* the staging may change only once the last step's non-blocking uploads from it have run: a step with no
 * output rows returns with them still queued behind its forward */
static int staging_free(engine *e)
{
    if (!e->staged) return 0;
    cl_int ce = clWaitForEvents(1, &e->staged);
    clReleaseEvent(e->staged);
    e->staged = NULL;
    return ce == CL_SUCCESS ? 0 : -1;
}

static int grow_staging(engine *e, size_t n)
{
    if (n <= e->h_cap) return 0;
    int32_t **arrs[] = { &e->h_ids, &e->h_pos, &e->h_seq, &e->h_out, &e->h_hi, &e->h_span };
    for (int i = 0; i < 6; i++) {
        int32_t *p = realloc(*arrs[i], n * sizeof(int32_t));
        if (!p) return -1;
        *arrs[i] = p;
    }
    fwd_rows *r = realloc(e->h_rows, n * sizeof *r);
    if (!r) return -1;
    e->h_rows = r;
    e->h_cap = n;
    return 0;
}

/* one output row of the step: which item and, for logits_all, which token of it */
typedef struct out_ref { int item; int tok; size_t tidx; } out_ref;

/* a chunk's image rows (fwd_args.rows) and whether its tokens' last keys (h_hi) go up */
typedef struct chunk_images { const fwd_rows *rows; uint32_t n_rows; int hi; uint32_t hi_extra; } chunk_images;

static int run_chunk(engine *e, engine_item *items, const out_ref *refs, uint32_t r0, uint32_t t0, uint32_t ntok,
                     uint32_t n_out, uint32_t max_pos, const chunk_images *ci, char *err, size_t errlen)
{
    cl_command_queue q = e->rt.q;
    fwd_bufs *b = &e->b;
    /* the in-order queue runs these after everything before them: staged is the last, so the next step's
     * fill waits for it (staging_free) */
    if (e->staged) { clReleaseEvent(e->staged); e->staged = NULL; }
    cl_int ce = clEnqueueWriteBuffer(q, b->ids, CL_FALSE, 0, 4 * ntok, e->h_ids + t0, 0, NULL, NULL);
    if (!ce) ce = clEnqueueWriteBuffer(q, b->pos, CL_FALSE, 0, 4 * ntok, e->h_pos + t0, 0, NULL, NULL);
    if (!ce && ci->hi) ce = clEnqueueWriteBuffer(q, b->hi, CL_FALSE, 0, 4 * ntok, e->h_hi + t0, 0, NULL, NULL);
    if (!ce && n_out) ce = clEnqueueWriteBuffer(q, b->out_rows, CL_FALSE, 0, 4 * n_out, e->h_out + r0, 0, NULL, NULL);
    if (!ce) ce = clEnqueueWriteBuffer(q, b->seq, CL_FALSE, 0, 4 * ntok, e->h_seq + t0, 0, NULL, &e->staged);
    if (ce) return ERR("upload of the batch failed: %s", rt_errstr(ce));
    fwd_args a = { ntok, n_out, max_pos, e->h_seq + t0, e->h_ids + t0, e->h_pos + t0, ci->rows, ci->n_rows, ci->hi,
                   ci->hi_extra };
    /* int8 activations only for decode steps (one token per sequence, or drafts): prompt logits keep the
     * f16/f32 accuracy the goldens hold them to (int8 X moved Gemma 3's by up to 0.48, over 0.35) */
    int decode = 1;
    for (uint32_t i = 1; i < ntok && decode; i++) decode = e->h_seq[t0 + i] != e->h_seq[t0 + i - 1];
    if (e->step_drafts) decode = 1;
    e->o.act_int8 = decode;
    double tq = monotonic_seconds();
    ops_clear(&e->o); /* a failed step's error is not this one's */
    if (model_forward(&e->m, &e->o, b, &e->kv, &a, err, errlen)) return -1;
    if (!n_out) { e->enqueue_s += monotonic_seconds() - tq; return 0; }
    /* the drafter starts from the normed rows fwd_logits leaves in xo: each item's run of them kept */
    for (uint32_t r = 0, r1; e->draft && r < n_out; r = r1) {
        const out_ref *f = &refs[r0 + r];
        for (r1 = r + 1; r1 < n_out && refs[r0 + r1].item == f->item; r1++) {}
        if (drafter_keep(e->draft, q, b->xo, r, items[f->item].seq, f->tok, (int)(r1 - r)))
            return ERR("keeping the drafter's rows failed");
    }
    /* greedy rows: argmax on the device, only ids (and asked-for logprobs) come back; others get their
     * logits row. Masks and biases go first, so both kinds choose from the processed row. */
    uint32_t nv = e->m.hp.n_vocab;
    choice_constrain(&e->choice, &e->o, b->logits, r0, n_out);
    op_argmax(&e->o, b->logits, n_out, nv, b->argmax);
    choice_logprobs(&e->choice, &e->o, b->logits, r0, n_out);
    draw_launch(&e->draw, &e->o, b->logits, r0, n_out);
    if (ops_status(&e->o, err, errlen)) return -1;
    e->enqueue_s += monotonic_seconds() - tq;
    int32_t ids[256];
    if (n_out > 256) return ERR("internal: too many output rows");
    ce = clEnqueueReadBuffer(q, b->argmax, CL_TRUE, 0, 4 * n_out, ids, 0, NULL, NULL);
    if (ce) return ERR("reading sampled ids failed: %s", rt_errstr(ce));
    for (uint32_t r = 0; r < n_out; r++) {
        engine_item *it = &items[refs[r0 + r].item];
        int last = refs[r0 + r].tok == it->n_tokens - 1;
        if (it->logits) {
            float *dst = it->logits + (it->logits_all ? (size_t)refs[r0 + r].tok * nv : 0);
            ce = clEnqueueReadBuffer(q, b->logits, CL_TRUE, 4 * (size_t)r * nv, 4 * (size_t)nv, dst, 0, NULL, NULL);
            if (ce) return ERR("reading logits failed: %s", rt_errstr(ce));
        }
        if (it->ids_all) it->ids_all[refs[r0 + r].tok] = ids[r];
        if (!last || !it->smp) continue;
        for (int k = 0; k < it->n_tokens; k++) sampler_accept(it->smp, it->tokens[k]);
        if (sampler_is_greedy(it->smp)) {
            it->token_out = ids[r];
            if (it->n_logprobs > 0) choice_fill(&e->choice, (int32_t)(r0 + r), it);
        } else if ((it->token_out = draw_pick(&e->draw, (int32_t)(r0 + r), it->smp)) < 0) {
            /* a row the device did not draw for: the whole row to the host */
            ce = clEnqueueReadBuffer(q, b->logits, CL_TRUE, 4 * (size_t)r * nv, 4 * (size_t)nv, e->h_logits, 0, NULL,
                                     NULL);
            if (ce) return ERR("reading logits failed: %s", rt_errstr(ce));
            it->token_out = it->n_logprobs > 0 ? sampler_sample_logprobs(it->smp, e->h_logits, it->n_logprobs, it->lp)
                                               : sampler_sample(it->smp, e->h_logits);
        }
    }
    return 0;
}

/* the prefix cache's side of chunk [t0, t0 + tn) of the step's tokens, for each item it holds tokens of:
 * before its forward (after = 0) the blocks it writes made the item's own again where the blocks an
 * earlier chunk completed were registered since; after it, those the chunk completed registered */
static int chunk_kv(engine *e, const engine_item *items, int n, size_t t0, size_t tn, int after)
{
    size_t off = 0;
    for (int i = 0; i < n; off += (size_t)items[i].n_tokens, i++) {
        size_t end = off + (size_t)items[i].n_tokens, a = t0 > off ? t0 : off, b = t0 + tn < end ? t0 + tn : end;
        if (a >= b) continue;
        int seq = items[i].seq;
        uint32_t from = (uint32_t)(e->kv.seq_len[seq] + (a - off)), to = from + (uint32_t)(b - a);
        if (after) kv_written(&e->kv, seq, items[i].tokens + (a - off), from, to);
        else if (kv_own(&e->kv, seq, from, to)) return -1;
    }
    return 0;
}

/* an item's spans: in order, inside its tokens, each an encoded image's tail whose ids are its soft
 * tokens' and which fits one forward */
static int check_spans(engine *e, const engine_item *it, char *why, size_t cap)
{
    if (!it->n_spans) return 0;
    if (it->n_spans < 0 || !it->spans) return snprintf(why, cap, "bad image spans (%d)", it->n_spans), -1;
    if (!e->vision.arch) return snprintf(why, cap, "image tokens, but this model has no vision projector"), -1;
    int end = 0;
    uint32_t most = e->seq_chunk < e->max_batch ? e->seq_chunk : e->max_batch;
    for (int s = 0; s < it->n_spans; s++) {
        const engine_span *sp = &it->spans[s];
        int S = sp->image ? engine_image_tokens(sp->image) : 0;
        if (!sp->image || sp->n < 1 || sp->first < 0 || sp->first + sp->n != S || sp->offset < end ||
            sp->offset + sp->n > it->n_tokens)
            return snprintf(why, cap, "image span %d (tokens %d + %d, image tokens %d + of %d) is not an image's "
                            "tail inside the item after the span before", s, sp->offset, sp->n, sp->first, S), -1;
        if ((uint32_t)sp->n > most)
            return snprintf(why, cap, "image span %d of %d tokens is over the %u a forward holds", s, sp->n, most), -1;
        if (!engine_image_rows(e, sp->image))
            return snprintf(why, cap, "image span %d: the image is not encoded (engine_image_encode)", s), -1;
        for (int k = 0; k < sp->n; k++)
            if (it->tokens[sp->offset + k] != engine_image_token(sp->image, sp->first + k))
                return snprintf(why, cap, "image span %d: token %d is not the image's", s, sp->offset + k), -1;
        end = sp->offset + sp->n;
    }
    return 0;
}

/* per item the token index (in the step's order) its last block boundary falls before, where a snapshot of the
 * recurrent state is kept (kv_snapshot): prompt items (not drafts) of 2 tokens or more that reach a boundary;
 * SIZE_MAX for the others, ascending for the rest. NULL without snapshots (or out of memory: none kept). */
static size_t *snapshot_cuts(const engine *e, const engine_item *items, int n)
{
    if (!e->kv.state || !e->kv.state->n_snap || !e->kv.prefix.cap) return NULL;
    size_t *cut = malloc(sizeof *cut * (size_t)n), off = 0;
    for (int i = 0; cut && i < n; off += (size_t)items[i].n_tokens, i++) {
        uint32_t len = (uint32_t)e->kv.seq_len[items[i].seq], b = (len + (uint32_t)items[i].n_tokens) / KV_BLOCK * KV_BLOCK;
        int prompt = items[i].n_tokens >= 2 && !items[i].draft && !items[i].ids_all;
        cut[i] = prompt && b > len ? off + (b - len) : SIZE_MAX;
    }
    return cut;
}

int engine_step(engine *e, engine_item *items, int n, char *err, size_t errlen)
{
    if (n <= 0) return ERR("empty batch");
    size_t total = 0, n_out = 0;
    int drafts = 1; /* every item one token or a draft: decode's precision */
    for (int i = 0; i < n; i++) {
        engine_item *it = &items[i];
        if (it->seq < 0 || (uint32_t)it->seq >= e->kv.n_seq || e->kv.seq_len[it->seq] < 0)
            return ERR("item %d: invalid sequence %d", i, it->seq);
        for (int j = 0; j < i; j++)
            if (items[j].seq == it->seq) return ERR("item %d: sequence %d appears twice in one step", i, it->seq);
        if (it->n_tokens <= 0 || !it->tokens) return ERR("item %d: no tokens", i);
        if (e->kv.state && state_broken(e->kv.state, it->seq))
            return ERR("item %d: sequence %d's recurrent state was left part-written by a failed step: free it", i,
                       it->seq);
        if ((uint64_t)e->kv.seq_len[it->seq] + it->n_tokens > e->info.n_ctx)
            return ERR("sequence would reach %lld tokens, over the context of %u",
                       (long long)e->kv.seq_len[it->seq] + it->n_tokens, e->info.n_ctx);
        char why[160];
        if (check_spans(e, it, why, sizeof why)) return ERR("item %d: %s", i, why);
        for (int k = 0, s = 0; k < it->n_tokens; k++) {
            if (s < it->n_spans && k == it->spans[s].offset) { k += it->spans[s++].n - 1; continue; }
            if (it->tokens[k] < 0 || (uint32_t)it->tokens[k] >= e->info.n_vocab)
                return ERR("item %d: token id %d out of range [0, %u)", i, it->tokens[k], e->info.n_vocab);
        }
        if (choice_check(it, e->info.n_vocab, why, sizeof why)) return ERR("item %d: %s", i, why);
        if (it->ids_all && (!it->smp || !sampler_is_greedy(it->smp) || choice_wanted(it) || it->logits_all))
            return ERR("item %d: ids_all needs a greedy sampler and no allow, bias, logprobs or logits_all", i);
        total += it->n_tokens;
        drafts = drafts && (it->n_tokens == 1 || it->draft || it->ids_all);
        n_out += it->logits_all || it->ids_all ? (size_t)it->n_tokens : (it->smp || it->logits) ? 1 : 0;
    }
    out_ref *refs = malloc((n_out ? n_out : 1) * sizeof *refs);
    if (staging_free(e)) { free(refs); return ERR("the last step's upload failed"); }
    if (!refs || grow_staging(e, total + n_out)) { free(refs); return ERR("out of memory"); }
    /* reserve KV blocks for every item first, so a full cache fails before any work */
    for (int i = 0; i < n; i++) {
        if (kv_reserve(&e->kv, items[i].seq, (uint32_t)(e->kv.seq_len[items[i].seq] + items[i].n_tokens))) {
            for (int j = 0; j <= i; j++) kv_trim(&e->kv, items[j].seq, (uint32_t)e->kv.seq_len[items[j].seq]);
            free(refs);
            ERR("KV cache full: no free blocks for sequence %d (pools of %u full-attention and %u "
                "sliding-window blocks of %d tokens)", items[i].seq, e->kv.pool[KV_FULL].n_blocks,
                e->kv.pool[KV_RING].n_blocks, KV_BLOCK);
            return ENGINE_KV_FULL;
        }
    }
    e->step_drafts = drafts;
    if (e->kv.state) state_step_begin(e->kv.state);
    for (int i = 0; e->kv.state && i < n; i++) /* the state before a verification, which may be cut back */
        if (items[i].draft || items[i].ids_all)
            state_checkpoint(e->kv.state, items[i].seq, e->kv.seq_len[items[i].seq], items[i].n_tokens);
    for (int i = 0; e->draft && i < n; i++)
        drafter_step_begin(e->draft, items[i].seq, (uint32_t)e->kv.seq_len[items[i].seq], items[i].n_tokens);
    kv_step_begin(&e->kv);
    int rc = kv_sync(&e->kv, &e->rt, err, errlen);
    /* flatten tokens item by item; a chunk holds at most max_batch tokens, seq_chunk of one sequence
     * and max_out outputs */
    size_t t = 0, r = 0;
    choice_begin(&e->choice);
    draw_begin(&e->draw);
    uint32_t n_rows = 0;
    for (int i = 0; i < n; i++) {
        engine_item *it = &items[i];
        int s = 0, s_end = -1, s_hi = 0; /* the span token k is in: ends before s_end, sees up to s_hi */
        for (int k = 0; k < it->n_tokens; k++, t++) {
            int32_t pos = e->kv.seq_len[it->seq] + k;
            e->h_span[t] = 0;
            if (s < it->n_spans && k == it->spans[s].offset) {
                const engine_span *sp = &it->spans[s++];
                s_end = k + sp->n;
                s_hi = pos + sp->n - 1;
                e->h_span[t] = sp->n;
                e->h_rows[n_rows++] = (fwd_rows){ engine_image_rows(e, sp->image), (uint32_t)sp->first, (uint32_t)t,
                                                  (uint32_t)sp->n };
            }
            int in_image = k < s_end;
            e->h_ids[t] = in_image ? 0 : it->tokens[k]; /* an image token's embedding row: the pad's */
            e->h_pos[t] = pos;
            e->h_hi[t] = in_image && e->info.image_bidir ? s_hi : pos;
            e->h_seq[t] = it->seq;
            int want = it->logits_all || it->ids_all || (k == it->n_tokens - 1 && (it->smp || it->logits));
            if (want && k == it->n_tokens - 1 && it->smp && choice_wanted(it))
                choice_add(&e->choice, it, (int32_t)r, sampler_is_greedy(it->smp));
            if (want && k == it->n_tokens - 1) draw_add(&e->draw, it, (int32_t)r);
            if (want) { refs[r] = (out_ref){ i, k, t }; r++; }
        }
    }
    if (!rc) rc = choice_upload(&e->choice, e->rt.q, err, errlen);
    if (!rc) rc = draw_upload(&e->draw, e->rt.q, err, errlen);
    /* a recurrent state is kept for the prefix cache at the last block boundary of each prompt item: a forward
     * ends there (cut: that token's index; the item's end where that is the boundary) */
    size_t *cut = snapshot_cuts(e, items, n);
    size_t t0 = 0, r0 = 0, w0 = 0, cj = 0; /* w0: the step's first image run not yet in a chunk */
    while (!rc && t0 < total) {
        size_t tn = 0, rn = 0, rr = r0;
        uint32_t max_pos = 0, run = 0; /* run: the current sequence's tokens in the chunk */
        /* grow the chunk token by token, an image's tokens all at once, until a limit is hit */
        while (t0 + tn < total && tn < e->max_batch) {
            size_t u = t0 + tn, len = e->h_span[u] > 0 ? (size_t)e->h_span[u] : 1, outs = 0;
            while (rr + outs < n_out && refs[rr + outs].tidx < u + len) outs++; /* rows are in token order */
            uint32_t nrun = (tn > 0 && e->h_seq[u] == e->h_seq[u - 1] ? run : 0) + (uint32_t)len;
            if (tn + len > e->max_batch || rn + outs > e->b.max_out || nrun > e->seq_chunk) {
                if (!tn) rc = ERR("an image of %zu tokens with %zu output rows does not fit one forward (%u rows)", len,
                                  outs, e->b.max_out);
                break;
            }
            while (cut && cj < (size_t)n && (cut[cj] == SIZE_MAX || cut[cj] < u)) cj++;
            if (cut && tn > 0 && cj < (size_t)n && cut[cj] == u) break;
            run = nrun;
            for (size_t k = 0; k < len; k++, tn++) {
                if ((uint32_t)e->h_pos[t0 + tn] > max_pos) max_pos = (uint32_t)e->h_pos[t0 + tn];
                /* out_rows index the chunk's own tokens */
                if (rr < n_out && refs[rr].tidx == t0 + tn) { e->h_out[rr] = (int32_t)tn; rr++; rn++; }
            }
        }
        chunk_images ci = { e->h_rows + w0, 0, 0, 0 };
        while (w0 + ci.n_rows < n_rows && e->h_rows[w0 + ci.n_rows].dst < t0 + tn) {
            e->h_rows[w0 + ci.n_rows].dst -= (uint32_t)t0; /* the chunk's own rows */
            ci.n_rows++;
        }
        w0 += ci.n_rows;
        for (size_t k = t0; k < t0 + tn; k++) {
            uint32_t extra = (uint32_t)(e->h_hi[k] - e->h_pos[k]);
            if (extra > ci.hi_extra) ci.hi_extra = extra;
        }
        ci.hi = ci.hi_extra > 0;
        if (t0 > 0 && chunk_kv(e, items, n, t0, tn, 0)) rc = ERR("internal: a KV block to write is shared");
        if (!rc && t0 > 0) rc = kv_sync(&e->kv, &e->rt, err, errlen);
        if (!rc) rc = run_chunk(e, items, refs, (uint32_t)r0, (uint32_t)t0, (uint32_t)tn, (uint32_t)rn, max_pos, &ci,
                                err, errlen);
        if (!rc) chunk_kv(e, items, n, t0, tn, 1);
        for (size_t i = 0, off = 0; !rc && cut && i < (size_t)n; off += (size_t)items[i].n_tokens, i++) {
            size_t end = off + (size_t)items[i].n_tokens, last = t0 + tn < end ? t0 + tn : end;
            if (cut[i] != SIZE_MAX && cut[i] > t0 && last == cut[i]) kv_snapshot(&e->kv, items[i].seq);
        }
        t0 += tn;
        r0 += rn;
    }
    free(cut);
    if (rc) {
        clFinish(e->rt.q);
        kv_abort(&e->kv);
        /* the forward may have updated some layers' state in place: no retry may apply these tokens again */
        for (int i = 0; e->kv.state && i < n; i++) state_mark_broken(e->kv.state, items[i].seq);
        for (int i = 0; i < n; i++) {
            kv_trim(&e->kv, items[i].seq, (uint32_t)e->kv.seq_len[items[i].seq]);
            seq_fresh(e, items[i].seq);
        }
        free(refs);
        return -1;
    }
    for (int i = 0; i < n; i++)
        kv_commit(&e->kv, items[i].seq, (uint32_t)(e->kv.seq_len[items[i].seq] + items[i].n_tokens));
    free(refs);
    if (e->profiling) clFinish(e->rt.q);
    return 0;
}

int engine_draft(engine *e, engine_draft_item *items, int n, char *err, size_t errlen)
{
    if (!e->draft) return ERR("no drafter loaded (--draft FILE)");
    if (n <= 0) return 0;
    if (staging_free(e)) return ERR("the last step's upload failed");
    double tq = monotonic_seconds();
    ops_clear(&e->o);
    e->o.act_int8 = 1; /* one token per sequence: decode's products */
    int rc = drafter_run(e->draft, &e->m, &e->o, &e->kv, items, n, err, errlen);
    e->enqueue_s += monotonic_seconds() - tq;
    return rc;
}

void engine_profile_print(engine *e, double wall_ms, int steps) { ops_profile_print(&e->o, wall_ms, steps); }
double engine_enqueue_seconds(const engine *e) { return e->enqueue_s; }
