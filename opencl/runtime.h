/* runtime.h — OpenCL device choice, context and queue, program build with an on-disk binary
 * cache, and small helpers for buffers and launches. One runtime per engine. */
#ifndef CLGEMMA_RUNTIME_H
#define CLGEMMA_RUNTIME_H

#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>

#define RT_MAX_SETTINGS 32

/* The programs the kernel files build into (opencl/kernels/manifest.def says which go where):
 * every device builds MAIN; NVIDIA also CAPPED (the tile products under a register cap), and at
 * compute capability 9.0 SM90A (wgmma: its PTX retargeted to sm_90a); SYNTH (the synthetic weight
 * fill) builds on first use. */
enum rt_prog { RT_PROG_MAIN = 1, RT_PROG_CAPPED = 2, RT_PROG_SYNTH = 4, RT_PROG_SM90A = 8 };
/* one kernel file: its name, the programs it goes to (RT_PROG_* bits), its source */
typedef struct rt_kernel_file { const char *name; int progs; const char *src; } rt_kernel_file;
/* every kernel file in build order, ended by a NULL name (generated from the manifest by
 * tools/embed_kernels.sh) */
extern const rt_kernel_file rt_kernel_files[];

typedef struct cl_runtime {
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;         /* RT_PROG_MAIN */
    cl_program prog_capped;  /* RT_PROG_CAPPED (NVIDIA) */
    cl_program prog_synth;   /* RT_PROG_SYNTH, once rt_synth_kernel has built it */
    cl_program prog_sm90a;   /* RT_PROG_SM90A (NVIDIA compute capability 9.0), NULL if it did not build */
    char build_opts[1024];   /* rt_build's options and cache directory, for programs built later */
    char cache_dir[768];
    char device_name[256];
    char platform_name[128];
    char driver[128];
    int is_gpu, is_nvidia, is_cpu;
    int nv_cc;               /* NVIDIA compute capability as 10 * major + minor (90: Hopper), else 0 */
    uint64_t global_mem;
    uint64_t max_alloc;
    size_t max_wg;
    int profiling;
    double build_seconds;
    int cache_hit;
    /* measurement settings NAME=VALUE (engine_opts.settings, from clgemma bench --set), borrowed
     * while the engine loads */
    const char *const *settings;
    int n_settings;
} cl_runtime;

/* Lists platforms and devices on stdout (clgemma devices; plain: engine_list_devices's lines). Returns
 * the number of devices. */
int  rt_list_devices(int plain);
/* The device spec names and its facts (name, type, memory), without a context: what a fit report
 * needs. spec: "P:D", or NULL (env CLGEMMA_DEVICE, else first GPU, else first device) */
int  rt_pick(cl_runtime *rt, const char *spec, char *err, size_t errlen);
/* rt_pick, then the context and queue */
int  rt_create(cl_runtime *rt, const char *spec, int profiling, char *err, size_t errlen);
/* Builds the embedded kernel sources of the main program (and on NVIDIA the capped one, and the
 * sm90a one where it applies) with options (plus device-derived -D flags), using the program-binary
 * cache in cache_dir (NULL: the default location). The sm90a program failing to build is not an
 * error: its kernels are then absent (one line on stderr says why). */
int  rt_build(cl_runtime *rt, const char *options, const char *cache_dir, char *err, size_t errlen);
void rt_destroy(cl_runtime *rt);

/* The value of measurement setting name (e.g. "CL_DEFS"), or NULL when it is not set. */
const char *rt_setting(cl_runtime *rt, const char *name);
/* int value of a setting, or def when it is not set or below min */
int  rt_setting_int(cl_runtime *rt, const char *name, int min, int def);
/* 1 when setting ("NAME=VALUE") is one the runtime or the engine reads itself (CL_DEFS, MAX_BATCH);
 * the others belong to the ops policy (ops_policy_apply) */
int  rt_setting_known(const char *setting);

/* a kernel of the main, capped or sm90a program */
cl_kernel rt_kernel(cl_runtime *rt, const char *name, char *err, size_t errlen);
/* a kernel of the synthetic weight fill's program, which the first call builds (after rt_build, with
 * its options and cache): only synthetic models pay for it */
cl_kernel rt_synth_kernel(cl_runtime *rt, const char *name, char *err, size_t errlen);
cl_mem    rt_alloc(cl_runtime *rt, size_t bytes, const void *host, char *err, size_t errlen);

const char *rt_errstr(cl_int e);

#endif
