/* test_synth.c — synthetic benchmark models (opencl/bench/synth.c, bench --synthetic).
 *
 * test_shapes: each model description opens with gguf_open_virtual; its parameter count and the
 *   weights read per token match docs/GEMMA4.md §1 (from the public configs); types follow
 *   llama.cpp's fallbacks; only F32 vectors carry host data.
 * test_fill: synth_fill of every type, dequantised by the deq_* kernels (themselves checked
 *   against gguf-py in test_kernels): finite, standard deviation near 1/sqrt(row length), mean
 *   near 0, deterministic per name and different across names; a size that is not a multiple of
 *   4 bytes fills its tail; synth_bytes makes the same bytes on the host. */
#include "check.h"
#include "gguf.h"
#include "ops.h"
#include "runtime.h"
#include "synth.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static cl_runtime RT;
static ops O;
static char err[512];

static const struct { const char *name; double params, per_tok; } DOC[] = {
    { "gemma4-e2b", 4.63e9, 1.86e9 },
    { "gemma4-e4b", 7.46e9, 3.95e9 },
    { "gemma4-26b-a4b", 25.2e9, 3.08e9 },
    { "gemma4-31b", 30.7e9, 29.3e9 },
};

static int ends_with(gguf_str s, const char *suf)
{
    size_t n = strlen(suf);
    return s.len >= n && !memcmp(s.ptr + s.len - n, suf, n);
}

static void test_shapes(void)
{
    for (size_t m = 0; m < sizeof DOC / sizeof *DOC; m++) {
        void *buf;
        size_t size;
        uint64_t virt;
        char name[96];
        int rc = synth_build(DOC[m].name, "q4_k", 0, &buf, &size, &virt, name, err, sizeof err);
        CHECK(rc == 0, "%s: %s", DOC[m].name, err);
        if (rc) continue;
        gguf_file *f;
        rc = gguf_open_virtual(&f, buf, size, virt, err, sizeof err);
        CHECK(rc == 0, "%s: gguf_open_virtual: %s", DOC[m].name, err);
        if (rc) { free(buf); continue; }
        int64_t ne = 0, nu = 0;
        gguf_get_int(f, "gemma4.expert_count", &ne);
        gguf_get_int(f, "gemma4.expert_used_count", &nu);
        double params = 0, per_tok = 0;
        for (size_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i);
            double n = (double)t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
            params += n;
            if (!gguf_str_eq(t->name, "token_embd.weight") && !gguf_str_eq(t->name, "per_layer_token_embd.weight"))
                per_tok += ends_with(t->name, "_exps.weight") ? n * nu / ne : n;
            int vecf32 = t->n_dims == 1;
            CHECK(vecf32 ? t->type == GGML_TYPE_F32 && t->data : !t->data, "%s: %.*s: type %s, data %p", DOC[m].name,
                  (int)t->name.len, t->name.ptr, ggml_type_name(t->type), t->data);
            if (t->n_dims == 1) continue;
            /* q4_k: Q4_K where the row is a multiple of 256, else Q5_0; the router stays F32 */
            uint32_t want = ends_with(t->name, "ffn_gate_inp.weight") ? GGML_TYPE_F32
                            : t->ne[0] % 256                         ? GGML_TYPE_Q5_0
                                                                     : GGML_TYPE_Q4_K;
            CHECK(t->type == want, "%s: %.*s [%llu]: %s, expected %s", DOC[m].name, (int)t->name.len, t->name.ptr,
                  (unsigned long long)t->ne[0], ggml_type_name(t->type), ggml_type_name(want));
        }
        CHECK(fabs(params / DOC[m].params - 1) < 0.01, "%s: %.3f B parameters, docs say %.3f B", DOC[m].name,
              params / 1e9, DOC[m].params / 1e9);
        CHECK(fabs(per_tok / DOC[m].per_tok - 1) < 0.015, "%s: %.3f B weights per token, docs say %.3f B",
              DOC[m].name, per_tok / 1e9, DOC[m].per_tok / 1e9);
        char want[96];
        snprintf(want, sizeof want, "synthetic %s q4_k", DOC[m].name);
        gguf_str gn;
        CHECK(gguf_get_str(f, "general.name", &gn) == 0 && gguf_str_eq(gn, want) && !strcmp(name, want),
              "%s: name '%s'", DOC[m].name, name);
        printf("  %s: %.2f B parameters, %.2f B weights per token, %.2f GiB at q4_k\n", DOC[m].name, params / 1e9,
               per_tok / 1e9, (double)(virt - size) / 1073741824.0);
        gguf_close(f);
        free(buf);
    }
    /* a shrunk model stays consistent: every KV-shared layer has a donor of its type */
    void *buf;
    size_t size;
    uint64_t virt;
    char name[96];
    CHECK(synth_build("gemma4-e2b", "q8_0", 10, &buf, &size, &virt, name, err, sizeof err) == 0, "%s", err);
    CHECK(!strcmp(name, "synthetic gemma4-e2b q8_0 (10 layers)"), "name '%s'", name);
    free(buf);
    CHECK(synth_build("gemma4-7b", "q8_0", 0, &buf, &size, &virt, name, err, sizeof err) != 0 &&
              strstr(err, "unknown synthetic model"), "unknown model accepted: %s", err);
    CHECK(synth_build("gemma4-e2b", "q2_k", 0, &buf, &size, &virt, name, err, sizeof err) != 0 &&
              strstr(err, "unknown synthetic weight type"), "unknown type accepted: %s", err);
}

static void fill_case(uint32_t type, uint32_t cols, uint32_t rows)
{
    uint64_t row_bytes = ggml_row_bytes(type, cols), nbytes = row_bytes * rows;
    gguf_tensor t = { 0 };
    t.name = (gguf_str){ "blk.0.attn_q.weight", 19 };
    t.type = type;
    t.ne[0] = cols; t.ne[1] = rows; t.ne[2] = t.ne[3] = 1;
    t.nbytes = nbytes;
    uint8_t *a = malloc(nbytes), *b = malloc(nbytes);
    float *w = malloc(sizeof(float) * cols * rows);
    cl_mem m = rt_alloc(&RT, nbytes, NULL, err, sizeof err), out = rt_alloc(&RT, 4ull * cols * rows, NULL, err, sizeof err);
    CHECK(a && b && w && m && out, "allocation");
    if (!a || !b || !w || !m || !out) return;
    /* poison, fill, read back; fill again with the same name (same bytes) and another (different) */
    memset(a, 0xA5, nbytes);
    clEnqueueWriteBuffer(RT.q, m, CL_TRUE, 0, nbytes, a, 0, NULL, NULL);
    CHECK(synth_fill(&RT, m, &t, err, sizeof err) == 0, "%s: %s", ggml_type_name(type), err);
    clEnqueueReadBuffer(RT.q, m, CL_TRUE, 0, nbytes, a, 0, NULL, NULL);
    CHECK(synth_fill(&RT, m, &t, err, sizeof err) == 0, "%s", err);
    clEnqueueReadBuffer(RT.q, m, CL_TRUE, 0, nbytes, b, 0, NULL, NULL);
    CHECK(!memcmp(a, b, nbytes), "%s: two fills of one name differ", ggml_type_name(type));
    /* the host makes the same bytes (tables kept in host memory), whole and from an odd offset */
    CHECK(synth_bytes(&t, 0, nbytes, b, err, sizeof err) == 0 && !memcmp(a, b, nbytes), "%s: synth_bytes differs "
          "from synth_fill", ggml_type_name(type));
    uint64_t off = nbytes / 3 + 1;
    CHECK(synth_bytes(&t, off, nbytes - off, b, err, sizeof err) == 0 && !memcmp(a + off, b, nbytes - off),
          "%s: synth_bytes from offset %llu differs from synth_fill", ggml_type_name(type), (unsigned long long)off);
    CHECK(synth_bytes(&t, off, nbytes, b, err, sizeof err) != 0, "%s: synth_bytes past the end accepted",
          ggml_type_name(type));
    /* the last bytes (a tail when nbytes % 4 != 0) were written: not all still the poison */
    int tail_poison = 1;
    for (uint64_t i = nbytes - (nbytes % 4 ? nbytes % 4 : 4); i < nbytes; i++) tail_poison &= a[i] == 0xA5;
    CHECK(!tail_poison, "%s: last bytes not written", ggml_type_name(type));
    t.name = (gguf_str){ "blk.1.attn_q.weight", 19 };
    CHECK(synth_fill(&RT, m, &t, err, sizeof err) == 0, "%s", err);
    clEnqueueReadBuffer(RT.q, m, CL_TRUE, 0, nbytes, b, 0, NULL, NULL);
    CHECK(memcmp(a, b, nbytes), "%s: fills of two names are equal", ggml_type_name(type));
    /* dequantise the first fill */
    clEnqueueWriteBuffer(RT.q, m, CL_TRUE, 0, nbytes, a, 0, NULL, NULL);
    cl_kernel k = O.mm.deq[type];
    uint32_t rb = (uint32_t)row_bytes, r0 = 0;
    cl_int e = clSetKernelArg(k, 0, sizeof m, &m);
    e |= clSetKernelArg(k, 1, 4, &rb);
    e |= clSetKernelArg(k, 2, 4, &r0);
    e |= clSetKernelArg(k, 3, 4, &rows);
    e |= clSetKernelArg(k, 4, 4, &cols);
    e |= clSetKernelArg(k, 5, sizeof out, &out);
    size_t gws[2] = { cols / 32, rows };
    if (!e) e = clEnqueueNDRangeKernel(RT.q, k, 2, NULL, gws, NULL, 0, NULL, NULL);
    if (!e) e = clEnqueueReadBuffer(RT.q, out, CL_TRUE, 0, 4ull * cols * rows, w, 0, NULL, NULL);
    CHECK(e == CL_SUCCESS, "deq_%s: %s", ggml_type_name(type), rt_errstr(e));
    double s = 0, s2 = 0;
    size_t bad = 0, n = (size_t)cols * rows;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(w[i])) { bad++; continue; }
        s += w[i];
        s2 += (double)w[i] * w[i];
    }
    double mean = s / n, sd = sqrt(s2 / n - mean * mean), want = 1 / sqrt((double)cols);
    printf("  %-5s [%u x %u]: mean %+.2e, sd %.3e (1/sqrt(cols) %.3e)\n", ggml_type_name(type), cols, rows, mean, sd,
           want);
    CHECK(bad == 0, "%s: %zu non-finite values", ggml_type_name(type), bad);
    CHECK(sd > 0.7 * want && sd < 1.4 * want, "%s: sd %.3e, expected about %.3e", ggml_type_name(type), sd, want);
    CHECK(fabs(mean) < 0.1 * want, "%s: mean %.3e", ggml_type_name(type), mean);
    clReleaseMemObject(m);
    clReleaseMemObject(out);
    free(a); free(b); free(w);
}

static void test_fill(void)
{
    fill_case(GGML_TYPE_Q4_K, 2816, 64);
    fill_case(GGML_TYPE_Q5_0, 704, 64);
    fill_case(GGML_TYPE_Q8_0, 1536, 64);
    fill_case(GGML_TYPE_Q8_0, 96, 3);      /* 306 bytes: a 2-byte tail */
    fill_case(GGML_TYPE_BF16, 5376, 16);
    fill_case(GGML_TYPE_F16, 8960, 8);     /* small values: fp16 subnormal scales elsewhere */
    fill_case(GGML_TYPE_F32, 2816, 16);
}

int main(void)
{
    check_current = "setup";
    if (rt_create(&RT, NULL, 0, err, sizeof err)) { printf("FAIL setup: rt_create: %s\n", err); return 1; }
    if (rt_build(&RT, NULL, NULL, err, sizeof err)) { printf("FAIL setup: rt_build: %s\n", err); return 1; }
    if (ops_init(&O, &RT, 4096, err, sizeof err)) { printf("FAIL setup: ops_init: %s\n", err); return 1; }
    RUN_TEST(test_shapes);
    RUN_TEST(test_fill);
    ops_destroy(&O);
    rt_destroy(&RT);
    CHECK_EXIT();
}
