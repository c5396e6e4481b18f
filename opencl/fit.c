/* fit.c — see fit.h; engine_fit_file and engine_fit_summary of engine.h. */
#include "fit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "gguf.h"
#include "model.h"
#include "runtime.h"

#define MIB(x) ((double)(x) / 1048576.0)
#define GIB(x) ((double)(x) / 1073741824.0)

uint32_t fit_ctx(const engine_opts *opts, uint32_t n_ctx_train)
{
    uint32_t n = opts->n_ctx > 0 ? (uint32_t)opts->n_ctx : n_ctx_train < 8192 ? n_ctx_train : 8192;
    return n > n_ctx_train ? n_ctx_train : n;
}

uint32_t fit_max_batch(const engine_opts *opts, const fit_device *d, uint64_t weight_bytes)
{
    /* prefill products fill a GPU with 128 x 128 tiles, MoE experts see whole tiles of tokens
     * (docs/PERF.md, "Defaults and their measurements") */
    uint64_t spare = d->global_mem > weight_bytes ? d->global_mem - weight_bytes : 0;
    return opts->max_batch_tokens > 0 ? (uint32_t)opts->max_batch_tokens : d->is_gpu && spare >= (16ull << 30) ? 2048 : 512;
}

uint32_t fit_seq_chunk(const kv_config *c, uint32_t max_batch, uint64_t room)
{
    if (max_batch <= FIT_SEQ_CHUNK || c->n_seq == 0) return max_batch < FIT_SEQ_CHUNK ? max_batch : FIT_SEQ_CHUNK;
    kv_config whole = *c;
    whole.max_chunk = max_batch;
    kv_sizes s = kv_plan(&whole);
    return (uint64_t)c->n_seq * s.ring_per_seq <= room / FIT_RING_SHARE ? max_batch : FIT_SEQ_CHUNK;
}

uint64_t fit_kv_room(const fit_device *d, uint64_t weight_bytes)
{
    return d->global_mem > weight_bytes ? (d->global_mem - weight_bytes) / 3 : 0;
}

int fit_weights(const char *device_name, const fit_device *d, uint64_t weight_bytes, const gguf_tensor *largest,
                char *err, size_t errlen)
{
    if (weight_bytes > d->global_mem)
        return ERR("model needs %.2f GiB of weights but device '%s' has %.2f GiB", GIB(weight_bytes), device_name,
                   GIB(d->global_mem));
    if (largest && largest->nbytes > d->max_alloc) /* every weight lives in one buffer */
        return ERR("tensor '%.*s' (%.1f MiB) is larger than one buffer may be on device '%s' (max allocation %.1f MiB)",
                   (int)largest->name.len, largest->name.ptr, MIB(largest->nbytes), device_name, MIB(d->max_alloc));
    return 0;
}

static uint64_t blocks_of(uint64_t tokens) { return (tokens + KV_BLOCK - 1) / KV_BLOCK; }

int kv_fit(const kv_fit_in *in, kv_fit_plan *out, char *err, size_t errlen)
{
    const kv_config *c = &in->c;
    kv_sizes s = kv_plan(c);
    uint64_t room = in->room, ctx_blocks = blocks_of(c->n_ctx);
    uint64_t pools = s.state_ck_bytes + s.state_snap_bytes; /* fixed, whatever the sequences */
    if (pools > room)
        return ERR("not enough device memory for %u checkpoints and %u snapshots of the recurrent state (%.1f MiB; "
                   "%.1f MiB for the cache): fewer (state_checkpoints, state_snapshots)", c->state_ck, c->state_snaps,
                   MIB(pools), MIB(room));
    room -= pools;
    /* bytes of one block over all the pool's layers; blocks one buffer may hold */
    uint64_t fb = s.full_per_token * KV_BLOCK, rb = s.ring_blocks ? s.ring_per_seq / s.ring_blocks : 0;
    uint64_t fcap = s.full_dim_max ? in->max_alloc / (KV_BLOCK * kv_bytes(c->type, s.full_dim_max)) : 0;
    uint64_t rcap = s.ring_dim_max ? in->max_alloc / (KV_BLOCK * kv_bytes(c->type, s.ring_dim_max)) : 0;
    uint64_t one_full = ctx_blocks * fb, n_seq = c->n_seq, nr = 0, nf = 0;
    memset(out, 0, sizeof *out);
    if (!n_seq) { /* as many typical reservations as the room (or kv_tokens) holds */
        uint64_t typ = blocks_of(c->n_ctx < ENGINE_FIT_TYPICAL ? c->n_ctx : ENGINE_FIT_TYPICAL);
        uint64_t per = s.ring_per_seq + s.state_per_seq + typ * fb;
        n_seq = in->kv_tokens && fb ? blocks_of(in->kv_tokens) / typ : per ? room / per : in->seq_cap;
        if (n_seq > in->seq_cap) n_seq = in->seq_cap;
        if (n_seq < 1) n_seq = 1;
    }
    uint64_t state = n_seq * s.state_per_seq; /* a recurrent state slot per sequence, whatever its length */
    if (state > room)
        return ERR("not enough device memory for the recurrent state of %llu sequences (%.1f MiB each; %.1f MiB for "
                   "the cache): fewer sequences (max_seqs)", (unsigned long long)n_seq, MIB(s.state_per_seq), MIB(room));
    room -= state;
    if (rb) {
        nr = n_seq * s.ring_blocks;
        if (nr * rb + one_full > room) nr = room > one_full ? (room - one_full) / rb : 0;
        if (nr > rcap) nr = rcap;
    }
    uint64_t left = room > nr * rb ? room - nr * rb : 0;
    if (fb && in->kv_tokens) {
        nf = blocks_of(in->kv_tokens);
        if (in->kv_tokens < c->n_ctx)
            return ERR("a KV cache of %u tokens (kv_tokens) holds less than one context of %u", in->kv_tokens, c->n_ctx);
        if (nf * fb > left || nf > fcap)
            return ERR("a KV cache of %u tokens (kv_tokens) needs %.1f MiB in the full-attention layers; %.1f MiB are "
                       "left for them%s", in->kv_tokens, MIB(nf * fb), MIB(left),
                       nf > fcap ? " within one buffer of the device's max allocation" : "");
    } else if (fb) {
        nf = n_seq * ctx_blocks;
        if (nf * fb > left) nf = left / fb;
        if (nf > fcap) nf = fcap;
    }
    /* what the room leaves beside both pools doubles the ring pool at most: spare ring blocks keep
     * cached prefixes' windows (kv.c), which the sequences' own rings, a window and a chunk, barely can */
    uint64_t spare = rb && left > nf * fb ? (left - nf * fb) / rb : 0, base = n_seq * s.ring_blocks;
    if (rb && nr == base) nr += spare < base ? spare : base;
    if (nr > rcap) nr = rcap;
    if ((rb && nr < s.ring_blocks) || (fb && nf < ctx_blocks))
        return ERR("not enough device memory for a KV cache of %u tokens (%.1f MiB for one sequence: %.1f KiB per token "
                   "in the full-attention layers, %.1f MiB of sliding-window ring; %.1f MiB free after weights, a third "
                   "of it for the cache; one layer's K or V at most %.1f MiB, the device's max allocation)",
                   c->n_ctx, MIB(one_full + s.ring_per_seq), s.full_per_token / 1024.0, MIB(s.ring_per_seq),
                   MIB(room * 3), MIB(in->max_alloc));
    out->s = s;
    out->n_seq = (uint32_t)n_seq;
    out->blocks[KV_FULL] = (uint32_t)nf;
    out->blocks[KV_RING] = (uint32_t)nr;
    out->bytes = nf * fb + nr * rb + state + pools;
    return 0;
}

/* the longest context at most in's (a multiple of 256 below it) whose plan fits; 0: none */
static uint32_t largest_ctx(const kv_fit_in *in)
{
    kv_fit_in t = *in;
    kv_fit_plan p;
    char why[8];
    for (uint32_t c = in->c.n_ctx; c > 0; c = c % 256 ? c / 256 * 256 : c - 256) {
        t.c.n_ctx = c;
        if (!kv_fit(&t, &p, why, sizeof why)) return c;
    }
    return 0;
}

void fit_report(engine_fit *f, const kv_fit_in *in, const kv_fit_plan *p, const char *err_plan, int weights_fit)
{
    const kv_config *c = &in->c;
    kv_sizes s = kv_plan(c);
    f->n_layer = c->n_layer;
    f->n_ctx = c->n_ctx;
    f->max_batch = in->max_batch;
    f->seq_chunk = c->max_chunk;
    f->kv_type = c->type;
    f->kv_room = in->room;
    f->full_layers = s.full_layers;
    f->sliding_layers = s.ring_layers;
    f->shared_layers = c->n_layer - s.full_layers - s.ring_layers;
    for (uint32_t l = 0; c->state && l < c->n_layer; l++) f->shared_layers -= c->state[l] != 0; /* recurrent ones */
    f->window = s.ring_window;
    f->full_token_bytes = s.full_per_token;
    f->ring_tokens = s.ring_blocks * KV_BLOCK;
    f->ring_seq_bytes = s.ring_per_seq;
    f->state_seq_bytes = s.state_per_seq;
    f->sliding_token_bytes = f->ring_tokens ? s.ring_per_seq / f->ring_tokens : 0;
    f->block_tokens = KV_BLOCK;
    uint64_t per = s.ring_per_seq + s.state_per_seq; /* what a sequence holds whatever its length */
    uint64_t room = in->room, one_seq = per + blocks_of(c->n_ctx) * KV_BLOCK * s.full_per_token;
    uint64_t typ = per + blocks_of(c->n_ctx < ENGINE_FIT_TYPICAL ? c->n_ctx : ENGINE_FIT_TYPICAL) * KV_BLOCK *
                   s.full_per_token;
    f->room_tokens = room > per && s.full_per_token ? (room - per) / s.full_per_token : 0;
    f->seqs_at_ctx = one_seq ? (uint32_t)(room / one_seq > UINT32_MAX ? UINT32_MAX : room / one_seq) : 0;
    f->seqs_typical = typ ? (uint32_t)(room / typ > UINT32_MAX ? UINT32_MAX : room / typ) : 0;
    f->fits = err_plan == NULL;
    snprintf(f->why, sizeof f->why, "%s", err_plan ? err_plan : "");
    if (!err_plan) {
        f->n_seq = p->n_seq;
        f->full_blocks = p->blocks[KV_FULL];
        f->ring_blocks = p->blocks[KV_RING];
        f->kv_tokens = (uint64_t)p->blocks[KV_FULL] * KV_BLOCK;
        f->kv_bytes = p->bytes;
    }
    /* the recommendation: the asked context (or the longest below it that fits), the sequences the
     * engine would size for it */
    f->rec_ctx = f->rec_seqs = 0;
    if (!weights_fit || room == 0) return;
    kv_fit_in t = *in;
    t.c.n_seq = 0;
    t.kv_tokens = 0;
    f->rec_ctx = largest_ctx(&t);
    kv_fit_plan rp;
    char why[8];
    t.c.n_ctx = f->rec_ctx;
    if (f->rec_ctx && !kv_fit(&t, &rp, why, sizeof why)) f->rec_seqs = rp.n_seq;
    else f->rec_ctx = 0;
}

int engine_fit_file(const char *path, const engine_opts *opts, engine_fit *out, char *err, size_t errlen)
{
    engine_opts def = { 0 };
    if (!opts) opts = &def;
    memset(out, 0, sizeof *out);
    gguf_file *f = NULL;
    model_kv_layout lay = { 0 };
    cl_runtime rt;
    char why[512];
    int rc = -1;
    if (opts->kv_type < 0 || opts->kv_type >= ENGINE_KV_TYPES) { ERR("unknown KV cache type %d", opts->kv_type); goto done; }
    if (gguf_open(&f, path, why, sizeof why)) { ERR("%s", why); goto done; }
    if (model_kv_layout_read(f, &lay, why, sizeof why)) { ERR("%s: %s", path, why); goto done; }
    if (rt_pick(&rt, opts->device, why, sizeof why)) { ERR("%s", why); goto done; }
    const gguf_tensor *big;
    uint64_t all = 0;
    for (size_t i = 0; i < gguf_tensor_count(f); i++) all += gguf_tensor_at(f, i)->nbytes;
    out->weight_bytes = model_device_bytes(f, &big);
    out->host_weight_bytes = all - out->weight_bytes;
    snprintf(out->device, sizeof out->device, "%s", rt.device_name);
    out->is_gpu = rt.is_gpu;
    out->device_bytes = rt.global_mem;
    out->n_ctx_train = lay.n_ctx_train;
    fit_device d = { rt.is_gpu, rt.global_mem, rt.max_alloc };
    uint32_t max_batch = fit_max_batch(opts, &d, out->weight_bytes);
    kv_fit_in in = { { lay.n_layer, lay.dims, lay.window, opts->max_seqs > 0 ? (uint32_t)opts->max_seqs : 0,
                       fit_ctx(opts, lay.n_ctx_train), 0, opts->kv_type, lay.state,
                       lay.replay, opts->state_checkpoints > 0 ? (uint32_t)opts->state_checkpoints : 0,
                       opts->state_snapshots > 0 && !opts->no_prefix_cache ? (uint32_t)opts->state_snapshots : 0 },
                     fit_kv_room(&d, out->weight_bytes), rt.max_alloc, opts->kv_tokens > 0 ? (uint32_t)opts->kv_tokens : 0,
                     rt.is_gpu ? FIT_SEQS_GPU : FIT_SEQS_OTHER, max_batch };
    in.c.max_chunk = fit_seq_chunk(&in.c, max_batch, in.room);
    kv_fit_plan p = { 0 };
    /* the load's own checks: weights first, then the cache */
    int weights_fit = fit_weights(rt.device_name, &d, out->weight_bytes, big, why, sizeof why) == 0;
    if (weights_fit && kv_fit(&in, &p, why, sizeof why) == 0) why[0] = 0;
    fit_report(out, &in, &p, why[0] ? why : NULL, weights_fit);
    rc = 0;
done:
    model_kv_layout_free(&lay);
    gguf_close(f);
    return rc;
}

/* "512 B", "3.0 KiB", "15.0 MiB", "1.95 GiB" */
static const char *human(uint64_t n, char *buf, size_t cap)
{
    if (n >= (1ull << 30)) snprintf(buf, cap, "%.2f GiB", GIB(n));
    else if (n >= (1ull << 20)) snprintf(buf, cap, "%.1f MiB", MIB(n));
    else if (n >= 1024) snprintf(buf, cap, "%.1f KiB", n / 1024.0);
    else snprintf(buf, cap, "%llu B", (unsigned long long)n);
    return buf;
}

int engine_fit_summary(const engine_fit *f, char *out, size_t cap)
{
    char b[8][24], kinds[320];
    int k = snprintf(kinds, sizeof kinds, "%u full-attention layers %s", f->full_layers,
                     human(f->full_token_bytes, b[0], sizeof b[0]));
    if (f->sliding_layers)
        k += snprintf(kinds + k, sizeof kinds - (size_t)k, ", %u sliding-window layers (window %u) %s in a ring of %u "
                      "tokens (%s per sequence)", f->sliding_layers, f->window,
                      human(f->sliding_token_bytes, b[1], sizeof b[1]), f->ring_tokens,
                      human(f->ring_seq_bytes, b[2], sizeof b[2]));
    if (f->state_seq_bytes && k < (int)sizeof kinds)
        k += snprintf(kinds + k, sizeof kinds - (size_t)k, ", recurrent state %s per sequence",
                      human(f->state_seq_bytes, b[2], sizeof b[2]));
    else if (f->shared_layers && k < (int)sizeof kinds)
        snprintf(kinds + k, sizeof kinds - (size_t)k, ", %u layers sharing an earlier layer's cache", f->shared_layers);
    int n = snprintf(out, cap, "fit on %s (%s): weights %s (+ %s in host memory); KV (%s) per token: %s; the cache may take "
                     "%s (a third of what the weights leave): %llu tokens of one sequence, %u sequences of the whole "
                     "%u-token context or %u of %u tokens; ", f->device, human(f->device_bytes, b[3], sizeof b[3]),
                     human(f->weight_bytes, b[4], sizeof b[4]), human(f->host_weight_bytes, b[5], sizeof b[5]),
                     engine_kv_type_name(f->kv_type), kinds,
                     human(f->kv_room, b[6], sizeof b[6]), (unsigned long long)f->room_tokens, f->seqs_at_ctx, f->n_ctx,
                     f->seqs_typical, f->n_ctx < ENGINE_FIT_TYPICAL ? f->n_ctx : ENGINE_FIT_TYPICAL);
    size_t o = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap;
    if (f->fits)
        n = snprintf(out + o, cap - o, "planned %u sequences sharing %llu tokens (%s of KV); recommended --ctx %u "
                     "--max-seqs %u", f->n_seq, (unsigned long long)f->kv_tokens, human(f->kv_bytes, b[7], sizeof b[7]),
                     f->rec_ctx, f->rec_seqs);
    else if (f->rec_ctx)
        n = snprintf(out + o, cap - o, "does not fit: %s; recommended --ctx %u --max-seqs %u", f->why, f->rec_ctx,
                     f->rec_seqs);
    else
        n = snprintf(out + o, cap - o, "does not fit: %s", f->why);
    return (int)o + (n > 0 ? n : 0);
}
