/* engine.c — see engine.h. Owns the runtime, model, KV cache and forward buffers: loading, the generation
 * rules and the sequences; steps are engine_step.c's, images engine_image.c's. */
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

/* engine_int.h */
int engine_seq_fresh(engine *e, int seq)
{
    if (e->draft) drafter_forget(e->draft, seq);
    return seq;
}
int engine_seq_new(engine *e) { return engine_seq_fresh(e, kv_seq_new(&e->kv)); }
int engine_seq_fork(engine *e, int src)
{
    if (src < 0 || (uint32_t)src >= e->kv.n_seq || e->kv.seq_len[src] < 0) return -1;
    return engine_seq_fresh(e, kv_seq_fork(&e->kv, src));
}
int engine_seq_new_prefix(engine *e, const int32_t *tokens, int n, int *cached)
{
    uint32_t got = 0;
    int seq = kv_seq_new_prefix(&e->kv, tokens, n > 0 ? (uint32_t)n : 0, &got);
    *cached = (int)got;
    return engine_seq_fresh(e, seq);
}
void engine_seq_free(engine *e, int seq) { kv_seq_free(&e->kv, engine_seq_fresh(e, seq)); }
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

void engine_profile_reset(engine *e) { ops_profile_reset(&e->o); }


void engine_profile_print(engine *e, double wall_ms, int steps) { ops_profile_print(&e->o, wall_ms, steps); }
double engine_enqueue_seconds(const engine *e) { return e->enqueue_s; }
void engine_hold_steps(engine *e, int on) { e->hold = on; }
double engine_device_seconds(const engine *e) { return e->device_s; }
