/* runtime.c — see runtime.h */
#include "runtime.h"

#include <CL/cl_ext.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"

const char *rt_errstr(cl_int e)
{
    switch (e) {
    case CL_SUCCESS: return "CL_SUCCESS";
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_WORK_ITEM_SIZE: return "CL_INVALID_WORK_ITEM_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_ARG_VALUE: return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL platform installed)";
    default: return "CL error";
    }
}

static void dev_str(cl_device_id d, cl_device_info what, char *buf, size_t cap)
{
    buf[0] = 0;
    if (clGetDeviceInfo(d, what, cap, buf, NULL) != CL_SUCCESS) buf[0] = 0;
    buf[cap - 1] = 0;
}

#define MAX_PLAT 16
#define MAX_DEV 64

static int get_platforms(cl_platform_id *p, cl_uint *np)
{
    *np = 0;
    cl_int e = clGetPlatformIDs(MAX_PLAT, p, np);
    if (e != CL_SUCCESS) *np = 0;
    return e;
}

int rt_list_devices(int plain)
{
    cl_platform_id plats[MAX_PLAT];
    cl_uint np;
    get_platforms(plats, &np);
    int total = 0;
    for (cl_uint i = 0; i < np; i++) {
        char pname[128] = "", pver[128] = "";
        clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
        clGetPlatformInfo(plats[i], CL_PLATFORM_VERSION, sizeof pver, pver, NULL);
        if (!plain) printf("platform %u: %s (%s)\n", i, pname, pver);
        cl_device_id devs[MAX_DEV];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, MAX_DEV, devs, &nd) != CL_SUCCESS) nd = 0;
        for (cl_uint j = 0; j < nd; j++) {
            char name[256], drv[128];
            cl_ulong mem = 0, alloc = 0;
            cl_device_type ty = 0;
            cl_uint cu = 0;
            dev_str(devs[j], CL_DEVICE_NAME, name, sizeof name);
            dev_str(devs[j], CL_DRIVER_VERSION, drv, sizeof drv);
            clGetDeviceInfo(devs[j], CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
            clGetDeviceInfo(devs[j], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL);
            clGetDeviceInfo(devs[j], CL_DEVICE_TYPE, sizeof ty, &ty, NULL);
            clGetDeviceInfo(devs[j], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
            const char *kind = (ty & CL_DEVICE_TYPE_GPU) ? "GPU" : (ty & CL_DEVICE_TYPE_CPU) ? "CPU" : "other";
            if (plain) printf("%u:%u %s %llu %s\n", i, j, kind, (unsigned long long)mem, name);
            else printf("  device %u:%u  %s  [%s, %u compute units, %.2f GiB memory, max alloc %.2f GiB, driver %s]\n",
                        i, j, name, kind, cu, mem / 1073741824.0, alloc / 1073741824.0, drv);
            total++;
        }
    }
    if (!total && !plain) printf("no OpenCL devices found (install an OpenCL driver, e.g. pocl-opencl-icd)\n");
    return total;
}

int rt_pick(cl_runtime *rt, const char *spec, char *err, size_t errlen)
{
    memset(rt, 0, sizeof *rt);
    if (!spec || !*spec) spec = getenv("CLGEMMA_DEVICE");
    cl_platform_id plats[MAX_PLAT];
    cl_uint np;
    cl_int e = get_platforms(plats, &np);
    if (np == 0) {
        snprintf(err, errlen, "no OpenCL platform found (%s); install an OpenCL driver such as pocl-opencl-icd",
                 rt_errstr(e));
        return -1;
    }
    int want_p = -1, want_d = -1;
    if (spec && *spec) {
        if (sscanf(spec, "%d:%d", &want_p, &want_d) != 2 || want_p < 0 || want_d < 0) {
            snprintf(err, errlen, "bad device '%s': expected P:D, e.g. 0:0 (see clgemma devices)", spec);
            return -1;
        }
    }
    cl_device_id pick = NULL;
    cl_platform_id pick_p = NULL;
    int pass_gpu;
    for (pass_gpu = 1; pass_gpu >= 0 && !pick; pass_gpu--) {
        for (cl_uint i = 0; i < np && !pick; i++) {
            cl_device_id devs[MAX_DEV];
            cl_uint nd = 0;
            if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, MAX_DEV, devs, &nd) != CL_SUCCESS) nd = 0;
            for (cl_uint j = 0; j < nd && !pick; j++) {
                if (want_p >= 0) {
                    if ((int)i == want_p && (int)j == want_d) { pick = devs[j]; pick_p = plats[i]; }
                    continue;
                }
                cl_device_type ty = 0;
                clGetDeviceInfo(devs[j], CL_DEVICE_TYPE, sizeof ty, &ty, NULL);
                if (!pass_gpu || (ty & CL_DEVICE_TYPE_GPU)) { pick = devs[j]; pick_p = plats[i]; }
            }
        }
        if (want_p >= 0) break;
    }
    if (!pick) {
        if (want_p >= 0) snprintf(err, errlen, "no OpenCL device %d:%d (see clgemma devices)", want_p, want_d);
        else snprintf(err, errlen, "no OpenCL device found");
        return -1;
    }
    rt->platform = pick_p;
    rt->device = pick;
    dev_str(pick, CL_DEVICE_NAME, rt->device_name, sizeof rt->device_name);
    dev_str(pick, CL_DRIVER_VERSION, rt->driver, sizeof rt->driver);
    clGetPlatformInfo(pick_p, CL_PLATFORM_NAME, sizeof rt->platform_name, rt->platform_name, NULL);
    rt->platform_name[sizeof rt->platform_name - 1] = 0;
    cl_device_type ty = 0;
    clGetDeviceInfo(pick, CL_DEVICE_TYPE, sizeof ty, &ty, NULL);
    rt->is_gpu = (ty & CL_DEVICE_TYPE_GPU) != 0;
    rt->is_cpu = (ty & CL_DEVICE_TYPE_CPU) != 0;
    rt->is_nvidia = strstr(rt->platform_name, "NVIDIA") != NULL;
    cl_uint ccmaj = 0, ccmin = 0;
    if (rt->is_nvidia && clGetDeviceInfo(pick, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof ccmaj, &ccmaj, NULL) ==
                             CL_SUCCESS &&
        clGetDeviceInfo(pick, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV, sizeof ccmin, &ccmin, NULL) == CL_SUCCESS)
        rt->nv_cc = (int)(10 * ccmaj + ccmin);
    cl_ulong v = 0;
    clGetDeviceInfo(pick, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof v, &v, NULL);
    rt->global_mem = v;
    clGetDeviceInfo(pick, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof v, &v, NULL);
    rt->max_alloc = v;
    clGetDeviceInfo(pick, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof rt->max_wg, &rt->max_wg, NULL);
    return 0;
}

int rt_create(cl_runtime *rt, const char *spec, int profiling, char *err, size_t errlen)
{
    if (rt_pick(rt, spec, err, errlen)) return -1;
    cl_device_id pick = rt->device;
    cl_int e;
    rt->ctx = clCreateContext(NULL, 1, &pick, NULL, NULL, &e);
    if (!rt->ctx) {
        snprintf(err, errlen, "clCreateContext on %s failed: %s", rt->device_name, rt_errstr(e));
        return -1;
    }
    rt->profiling = profiling;
    rt->q = clCreateCommandQueue(rt->ctx, pick, profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &e);
    if (!rt->q) {
        snprintf(err, errlen, "clCreateCommandQueue failed: %s", rt_errstr(e));
        clReleaseContext(rt->ctx);
        rt->ctx = NULL;
        return -1;
    }
    return 0;
}

static int build_log(cl_runtime *rt, cl_program p, char *err, size_t errlen, const char *what, cl_int e);

/* the register cap of the capped program (manifest.def says why) */
static const char capped_opts[] = "-cl-nv-maxrregcount=128";
/* the sm90a program: the capped program's options and the wgmma lines (ptx.cl's SM90A) */
static const char sm90a_opts[] = "-cl-nv-maxrregcount=128 -DCLG_SM90A=1";
static const char sm90a_mark[] = "//@sm90a "; /* ptx.cl's SM90A() prefix */

/* NVIDIA's program binary is PTX text for sm_90: the same text with ptx.cl's sm_90a lines uncommented
 * and the target sm_90a, NUL-terminated (*n counts the NUL), or NULL when bin is not such PTX */
static char *ptx_sm90a(const unsigned char *bin, size_t len, size_t *n)
{
    static const char tgt[] = ".target sm_90";
    const char *s = (const char *)bin, *t = memchr(bin, 0, len) ? strstr(s, tgt) : NULL;
    size_t tl = sizeof tgt - 1, ml = sizeof sm90a_mark - 1;
    if (!t || (t[tl] != ',' && t[tl] != '\n' && t[tl] != ' ') || !strstr(s, sm90a_mark)) return NULL;
    size_t sl = strlen(s);
    char *o = malloc(sl + 2), *w = o;
    if (!o) return NULL;
    for (const char *r = s; *r;) {
        if (r == t) {
            memcpy(w, ".target sm_90a", tl + 1);
            w += tl + 1;
            r += tl;
        } else if (strncmp(r, sm90a_mark, ml) == 0) {
            r += ml;
        } else {
            *w++ = *r++;
        }
    }
    *w++ = 0;
    *n = (size_t)(w - o);
    return o;
}

/* p (built from source) rebuilt from its PTX rewritten for sm_90a (ptx_sm90a) */
static int rebuild_sm90a(cl_runtime *rt, cl_program *p, const char *opts, char *err, size_t errlen)
{
    size_t len = 0, n = 0;
    unsigned char *bin = NULL;
    if (clGetProgramInfo(*p, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS || !len ||
        !(bin = malloc(len)) || clGetProgramInfo(*p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS) {
        free(bin);
        snprintf(err, errlen, "sm_90a: the program's binary could not be read");
        return -1;
    }
    char *ptx = ptx_sm90a(bin, len, &n);
    free(bin);
    if (!ptx) {
        snprintf(err, errlen, "sm_90a: the driver's binary is not PTX for sm_90 with the sm_90a lines");
        return -1;
    }
    cl_int e, st = CL_SUCCESS;
    const unsigned char *b = (const unsigned char *)ptx;
    cl_program q = clCreateProgramWithBinary(rt->ctx, 1, &rt->device, &n, &b, &st, &e);
    free(ptx);
    if (!q || e != CL_SUCCESS || st != CL_SUCCESS) {
        if (q) clReleaseProgram(q);
        snprintf(err, errlen, "sm_90a: the rewritten PTX was refused: %s", rt_errstr(e != CL_SUCCESS ? e : st));
        return -1;
    }
    if ((e = clBuildProgram(q, 1, &rt->device, opts, NULL, NULL)) != CL_SUCCESS) {
        build_log(rt, q, err, errlen, "sm_90a build", e);
        clReleaseProgram(q);
        return -1;
    }
    clReleaseProgram(*p);
    *p = q;
    return 0;
}

/* the kernel files of program prog (RT_PROG_*), concatenated in the manifest's order */
static char *program_source(int prog)
{
    size_t n = 1;
    for (int i = 0; rt_kernel_files[i].name; i++) n += strlen(rt_kernel_files[i].src) + 1;
    char *s = malloc(n);
    if (!s) return NULL;
    size_t o = 0;
    for (int i = 0; rt_kernel_files[i].name; i++) {
        if (!(rt_kernel_files[i].progs & prog)) continue;
        size_t l = strlen(rt_kernel_files[i].src);
        memcpy(s + o, rt_kernel_files[i].src, l);
        o += l;
        s[o++] = '\n';
    }
    s[o] = 0;
    return s;
}

/* FNV-1a 64 over several strings: the cache key must change with device, driver, options, source */
static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 1099511628211ull; }
    h ^= 0xff; h *= 1099511628211ull;
    return h;
}

static void cache_path(char *out, size_t cap, const char *dir, uint64_t key)
{
    snprintf(out, cap, "%s/%016llx.clbin", dir, (unsigned long long)key);
}

static void default_cache_dir(char *out, size_t cap)
{
    const char *x = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (x && *x) snprintf(out, cap, "%s/clgemma", x);
    else if (home && *home) snprintf(out, cap, "%s/.cache/clgemma", home);
    else snprintf(out, cap, "/tmp/clgemma-cache");
}

static void mkdirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(tmp, 0755); *p = '/'; }
    mkdir(tmp, 0755);
}

static int build_log(cl_runtime *rt, cl_program p, char *err, size_t errlen, const char *what, cl_int e)
{
    char log[4096] = "";
    clGetProgramBuildInfo(p, rt->device, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    log[sizeof log - 1] = 0;
    /* keep the first error line: the log can be huge */
    char *nl = strstr(log, "error");
    char *line = nl ? nl : log;
    char *end = strchr(line, '\n');
    if (end) *end = 0;
    snprintf(err, errlen, "kernel %s failed (%s): %s", what, rt_errstr(e), line);
    fprintf(stderr, "%s\n", log);
    return -1;
}

/* one program from src with opts, through the binary cache in dir; *hit: loaded from it. sm90a: built
 * from source, then from its PTX retargeted (rebuild_sm90a); the cache holds the retargeted PTX. */
static int build_program(cl_runtime *rt, const char *src, const char *opts, const char *dir, cl_program *out,
                         int *hit, int sm90a, char *err, size_t errlen)
{
    uint64_t key = 14695981039346656037ull;
    key = fnv(key, rt->platform_name);
    key = fnv(key, rt->device_name);
    key = fnv(key, rt->driver);
    key = fnv(key, opts);
    key = fnv(key, src);
    char path[900];
    cache_path(path, sizeof path, dir, key);

    cl_int e;
    cl_program p = NULL;
    FILE *f = fopen(path, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        unsigned char *bin = n > 0 ? malloc((size_t)n) : NULL;
        if (bin && fread(bin, 1, (size_t)n, f) == (size_t)n) {
            size_t len = (size_t)n;
            const unsigned char *b = bin;
            cl_int st;
            p = clCreateProgramWithBinary(rt->ctx, 1, &rt->device, &len, &b, &st, &e);
            if (p && (e != CL_SUCCESS || st != CL_SUCCESS || clBuildProgram(p, 1, &rt->device, opts, NULL, NULL) != CL_SUCCESS)) {
                clReleaseProgram(p); /* stale or foreign binary: rebuild from source */
                p = NULL;
            }
        }
        free(bin);
        fclose(f);
    }
    *hit = p != NULL;
    if (!p) {
        const char *s = src;
        p = clCreateProgramWithSource(rt->ctx, 1, &s, NULL, &e);
        if (!p) { snprintf(err, errlen, "clCreateProgramWithSource: %s", rt_errstr(e)); return -1; }
        e = clBuildProgram(p, 1, &rt->device, opts, NULL, NULL);
        if (e != CL_SUCCESS) {
            build_log(rt, p, err, errlen, "build", e);
            clReleaseProgram(p);
            return -1;
        }
        if (sm90a && rebuild_sm90a(rt, &p, opts, err, errlen)) {
            clReleaseProgram(p);
            return -1;
        }
        size_t len = 0;
        if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) == CL_SUCCESS && len > 0) {
            unsigned char *bin = malloc(len);
            if (bin && clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS) {
                mkdirs(dir);
                char tmp[960];
                snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
                FILE *o = fopen(tmp, "wb");
                if (o) {
                    int ok = fwrite(bin, 1, len, o) == len;
                    ok &= fclose(o) == 0;
                    if (ok) rename(tmp, path); /* atomic: concurrent workers never see half a file */
                    else unlink(tmp);
                }
            }
            free(bin);
        }
    }
    *out = p;
    return 0;
}

int rt_build(cl_runtime *rt, const char *options, const char *cache_dir, char *err, size_t errlen)
{
    double t0 = monotonic_seconds();
    char *opts = rt->build_opts, opts2[sizeof rt->build_opts + sizeof capped_opts + 1];
    /* CL_DEFS: extra build options for kernel experiments (docs/PERF.md); part of the cache key */
    const char *defs = rt_setting(rt, "CL_DEFS");
    snprintf(opts, sizeof rt->build_opts, "-cl-std=CL1.2 -cl-mad-enable %s%s %s",
             rt->is_nvidia ? "-DCLG_NVIDIA=1 " : "", options ? options : "", defs ? defs : "");
    snprintf(opts2, sizeof opts2, "%s %s", opts, capped_opts);
    char *dir = rt->cache_dir;
    if (cache_dir && *cache_dir) snprintf(dir, sizeof rt->cache_dir, "%s", cache_dir);
    else default_cache_dir(dir, sizeof rt->cache_dir);
    for (int which = 1; which <= (rt->is_nvidia ? 2 : 1); which++) {
        char *src = program_source(which == 1 ? RT_PROG_MAIN : RT_PROG_CAPPED);
        if (!src) { snprintf(err, errlen, "out of memory"); return -1; }
        int hit = 0;
        int rc = build_program(rt, src, which == 1 ? opts : opts2, dir, which == 1 ? &rt->prog : &rt->prog_capped,
                               &hit, 0, err, errlen);
        free(src);
        if (rc) return -1;
        if (which == 1) rt->cache_hit = hit;
        else rt->cache_hit &= hit;
    }
    /* wgmma is sm_90a only: compute capability 9.0, not the later ones */
    if (rt->is_nvidia && rt->nv_cc == 90) {
        char *src = program_source(RT_PROG_SM90A), opts3[sizeof rt->build_opts + sizeof sm90a_opts + 1];
        snprintf(opts3, sizeof opts3, "%s %s", opts, sm90a_opts);
        char why[256] = "out of memory";
        int hit = 0;
        if (!src || build_program(rt, src, opts3, dir, &rt->prog_sm90a, &hit, 1, why, sizeof why)) {
            rt->prog_sm90a = NULL;
            fprintf(stderr, "clgemma: the wgmma tile products are unavailable (%s); prefill takes mmta\n", why);
        }
        rt->cache_hit &= hit;
        free(src);
    }
    rt->build_seconds = monotonic_seconds() - t0;
    return 0;
}

cl_kernel rt_kernel(cl_runtime *rt, const char *name, char *err, size_t errlen)
{
    cl_int e;
    cl_kernel k = clCreateKernel(rt->prog, name, &e);
    if (!k && rt->prog_capped) k = clCreateKernel(rt->prog_capped, name, &e);
    if (!k && rt->prog_sm90a) k = clCreateKernel(rt->prog_sm90a, name, &e);
    if (!k) snprintf(err, errlen, "kernel '%s': %s", name, rt_errstr(e));
    return k;
}

cl_kernel rt_synth_kernel(cl_runtime *rt, const char *name, char *err, size_t errlen)
{
    if (!rt->prog) { snprintf(err, errlen, "kernel '%s': rt_build has not run", name); return NULL; }
    if (!rt->prog_synth) {
        char *src = program_source(RT_PROG_SYNTH);
        if (!src) { snprintf(err, errlen, "out of memory"); return NULL; }
        int hit = 0;
        int rc = build_program(rt, src, rt->build_opts, rt->cache_dir, &rt->prog_synth, &hit, 0, err, errlen);
        free(src);
        if (rc) return NULL;
    }
    cl_int e;
    cl_kernel k = clCreateKernel(rt->prog_synth, name, &e);
    if (!k) snprintf(err, errlen, "kernel '%s': %s", name, rt_errstr(e));
    return k;
}

cl_mem rt_alloc(cl_runtime *rt, size_t bytes, const void *host, char *err, size_t errlen)
{
    cl_int e;
    if (bytes == 0) bytes = 16;
    if (bytes > rt->max_alloc) {
        snprintf(err, errlen, "buffer of %.1f MiB exceeds the device's max allocation (%.1f MiB)",
                 bytes / 1048576.0, rt->max_alloc / 1048576.0);
        return NULL;
    }
    cl_mem m = clCreateBuffer(rt->ctx, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                              (void *)host, &e);
    if (!m) snprintf(err, errlen, "device allocation of %.1f MiB failed: %s", bytes / 1048576.0, rt_errstr(e));
    return m;
}

/* the settings the runtime and the engine read themselves; the rest are the ops policy's
 * (ops/policy.c), docs/PERF.md says what each does */
static const char *const known_settings[] = { "CL_DEFS" };

const char *rt_setting(cl_runtime *rt, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < rt->n_settings; i++) {
        const char *s = rt->settings[i];
        if (strncmp(s, name, n) == 0 && s[n] == '=') return s + n + 1;
    }
    return NULL;
}

int rt_setting_int(cl_runtime *rt, const char *name, int min, int def)
{
    const char *v = rt_setting(rt, name);
    return v && atoi(v) >= min ? atoi(v) : def;
}

int rt_setting_known(const char *setting)
{
    const char *eq = strchr(setting, '=');
    size_t n = eq ? (size_t)(eq - setting) : strlen(setting);
    for (size_t k = 0; eq && k < sizeof known_settings / sizeof *known_settings; k++)
        if (strlen(known_settings[k]) == n && strncmp(known_settings[k], setting, n) == 0) return 1;
    return 0;
}

void rt_destroy(cl_runtime *rt)
{
    if (rt->prog) clReleaseProgram(rt->prog);
    if (rt->prog_capped) clReleaseProgram(rt->prog_capped);
    if (rt->prog_synth) clReleaseProgram(rt->prog_synth);
    if (rt->prog_sm90a) clReleaseProgram(rt->prog_sm90a);
    if (rt->q) clReleaseCommandQueue(rt->q);
    if (rt->ctx) clReleaseContext(rt->ctx);
    memset(rt, 0, sizeof *rt);
}
