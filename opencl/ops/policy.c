/* policy.c — see policy.h. The measurements behind each default: docs/PERF.md, "Defaults and
 * their measurements". */
#include "policy.h"
#include "errf.h"
#include "ops.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void ops_policy_defaults(ops_policy *p, const cl_runtime *rt)
{
    cl_uint cu = 1;
    clGetDeviceInfo(rt->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    *p = (ops_policy){
        /* a CPU runs a work-group as a loop: small groups spare it barrier overhead; on NVIDIA a warp a
         * group (products of few rows widen it by mv_warps_per_cu) */
        .mv_wg = rt->is_cpu ? 4 : rt->is_nvidia ? 32 : 128,
        /* a warp on NVIDIA, whose reduction is then shuffles; elsewhere the whole group */
        .mv_tpr = rt->is_nvidia ? 32 : 1024,
        /* the router's 128 rows in 32 warps ran at ~100 GB/s (13.7 us); 4 a compute unit takes more items a row */
        .mv_warps_per_cu = rt->is_nvidia ? 4 : 0,
        /* staging X per group costs every group a round trip per 32 blocks before its first weight
         * load: large products quantize X once instead, and a short X is cheap to stage */
        .mvqg_min_elems = 16u << 20,
        .mvqg_min_k = 4096,
        /* 2 warps of 4 rows measured best */
        .mvqg_rpg = 8,
        /* pairs halve the header loads and scale decodes a row; a row of 2,816 values (88 halves, 3 passes
         * of 32 lanes) would leave 20 of 64 lanes idle as 44 pairs in 2 passes (26B -2%) */
        .mvqg_pair = 1,
        /* every mvq group stages X once: fewer groups stage it fewer times, more hide latency */
        .mvq_groups_per_cu = 4,
        /* E2B's 1536-wide X takes mmq8 for its FFN (gate/up of 18M weights): one q8x_quant a layer
         * fewer; Gemma 3's 640-wide products stay on mmqs, which needs no int8 X */
        .q8x_min_k = 1024,
        /* small products stay on mmqs: its X conversion takes no launch of its own, and a step of
         * small matrices is bound by host enqueue */
        .mmq8_min_elems = 4u << 20,
        /* a decode step of up to 256 sequences reads the weights once per 64 tokens, in int8 */
        .mmq8_max_tok = OPS_MMQ8_MAXT,
        /* at 128 tokens q8_0 ran faster dequantized on the f16 tiles (E4B 4,717 against 4,318 tok/s) */
        .mmq8g_max_tok = 64,
        /* FFN down at 64 tokens: one warp a group (its ring fills the local memory), 168 groups */
        .mmq8_slices_max = 16,
        .mmq8_slice_units = 8,
        .mmq8_warps = 0,
        /* deeper rings take local memory from L1, where a compute unit's row groups share X */
        .mmq8p_stages = 2,
        /* from two 64-token blocks on; below, mmq8p's per-warp rings measured faster (docs/PERF.md) */
        .mmq8r_min_tok = 65,
        /* from 17 tokens: at 16 the int8 products run faster, at 32 and up slower (docs/PERF.md) */
        .mmh_min_tok = 17,
        /* q6_k's few-row products run faster through mmh's ring than unstaged on mmq8 (docs/PERF.md) */
        .mmh_min_tok_q6k = 9,
        .mmh_max_tok = OPS_MMQ8_MAXT,
        /* with every ring type the prefetch only slows mmh (docs/PERF.md) */
        .mmh_prefetch = 0,
        /* the sums of the shared products' many rows cost more than their slices gain (docs/PERF.md) */
        .mmh_slice_shared_max_tok = 0,
        /* the 64-token kernels' registers (210-235) leave two groups a compute unit */
        .mmh_slots = 2 * cu,
        /* about the bytes the GPU moves in one group's unit time (docs/PERF.md) */
        .mmh_unit_bytes = 3u << 20,
        /* the int8 products twice as many: one unit in flight per warp hides less latency */
        .mmq_warps_target = 2048,
        .mmq8p_warps_target = 4096,
        /* below about half a group per compute unit the tiles leave the GPU part-idle; mmql does better */
        .mmt_min_groups = cu / 2,
        /* attn_dec's 8 warps take 32 keys a round, and a span in one chunk needs no merge */
        .attn_min_chunk = rt->is_nvidia ? 128 : OPS_ATTN_MIN_CHUNK,
        /* 3, not 4: a 16-token decode step of 32 heads then keeps one chunk up to 256 keys */
        .attn_groups_per_cu = 3,
        /* attn_dec's warps walk any run of keys (no score buffer): fewer, longer chunks merge less at long
         * spans (docs/PERF.md) */
        .attn_max_chunk = 4096,
        /* from here reading each K and V row once per KV head, not once per q head, pays for qkv_rope's
         * and the merge's launches (docs/PERF.md) */
        .attn_decm_min_keys = 8192,
        /* 16-token steps measured slower in one launch than with qkv_rope before attn_dec */
        .attn_decq_max_tok = 4,
        /* 8 warps share each staged K and V block between twice the query rows */
        .fa_warps = 8,
        /* wgmma reading bulk-copied tiles ran the products at twice mmta's rate (docs/PERF.md) */
        .wgmma = 1,
        /* a decode step's few rows run faster on qkv_rope's groups */
        .qkv_rope_w_min_rows = 2048,
        /* a KV block: every block end is a chunk end, where prefix snapshots are taken */
        .delta_chunk = 32,
        /* a run shorter than a chunk has no product to share across tokens (decode, drafts) */
        .delta_chunk_min = 32,
        /* dv / 32 groups per head and run of delta_step: fewer columns lose at B=16 (docs/PERF.md, Qwen 3.6) */
        .delta_cols = 32,
        /* the chunk scan walks a prompt's chunks in order, so its groups are its only parallelism (docs/PERF.md) */
        .delta_scan_cols = 8,
        /* vis_attn re-reads every key per query row, so it grows with the square of the patches */
        .vis_fa = 1,
    };
}

/* name, field, range: what `clgemma bench --set NAME=VALUE` may change */
static const struct policy_name {
    const char *name;
    size_t off;
    uint32_t min, max;
} NAMES[] = {
#define F(NAME, field, lo, hi) { #NAME, offsetof(ops_policy, field), lo, hi }
    F(MV_WG, mv_wg, 1, 1024),
    F(MV_TPR, mv_tpr, 1, 1024),
    F(MV_WARPS_PER_CU, mv_warps_per_cu, 0, 64),
    F(MVQG_MIN_ELEMS, mvqg_min_elems, 0, UINT32_MAX),
    F(MVQG_MIN_K, mvqg_min_k, 0, UINT32_MAX),
    F(MVQG_RPG, mvqg_rpg, 4, 128),
    F(MVQG_PAIR, mvqg_pair, 0, 2),
    F(MVQ_GROUPS_PER_CU, mvq_groups_per_cu, 1, 64),
    F(Q8X_MIN_K, q8x_min_k, 0, UINT32_MAX),
    F(MMQ8_MIN_ELEMS, mmq8_min_elems, 0, UINT32_MAX),
    F(MMQ8_MAX_TOK, mmq8_max_tok, 4, OPS_MMQ8_MAXT),
    F(MMQ8G_MAX_TOK, mmq8g_max_tok, 4, OPS_MMQ8_MAXT),
    F(MMQ8_SLICES_MAX, mmq8_slices_max, 1, 64),
    F(MMQ8_SLICE_UNITS, mmq8_slice_units, 1, 1024),
    F(MMQ8_WARPS, mmq8_warps, 0, 16),
    F(MMQ8P_STAGES, mmq8p_stages, 2, 4),
    F(MMQ8R_MIN_TOK, mmq8r_min_tok, 9, OPS_MMQ8_MAXT + 1),
    F(MMH_MIN_TOK, mmh_min_tok, 1, 1u << 20),
    F(MMH_MIN_TOK_Q6K, mmh_min_tok_q6k, 1, 1u << 20),
    F(MMH_MAX_TOK, mmh_max_tok, 1, 1u << 20),
    F(MMH_SLOTS, mmh_slots, 1, 1u << 20),
    F(MMH_SLICE_SHARED_MAX_TOK, mmh_slice_shared_max_tok, 0, 256),
    F(MMH_UNIT_BYTES, mmh_unit_bytes, 1, 1u << 30),
    F(MMH_PREFETCH, mmh_prefetch, 0, 64),
    F(MMQ_WARPS_TARGET, mmq_warps_target, 1, 1u << 20),
    F(MMQ8P_WARPS_TARGET, mmq8p_warps_target, 1, 1u << 20),
    F(MMT_MIN_GROUPS, mmt_min_groups, 0, 1u << 20),
    F(ATTN_MIN_CHUNK, attn_min_chunk, 0, OPS_ATTN_CHUNK),
    F(ATTN_GROUPS_PER_CU, attn_groups_per_cu, 1, 1024),
    F(ATTN_MAX_CHUNK, attn_max_chunk, OPS_ATTN_CHUNK, 1u << 20),
    F(ATTN_DECM_MIN_KEYS, attn_decm_min_keys, 0, 1u << 31),
    F(ATTN_DECQ_MAX_TOK, attn_decq_max_tok, 1, 256),
    F(FA_WARPS, fa_warps, 4, 8),
    F(WGMMA, wgmma, 0, 1),
    F(QKV_ROPE_W_MIN_ROWS, qkv_rope_w_min_rows, 0, UINT32_MAX),
    F(DELTA_CHUNK, delta_chunk, 1, OPS_DELTA_C_MAX),
    F(DELTA_CHUNK_MIN, delta_chunk_min, 1, UINT32_MAX),
    F(DELTA_COLS, delta_cols, 1, 256),
    F(DELTA_SCAN_COLS, delta_scan_cols, 1, 256),
    F(VIS_FA, vis_fa, 0, 1),
    F(LAUNCH_TWICE, launch_twice, 0, 255),
    F(LAUNCH_EMPTY, launch_empty, 0, 255),
#undef F
};

int ops_policy_set(ops_policy *p, const char *setting, char *err, size_t errlen)
{
    const char *eq = strchr(setting, '=');
    size_t n = eq ? (size_t)(eq - setting) : strlen(setting);
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++) {
        const struct policy_name *f = &NAMES[i];
        if (strlen(f->name) != n || strncmp(f->name, setting, n)) continue;
        char *end = NULL;
        errno = 0;
        unsigned long long v = eq && eq[1] != '-' ? strtoull(eq + 1, &end, 10) : 0;
        if (!eq || !end || end == eq + 1 || *end || errno || v < f->min || v > f->max)
            return errf(err, errlen, "setting '%s': %s takes a whole number from %u to %u", setting, f->name, f->min,
                        f->max);
        if (f->off == offsetof(ops_policy, launch_empty) && v > 0 && ops_kind_writes_indices((int)v - 1))
            return errf(err, errlen, "setting '%s': %s writes indices that later launches read, so it cannot run empty",
                        setting, ops_kernel_name((int)v - 1));
        *(uint32_t *)((char *)p + f->off) = (uint32_t)v;
        return 0;
    }
    return errf(err, errlen, "unknown setting '%s' (NAME=VALUE; the names are in docs/PERF.md)", setting);
}

int ops_policy_apply(ops_policy *p, const cl_runtime *rt, char *err, size_t errlen)
{
    for (int i = 0; i < rt->n_settings; i++)
        if (!rt_setting_known(rt->settings[i]) && ops_policy_set(p, rt->settings[i], err, errlen)) return -1;
    return 0;
}
